"""The bad-input corpus: every command, fed malformed models, configs, options, stores, predictor folders and
unwritable outputs, must answer with exit code 2 and one line on stderr, without a traceback, and write nothing.

The corpus is generated here, in the test run (no committed binaries): `corpus_assets` builds the bad files once,
each case runs `main([...])` in-process in its own empty working directory (where the default output paths
point), with the temporary-file directory pointed into it as well, so a leftover temporary folder is caught too.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import conv_bn_relu_model, exported_model
from onnx import TensorProto, helper

from hase import paths
from hase.cli import main

REPO = Path(__file__).resolve().parents[2]
DEVICES = str(REPO / paths.DEVICES_CONFIG)
PREDICTOR_CONFIG = str(REPO / paths.PREDICTOR_CONFIG)
SHIPPED = paths.SHIPPED_PREDICTORS / paths.DEFAULT_DEVICE
ODD = "odd [dir] x"  # a folder whose name rich would read as markup, with spaces


@dataclass(frozen=True)
class Case:
    """One bad input: the argv (placeholders {A} assets, {W} the case's working directory, {U} an unwritable
    folder, {F} a regular file) and, optionally, text the error line must contain."""

    id: str
    argv: tuple[str, ...]
    expect: str | None = None

    def args(self, assets: Path, work: Path, unwritable: Path) -> list[str]:
        subs = {"{A}": str(assets), "{W}": str(work), "{U}": str(unwritable), "{F}": str(assets / "regular_file")}
        out = []
        for arg in self.argv:
            text = arg
            for key, value in subs.items():
                text = text.replace(key, value)
            out.append(text)
        return out


def case(id: str, *argv: str, expect: str | None = None) -> Case:
    return Case(id, argv, expect)


# ---------------------------------------------------------------- the corpus

BAD_MODELS = ["random", "truncated", "empty", "directory", "text", "unknown_domain", "unknown_op", "zero_dim",
              "huge_shape", "huge_output", "symbolic", "missing_external", "not_onnx_json", "no_nodes",
              "bad_opset", "type_mismatch"]
MODEL_COMMANDS = {
    "split": ("split", "{M}", "--out", "{W}/kernels"),
    "profile": ("profile", "{M}", "--workdir", "{W}/prof"),
    "predict": ("predict", "{M}"),
}
MODEL_CASES = [Case(f"{cmd}-model-{m}", tuple(a.replace("{M}", f"{{A}}/m/{m}.onnx") for a in argv))
               for m in BAD_MODELS for cmd, argv in MODEL_COMMANDS.items()]

OK = "{A}/m/ok.onnx"
STORE = "{A}/s/valid.sqlite"  # a real store (one model collected with quick timing settings)
SYM = "{A}/m/symbolic.onnx"
BAD_SHAPES = {"no-equals": "x", "no-dims": "x=", "no-name": "=1,3,16,16", "letters": "x=a,b,c,d",
              "negative": "x=1,-3,16,16", "zero": "x=0,3,16,16", "unknown-input": "nosuch=1,3,16,16",
              "wrong-rank": "x=1,3,16", "conflict": "x=2,3,16,16", "huge": "x=1000000000,3,8,8"}
SHAPE_CASES = [case(f"{cmd}-input-shape-{name}", *argv, "--input-shape", shape)
               for name, shape in BAD_SHAPES.items()
               for cmd, argv in (("split", ("split", OK, "--out", "{W}/k")), ("profile", ("profile", OK)),
                                 ("predict", ("predict", OK)))]
SHAPE_CASES += [case("predict-symbolic-huge", "predict", SYM, "--input-shape", "x=1000000000,3,8,8"),
                case("profile-symbolic-huge", "profile", SYM, "--input-shape", "x=100000000,3,8,8"),
                case("split-symbolic-huge", "split", SYM, "--out", "{W}/k", "--input-shape", "x=100000000,3,8,8")]

OPTION_CASES = [
    case("no-command-args", "predict"),
    case("unknown-command", "nosuch"),
    case("unknown-pipeline-command", "pipeline", "nosuch"),
    case("unknown-option", "predict", OK, "--nosuch"),
    case("split-unknown-ep", "split", OK, "--out", "{W}/k", "--ep", "tpu"),
    case("split-unknown-opt-level", "split", OK, "--out", "{W}/k", "--opt-level", "max"),
    case("split-missing-out", "split", OK),
    case("profile-unknown-ep", "profile", OK, "--ep", "tpu"),
    case("profile-runs-zero", "profile", OK, "--runs", "0"),
    case("profile-runs-negative", "profile", OK, "--runs", "-3"),
    case("profile-warmup-negative", "profile", OK, "--warmup", "-1"),
    case("profile-top-negative", "profile", OK, "--top", "-1"),
    case("profile-threads-negative", "profile", OK, "--threads", "-2"),
    case("profile-runs-not-a-number", "profile", OK, "--runs", "many"),
    case("profile-model-and-trace", "profile", OK, "--trace", "{A}/t/ok.json"),
    case("profile-neither", "profile"),
    case("profile-skip-runs-without-trace", "profile", OK, "--skip-runs", "1"),
    case("profile-skip-runs-negative", "profile", "--trace", "{A}/t/ok.json", "--skip-runs", "-1"),
    case("profile-cuda-unavailable", "profile", OK, "--ep", "cuda"),
    case("predict-top-negative", "predict", OK, "--top", "-1"),
    case("predict-unknown-device", "predict", OK, "--device", "tpu-9t"),
    case("predict-unknown-target", "predict", OK, "--target", "hot"),
    case("predict-missing-model", "predict", "{W}/nope.onnx"),
    case("predict-empty-dir", "predict", "{A}/empty_dir"),
    case("predict-threads-zero", "predict", OK, "--threads", "0", expect="at least 1"),
    case("predict-threads-not-numbers", "predict", OK, "--threads", "two", expect="--threads"),
    case("predict-thread-model-alone", "predict", OK, "--thread-model", "{F}", expect="--threads"),
    case("predict-thread-model-not-one", "predict", OK, "--threads", "2", "--thread-model", "{F}",
         expect="not a thread model"),
    case("predict-thread-model-missing", "predict", OK, "--threads", "2", "--thread-model", "{W}/nope.npz",
         expect="no such thread model"),
    case("predict-threads-with-measure", "predict", OK, "--threads", "2", "--measure", expect="--threads"),
    case("collect-limit-negative", "collect", "--zoo", "none", "--model", OK, "--devices", DEVICES,
         "--store", "{W}/s.sqlite", "--limit", "-1"),
    case("collect-unknown-device", "collect", "--zoo", "none", "--model", OK, "--devices", DEVICES,
         "--device", "tpu-9t", "--store", "{W}/s.sqlite"),
    case("collect-cuda-unavailable", "collect", "--zoo", "none", "--model", OK, "--devices", DEVICES,
         "--ep", "cuda", "--store", "{W}/s.sqlite"),
    case("collect-missing-model", "collect", "--zoo", "none", "--model", "{W}/nope.onnx", "--devices", DEVICES,
         "--store", "{W}/s.sqlite"),
    case("collect-threads-negative", "collect", "--zoo", "none", "--model", OK, "--devices", DEVICES,
         "--ep", "cpu", "--threads", "-1", "--store", "{W}/s.sqlite"),
    case("train-unknown-target", "train", "--store", "{W}/nope.sqlite", "--config", PREDICTOR_CONFIG,
         "--targets", "hot", "--out", "{W}/p"),
    case("train-bad-save-targets", "train", "--save-targets", "some"),
    case("evaluate-unknown-target", "evaluate", "--store", STORE, "--target", "hot", "--out", "{W}/r"),
    case("evaluate-store-of-another-predictor", "evaluate", "--store", STORE, "--out", "{W}/r"),
    case("train-unknown-device", "train", "--store", STORE, "--config", PREDICTOR_CONFIG, "--device", "tpu-9t",
         "--out", "{W}/p"),
    case("train-unknown-target-real-store", "train", "--store", STORE, "--config", PREDICTOR_CONFIG,
         "--targets", "warm,hot", "--out", "{W}/p"),
    case("evaluate-unknown-device", "evaluate", "--store", "{W}/nope.sqlite", "--device", "tpu-9t",
         "--out", "{W}/r"),
    case("simulate-batches-negative", "pipeline", "simulate", "--batches", "-1"),
    case("simulate-batch-zero", "pipeline", "simulate", "--batch", "0", "--batches", "2"),
    case("simulate-width-zero", "pipeline", "simulate", "--width", "0", "--batches", "2"),
    case("simulate-width-huge", "pipeline", "simulate", "--width", "200000", "--batches", "2"),
    case("simulate-layers-zero", "pipeline", "simulate", "--layers", "0", "--batches", "2"),
    case("simulate-dp-empty", "pipeline", "simulate", "--dp", "", "--batches", "2"),
    case("simulate-dp-unknown-device", "pipeline", "simulate", "--dp", "cpu,tpu:0", "--batches", "2"),
    case("simulate-devices-unknown", "pipeline", "simulate", "--devices", "cpu,gpu", "--batches", "2"),
    case("simulate-devices-one", "pipeline", "simulate", "--devices", "cpu", "--batches", "2"),
    case("simulate-queue-depth-zero", "pipeline", "simulate", "--queue-depth", "0", "--batches", "2"),
    case("simulate-warmup-negative", "pipeline", "simulate", "--warmup", "-1", "--batches", "2"),
    case("simulate-hw-sample-every-zero", "pipeline", "simulate", "--hw-sample-every", "0", "--batches", "2"),
    case("simulate-hw-sample-block-zero", "pipeline", "simulate", "--hw-sample-block", "0", "--batches", "2"),
    case("simulate-trace-without-events", "pipeline", "simulate", "--no-trace-events", "--trace", "{W}/t.json",
         "--batches", "2"),
    case("simulate-unknown-predictor-device", "pipeline", "simulate", "--predict", "tpu-9t", "--batches", "2"),
    case("pipeline-run-batches-negative", "pipeline", "run", "{A}/c/pipeline_ok.toml", "--batches", "-5"),
    case("pipeline-run-warmup-negative", "pipeline", "run", "{A}/c/pipeline_ok.toml", "--warmup", "-1"),
    case("zoo-missing-config", "zoo", "--config", "{W}/nope.toml", "--list"),
]

BAD_TOML = ["invalid", "non_utf8", "directory", "missing"]
CONFIG_CASES = [
    *[case(f"zoo-config-{c}", "zoo", "--config", f"{{A}}/c/{c}.toml", "--out", "{W}/zoo") for c in BAD_TOML],
    *[case(f"zoo-config-{c}", "zoo", "--config", f"{{A}}/c/zoo_{c}.toml", "--out", "{W}/zoo")
      for c in ("wrong_type", "negative", "zero_batch", "unknown_key", "unknown_family", "huge_grid", "huge_batch",
                "empty")],
    *[case(f"train-config-{c}", "train", "--config", f"{{A}}/c/{c}.toml", "--store", "{W}/nope.sqlite",
           "--out", "{W}/p") for c in BAD_TOML],
    *[case(f"train-config-{c}", "train", "--config", f"{{A}}/c/train_{c}.toml", "--store", STORE,
           "--out", "{W}/p") for c in ("unknown_key", "wrong_type", "bad_target", "negative")],
    *[case(f"collect-config-{c}", "collect", "--zoo", "none", "--model", OK, "--devices", f"{{A}}/c/{c}.toml",
           "--store", "{W}/s.sqlite") for c in BAD_TOML],
    *[case(f"collect-config-{c}", "collect", "--zoo", "none", "--model", OK, "--devices",
           f"{{A}}/c/devices_{c}.toml", "--store", "{W}/s.sqlite")
      for c in ("runs_zero", "negative", "wrong_type", "unknown_key", "no_device", "bad_ep")],
    *[case(f"collect-zoo-{c}", "collect", "--zoo", f"{{A}}/c/{c}.toml", "--devices", DEVICES,
           "--store", "{W}/s.sqlite") for c in ("invalid", "zoo_wrong_type")],
    *[case(f"pipeline-config-{c}", "pipeline", "run", f"{{A}}/c/{c}.toml") for c in BAD_TOML],
    *[case(f"pipeline-config-{c}", "pipeline", "run", f"{{A}}/c/pipeline_{c}.toml")
      for c in ("no_stages", "unknown_key", "wrong_type", "negative_batches", "missing_model", "bad_model",
                "unknown_device", "os_system", "zero_streams", "bad_ratios", "huge_input")],
]

STORES = ["text", "empty", "foreign", "random", "directory"]
STORE_CASES = [
    *[case(f"train-store-{s}", "train", "--store", f"{{A}}/s/{s}.sqlite", "--config", PREDICTOR_CONFIG,
           "--out", "{W}/p") for s in [*STORES, "missing"]],
    *[case(f"evaluate-store-{s}", "evaluate", "--store", f"{{A}}/s/{s}.sqlite", "--out", "{W}/r")
      for s in [*STORES, "missing"]],
    # an empty file is a new SQLite database, so collect may start a store in it: not bad input there
    *[case(f"collect-store-{s}", "collect", "--zoo", "none", "--model", OK, "--devices", DEVICES,
           "--store", f"{{A}}/s/{s}.sqlite", "--limit", "0") for s in STORES if s != "empty"],
]

PREDICTORS = ["no_manifest", "edited_manifest", "manifest_not_json", "manifest_empty", "manifest_list",
              "manifest_non_utf8", "manifest_outside_file", "tampered_arrays", "empty", "manifest_directory"]
PREDICTOR_CASES = [
    *[case(f"predict-predictors-{p}", "predict", OK, "--predictors", f"{{A}}/p/{p}") for p in PREDICTORS],
    case("predict-predictors-file", "predict", OK, "--predictors", "{F}"),
    case("predictors-file", "predictors", "--predictors", "{F}"),
    *[case(f"predictors-{p}", "predictors", "--predictors", f"{{A}}/p/{p}")
      for p in ("no_manifest", "edited_manifest", "manifest_list", "tampered_arrays")],
    case("predict-predictors-missing", "predict", OK, "--predictors", "{W}/nope"),
    case("simulate-predictors-no-manifest", "pipeline", "simulate", "--batches", "2", "--predict", "cpu-1t",
         "--predictors", "{A}/p/no_manifest"),
    *[case(f"evaluate-predictors-{p}", "evaluate", "--store", STORE, "--predictors", f"{{A}}/p/{p}",
           "--out", "{W}/r") for p in ("edited_manifest", "no_manifest", "tampered_arrays")],
]

OUTPUT_CASES = [
    case("split-out-unwritable", "split", OK, "--out", "{U}/kernels"),
    case("split-out-is-file", "split", OK, "--out", "{F}"),
    case("split-out-under-file", "split", OK, "--out", "{F}/kernels"),
    case("zoo-out-unwritable", "zoo", "--config", "{A}/c/zoo_ok.toml", "--out", "{U}/zoo"),
    case("zoo-out-is-file", "zoo", "--config", "{A}/c/zoo_ok.toml", "--out", "{F}"),
    case("profile-workdir-unwritable", "profile", OK, "--workdir", "{U}/prof"),
    case("profile-workdir-is-file", "profile", OK, "--workdir", "{F}"),
    case("profile-out-trace-unwritable", "profile", OK, "--out-trace", "{U}/t.json"),
    case("profile-out-trace-is-dir", "profile", OK, "--out-trace", "{A}/empty_dir"),
    case("profile-trace-next-to-unwritable", "profile", "--trace", "{A}/t/ok.json", "--out-trace", "{F}/t.json"),
    case("profile-trace-missing", "profile", "--trace", "{W}/nope.json"),
    case("profile-trace-directory", "profile", "--trace", "{A}/empty_dir"),
    case("profile-trace-not-json", "profile", "--trace", "{A}/t/not_json.json", "--out-trace", "{W}/t.json"),
    case("profile-trace-non-utf8", "profile", "--trace", "{A}/t/non_utf8.json", "--out-trace", "{W}/t.json"),
    case("profile-trace-truncated", "profile", "--trace", "{A}/t/truncated.json", "--out-trace", "{W}/t.json"),
    case("profile-trace-no-events", "profile", "--trace", "{A}/t/no_events.json", "--out-trace", "{W}/t.json"),
    case("profile-trace-deep", "profile", "--trace", "{A}/t/deep.json", "--out-trace", "{W}/t.json"),
    case("train-out-unwritable", "train", "--config", PREDICTOR_CONFIG, "--store", "{W}/nope.sqlite",
         "--out", "{U}/p"),
    case("evaluate-out-unwritable", "evaluate", "--store", "{W}/nope.sqlite", "--out", "{U}/r"),
    case("evaluate-out-is-file", "evaluate", "--store", "{W}/nope.sqlite", "--out", "{F}"),
    case("simulate-trace-unwritable", "pipeline", "simulate", "--batches", "2", "--trace", "{U}/t.json"),
    case("simulate-csv-unwritable", "pipeline", "simulate", "--batches", "2", "--csv", "{U}/e.csv"),
    case("simulate-trace-is-dir", "pipeline", "simulate", "--batches", "2", "--trace", "{A}/empty_dir"),
    case("simulate-workdir-is-file", "pipeline", "simulate", "--batches", "2", "--workdir", "{F}"),
    case("collect-store-unwritable", "collect", "--zoo", "none", "--model", OK, "--devices", DEVICES,
         "--store", "{U}/s.sqlite", "--limit", "0"),
]

ODD_CASES = [  # paths rich would read as markup, with spaces: the error names them as they are
    case("predict-odd-path-bad-model", "predict", f"{{A}}/{ODD}/m [red].onnx", expect="m [red].onnx"),
    case("split-odd-path-bad-model", "split", f"{{A}}/{ODD}/m [/b].onnx", "--out", "{W}/k", expect="m [/b].onnx"),
    case("profile-odd-path-bad-model", "profile", f"{{A}}/{ODD}/m [red].onnx", expect="m [red].onnx"),
    case("zoo-odd-path-bad-config", "zoo", "--config", f"{{A}}/{ODD}/c [bold].toml", "--list",
         expect="c [bold].toml"),
    case("pipeline-odd-path-bad-config", "pipeline", "run", f"{{A}}/{ODD}/c [bold].toml", expect="c [bold].toml"),
    case("split-odd-out-under-file", "split", OK, "--out", f"{{A}}/{ODD}/f [x]/k", expect="f [x]"),
]

CASES = [*MODEL_CASES, *SHAPE_CASES, *OPTION_CASES, *CONFIG_CASES, *STORE_CASES, *PREDICTOR_CASES, *OUTPUT_CASES,
         *ODD_CASES]


# ---------------------------------------------------------------- building the bad inputs


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 17),)) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    return m


def _relu(shape, elem=TensorProto.FLOAT, op="Relu", domain="", opsets=(("", 17),)) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", elem, shape)
    y = helper.make_tensor_value_info("y", elem, shape)
    return _model([helper.make_node(op, ["x"], ["y"], name="n", domain=domain)], [x], [y], opsets=opsets)


def _bad_models(folder: Path, rng: np.random.Generator) -> None:
    folder.mkdir(parents=True)
    real = exported_model("timm_semnasnet_050_cls10_b1").read_bytes()
    files = {
        "random": rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        "truncated": real[: len(real) // 2],
        "empty": b"",
        "text": b"this is not an ONNX model\n",
        "not_onnx_json": b'{"graph": {"node": []}}\n',
    }
    for name, data in files.items():
        (folder / f"{name}.onnx").write_bytes(data)
    (folder / "directory.onnx").mkdir()
    onnx.save(conv_bn_relu_model(), folder / "ok.onnx")
    onnx.save(_relu([1, 4], op="Frobnicate", domain="com.example", opsets=(("", 17), ("com.example", 1))),
              folder / "unknown_domain.onnx")
    onnx.save(_relu([1, 4], op="Frobnicate"), folder / "unknown_op.onnx")
    onnx.save(_relu([1, 4], opsets=(("", 99),)), folder / "bad_opset.onnx")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    onnx.save(_model([helper.make_node("Add", ["x", "i"], ["y"], name="n")], [x],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                     [helper.make_tensor("i", TensorProto.INT64, [4], [1, 2, 3, 4])]), folder / "type_mismatch.onnx")
    big = helper.make_tensor("shape", TensorProto.INT64, [4], [1000, 1000, 1000, 1000])
    onnx.save(_model([helper.make_node("Expand", ["x", "shape"], ["y"], name="n")], [x],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000, 1000, 1000, 1000])], [big]),
              folder / "huge_output.onnx")
    onnx.save(_relu([0, 3, 8, 8]), folder / "zero_dim.onnx")
    onnx.save(_relu([1, 3, 100000, 100000]), folder / "huge_shape.onnx")
    onnx.save(_relu(["N", 3, 8, 8]), folder / "symbolic.onnx")
    onnx.save(_model([], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])]), folder / "no_nodes.onnx")
    ext = conv_bn_relu_model()
    onnx.save(ext, folder / "missing_external.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="missing_external.weights", size_threshold=0)
    (folder / "missing_external.weights").unlink()


TOML = {
    "invalid": b"seed = [1, 2\n[families\n",
    "non_utf8": b"seed = 0\n# \xff\xfe caf\xe9\n",
    "zoo_ok": b"[families]\nalexnet = [{ width = 0.125, resolution = 32 }]\n",
    "zoo_wrong_type": b'seed = "zero"\n[families]\nalexnet = [{ width = 0.125 }]\n',
    "zoo_negative": b"[families]\nalexnet = [{ width = -0.5, resolution = 32 }]\n",
    "zoo_zero_batch": b"[families]\nalexnet = [{ width = 0.125, resolution = 32, batch = 0 }]\n",
    "zoo_unknown_key": b"colour = 1\n[families]\nalexnet = [{ width = 0.125 }]\n",
    "zoo_unknown_family": b"[families]\nlenet = [{ width = 1 }]\n",
    "zoo_huge_grid": ("[families]\nresnet = [{ depth = [10, 18, 26, 34, 50], width = ["
                      + ", ".join(str(round(0.05 + 0.01 * i, 2)) for i in range(40)) + "], resolution = ["
                      + ", ".join(str(32 + 8 * i) for i in range(20)) + "] }]\n").encode(),
    "zoo_huge_batch": b"[families]\nalexnet = [{ width = 0.125, resolution = 96, batch = 1000000000 }]\n",
    "zoo_empty": b"",
    "train_unknown_key": b"[training]\ncolour = 1\n",
    "train_wrong_type": b'[training]\nmin_samples = "eight"\nrandom_state = "zero"\n',
    "train_bad_target": b'[training]\ntargets = ["warm", "hot"]\n',
    "train_negative": b"[training]\nmin_samples = -3\ntree_scale = -1.0\n[forest.default]\nn_estimators = -5\n",
    "devices_quick": b"[kernel_timing]\nwarmup = 1\nmin_runs = 2\nmax_runs = 3\nmin_time_s = 0.001\n"
                     b"max_time_s = 0.01\n[model_timing]\nwarmup = 1\nmin_runs = 2\nmax_runs = 3\nmin_time_s = 0.001\n"
                     b"max_time_s = 0.01\n[profile]\nwarmup = 1\nruns = 2\n[cold]\nsessions = 2\nmax_mb = 16\n"
                     b'[[device]]\nname = "cpu-1t"\nep = "cpu"\n',
    "devices_runs_zero": b'[profile]\nruns = 0\n[[device]]\nname = "cpu-1t"\nep = "cpu"\n',
    "devices_negative": b'[kernel_timing]\nmin_runs = -5\nwarmup = -1\n[[device]]\nname = "cpu-1t"\nep = "cpu"\n',
    "devices_wrong_type": b'[kernel_timing]\nmax_time_s = "fast"\n[[device]]\nname = "cpu-1t"\nep = "cpu"\n',
    "devices_unknown_key": b'[kernel_timing]\nspeed = 3\n[[device]]\nname = "cpu-1t"\nep = "cpu"\n',
    "devices_no_device": b"[profile]\nruns = 3\n",
    "devices_bad_ep": b'[[device]]\nname = "tpu"\nep = "tpu"\n',
    "pipeline_ok": b'[pipeline]\nbatch = 4\nfeatures = 8\nbatches = 2\n[[stages]]\nname = "a"\ndevice = "cpu"\n'
                   b"dummy = { width = 8, layers = 1 }\n",
    "pipeline_no_stages": b"[pipeline]\nbatch = 4\n",
    "pipeline_unknown_key": b'[pipeline]\ncolour = 1\n[[stages]]\nname = "a"\ndevice = "cpu"\ndummy = { width = 8 }\n',
    "pipeline_wrong_type": b'[pipeline]\nbatch = "four"\n[[stages]]\nname = "a"\ndevice = "cpu"\n'
                           b"dummy = { width = 8 }\n",
    "pipeline_negative_batches": b'[pipeline]\nbatches = -3\nbatch = 4\nfeatures = 8\n[[stages]]\nname = "a"\n'
                                 b'device = "cpu"\ndummy = { width = 8 }\n',
    "pipeline_missing_model": b'[[stages]]\nname = "a"\ndevice = "cpu"\nmodel = "nope.onnx"\n',
    "pipeline_bad_model": b'[[stages]]\nname = "a"\ndevice = "cpu"\nmodel = "../m/random.onnx"\n',
    "pipeline_unknown_device": b'[pipeline]\nbatch = 4\nfeatures = 8\n[[stages]]\nname = "a"\ndevice = "tpu:0"\n'
                               b"dummy = { width = 8 }\n",
    "pipeline_os_system": b'[pipeline]\nbatch = 4\nfeatures = 8\n[[stages]]\nname = "a"\ndevice = "host"\n'
                          b'function = "os:system"\n',
    "pipeline_zero_streams": b'[pipeline]\nbatch = 4\nfeatures = 8\n[[stages]]\nname = "a"\ndevice = "cpu"\n'
                             b"streams = 0\ndummy = { width = 8 }\n",
    "pipeline_bad_ratios": b'[pipeline]\nbatch = 4\nfeatures = 8\n[[stages]]\nname = "a"\n'
                           b"partition = { axis = 0, ratios = [0.7, 0.7] }\nexecutors = [\n"
                           b'  { device = "cpu", dummy = { width = 8 } },\n'
                           b'  { device = "cpu", dummy = { width = 8 } },\n]\n',
    "pipeline_huge_input": b'[pipeline]\nbatch = 100000\nfeatures = 1000000\n[[stages]]\nname = "a"\ndevice = "cpu"\n'
                           b"dummy = { width = 8 }\n",
}


def _configs(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, data in TOML.items():
        (folder / f"{name}.toml").write_bytes(data)
    (folder / "directory.toml").mkdir()


def _stores(folder: Path, rng: np.random.Generator, assets: Path) -> None:
    folder.mkdir(parents=True)
    code = main(["-q", "collect", "--zoo", "none", "--model", str(assets / "m" / "ok.onnx"), "--devices",
                 str(assets / "c" / "devices_quick.toml"), "--store", str(folder / "valid.sqlite")])
    assert code == 0, "collecting the corpus's valid store failed"
    (folder / "text.sqlite").write_text("not a database\n")
    (folder / "empty.sqlite").write_bytes(b"")
    (folder / "random.sqlite").write_bytes(rng.integers(0, 256, 8192, dtype=np.uint8).tobytes())
    (folder / "directory.sqlite").mkdir()
    with sqlite3.connect(folder / "foreign.sqlite") as db:
        db.execute("CREATE TABLE people (name TEXT, age INTEGER)")
        db.execute("INSERT INTO people VALUES ('ada', 36)")
    db.close()


def _predictors(root: Path, rng: np.random.Generator) -> None:
    """Copies of the shipped predictor, each broken one way, as `<root>/<case>/cpu-1t/`."""
    def copy(name: str) -> Path:
        dst = root / name / paths.DEFAULT_DEVICE
        shutil.copytree(SHIPPED, dst)
        return dst

    manifest = json.loads((SHIPPED / "manifest.json").read_text())
    (copy("no_manifest") / "manifest.json").unlink()
    edited = json.loads(json.dumps(manifest))
    cal = edited["targets"][edited["default_target"]]["calibration"]
    cal["alpha"] = cal["alpha"] * 1000
    (copy("edited_manifest") / "manifest.json").write_text(json.dumps(edited))
    (copy("manifest_not_json") / "manifest.json").write_text("{this is not json")
    (copy("manifest_empty") / "manifest.json").write_text("{}")
    (copy("manifest_list") / "manifest.json").write_text("[1, 2, 3]")
    (copy("manifest_non_utf8") / "manifest.json").write_bytes(b'{"format": "\xff\xfe"}')
    outside = json.loads(json.dumps(manifest))
    outside["files"]["../outside.npz"] = outside["files"].pop(next(f for f in outside["files"] if f.endswith(".npz")))
    (copy("manifest_outside_file") / "manifest.json").write_text(json.dumps(outside))
    tampered = copy("tampered_arrays")
    for npz in tampered.glob("*.npz"):
        npz.write_bytes(rng.integers(0, 256, 2048, dtype=np.uint8).tobytes())
    (root / "empty" / paths.DEFAULT_DEVICE).mkdir(parents=True)
    md = copy("manifest_directory")
    (md / "manifest.json").unlink()
    (md / "manifest.json").mkdir()


def _traces(folder: Path) -> None:
    folder.mkdir(parents=True)
    real = (REPO / "tests" / "data" / "profiles" / "ort132_cpu_tiny_cnn.json").read_bytes()
    (folder / "ok.json").write_bytes(real)
    (folder / "truncated.json").write_bytes(real[: len(real) // 2])
    (folder / "not_json.json").write_text("hello\n")
    (folder / "non_utf8.json").write_bytes(b"[\xff\xfe]")
    (folder / "no_events.json").write_text('{"traceEvents": [{"ph": "M", "name": "x"}]}')
    (folder / "deep.json").write_text("[" * 100000 + "]" * 100000)


def _odd(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "m [red].onnx").write_text("not a model [red]\n")
    (folder / "m [").mkdir()
    (folder / "m [" / "b].onnx").write_text("not a model\n")  # the path holds "[/b]", a closing tag to rich
    (folder / "c [bold].toml").write_bytes(b"x = [\n")
    (folder / "f [x]").write_text("a regular file\n")


@pytest.fixture(scope="module")
def corpus_assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every bad input of the corpus, built once for the module (read-only to the cases)."""
    root = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(10)
    _bad_models(root / "m", rng)
    _configs(root / "c")
    _stores(root / "s", rng, root)
    _predictors(root / "p", rng)
    _traces(root / "t")
    _odd(root / ODD)
    (root / "empty_dir").mkdir()
    (root / "regular_file").write_text("a file where a directory is expected\n")
    return root


def chmod_protects() -> bool:
    """Whether a read-only directory stops this process from writing (not when running as root)."""
    with tempfile.TemporaryDirectory() as tmp:
        ro = Path(tmp) / "ro"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            (ro / "probe").write_text("x")
        except PermissionError:
            return True
        finally:
            ro.chmod(stat.S_IRWXU)
        return False


@pytest.fixture(scope="module")
def unwritable(corpus_assets: Path) -> Path:
    """A folder nothing can be written into: read-only where chmod stops this user, else under a regular file."""
    if chmod_protects():
        ro = corpus_assets / "read_only"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
        return ro
    return corpus_assets / "regular_file" / "sub"


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under `root` with its size, mode and modification time.

    SQLite's housekeeping beside a WAL-mode store is left out: the shared-memory index (`-shm`) and an empty
    write-ahead log, which a read-only connection creates and cannot remove; they hold no data.
    """
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if name.endswith("-shm") or (name.endswith("-wal") and st.st_size == 0):
                continue
            out[str(p.relative_to(root))] = (st.st_size if not stat.S_ISDIR(st.st_mode) else 0, st.st_mode,
                                             st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else 0)
    return out


# ---------------------------------------------------------------- the test


def test_corpus_is_large_and_covers_every_command():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    assert len(CASES) >= 100
    commands = {c.argv[0] if c.argv[0] != "pipeline" else " ".join(c.argv[:2]) for c in CASES}
    assert {"zoo", "split", "collect", "profile", "train", "predict", "predictors", "evaluate", "pipeline run",
            "pipeline simulate"} <= commands


@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])  # all of them: ~15 s on 2 cores
def test_bad_input(bad: Case, corpus_assets: Path, unwritable: Path, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    tmp = tmp_path / "tmp"  # tempfile's folder for this case: must be empty again afterwards
    work.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv(paths.PREDICTORS_ENV, str(work / "user_predictors"))  # no predictor of this user's
    assets_before, work_before = snapshot(corpus_assets), snapshot(work)

    code = main(bad.args(corpus_assets, work, unwritable))

    out, err = capfd.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, f"exit code {code}; stderr: {err[-2000:]}"
    assert len(lines) == 1, f"{len(lines)} stderr lines:\n{err[-3000:]}"
    assert "Traceback" not in err + out
    assert lines[0].startswith("hase"), lines[0]
    assert "internal error" not in lines[0]
    if bad.expect:
        assert bad.expect in lines[0]
    assert snapshot(work) == work_before, "the command wrote into its working directory"
    assert snapshot(corpus_assets) == assets_before, "the command changed its inputs"
    assert not list(tmp.iterdir()), f"temporary files left: {sorted(p.name for p in tmp.iterdir())}"


@pytest.mark.slow
def test_unusual_but_valid_inputs_are_not_refused(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of the corpus: a string input and a path full of markup are fine, and the prediction of a
    model at such a path is printed whole (rich once read `[red]` in it as a style and lost the result), on one
    line whatever the temporary path's length: piped output is never wrapped, a table's title never (it wrapped
    wherever the path's length put the break, and a test joining the lines back lost a space)."""
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "COLUMNS"):  # stdout is a file here, whatever the CI says
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "models [red] x ["  # with the file names below, paths hold "[/b]": a closing tag to rich
    folder.mkdir()
    onnx.save(_relu([2], elem=TensorProto.STRING, op="Identity"), folder / "b] strings.onnx")
    onnx.save(conv_bn_relu_model(), folder / "b] conv.onnx")
    capfd.readouterr()
    assert main(["predict", str(folder / "b] conv.onnx")]) == 0
    out = capfd.readouterr().out
    assert f"{folder / 'b] conv.onnx'} on cpu-1t (" in out and "predicted latency" in out
    assert main(["split", str(folder / "b] strings.onnx"), "--out", str(tmp_path / "k [x]")]) == 0
    out = capfd.readouterr().out
    assert f"b] strings.onnx: 1 kernel node, 1 unique kernel -> {tmp_path / 'k [x]'}" in out and "Identity" in out
    assert main(["predict", str(folder)]) == 0  # batch mode: one table row per model
    assert "2 models predicted" in capfd.readouterr().out
