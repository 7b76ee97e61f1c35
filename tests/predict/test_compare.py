"""hase.predict.compare and `hase predict --compare`: a model predicted in every installed configuration, each on
its own ORT kernel graph, ranked fastest first. Real ONNX Runtime: the shipped `cpu-1t` predictor (at ORT's `all`
optimization level) beside a copy of it declared for the other level (`extended`), whose kernel graph of a CNN
differs. Every other shipped predictor (`SHIPPED_DEVICES`) is installed too: a test that wants exactly those two
configurations names them with `devices` / `--device`."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import onnx
import pytest
from conftest import SHIPPED_DEVICES, conv_bn_relu_model, exported_model

from hase import paths
from hase.cli import main
from hase.errors import HaseError
from hase.kernels import graph, split
from hase.predict.bundle import load_bundle, read_manifest
from hase.predict.compare import compare_models
from hase.predict.estimate import estimate_model
from hase.predict.identity import HostInfo
from hase.predict.manifest import MANIFEST, Manifest, json_default
from hase.runtime.types import EPConfig

CNN = "timm_semnasnet_050_cls10_b1"
SHIPPED_DIR = paths.SHIPPED_PREDICTORS / paths.DEFAULT_DEVICE
SHIPPED_LEVEL = read_manifest(SHIPPED_DIR).device_meta.opt_level
OTHER_LEVEL = "extended" if SHIPPED_LEVEL == "all" else "all"  # the level the copy declares
OTHER = f"cpu-1t-{OTHER_LEVEL}"


def copy_predictor(dest: Path, device: str, opt_level: str) -> Path:
    """The shipped predictor copied to `dest/device`, its manifest declaring `device` and `opt_level` (digest
    recomputed through `Manifest.to_dict`, so it verifies like a trained one)."""
    d = dest / device
    shutil.copytree(SHIPPED_DIR, d)
    m = Manifest.from_dict(json.loads((d / MANIFEST).read_text()))
    meta = dataclasses.replace(m.device_meta, device=device, opt_level=opt_level)
    (d / MANIFEST).write_text(json.dumps(dataclasses.replace(m, device=device, device_meta=meta).to_dict(),
                                         default=json_default))
    return d


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user predictors directory holding `OTHER` (the shipped `cpu-1t` stays visible beside it)."""
    user = tmp_path / "user"
    copy_predictor(user, OTHER, OTHER_LEVEL)
    monkeypatch.setenv(paths.PREDICTORS_ENV, str(user))
    return user


def shipped_host(**changes: object) -> HostInfo:
    """A host matching the shipped predictor's machine, with `changes`."""
    meta = read_manifest(SHIPPED_DIR).device_meta
    host = HostInfo(meta.cpu_model, meta.ort_version, (meta.execution_provider,), "", 4)
    return dataclasses.replace(host, **changes)  # type: ignore[arg-type]


def kernel_count(model: Path, opt_level: str) -> int:
    """Nodes of ORT's kernel graph of `model` at `opt_level`, one CPU thread."""
    ep = EPConfig(name="x", ep="cpu", intra_op_threads=1, inter_op_threads=1, opt_level=opt_level)
    return len(split.split(graph.file_kernel_graph(model, ep, with_weights=False)))


def test_copied_predictor_verifies_with_its_new_configuration(user_dir):
    m = read_manifest(user_dir / OTHER)
    assert (m.device, m.device_meta.opt_level) == (OTHER, OTHER_LEVEL) and OTHER_LEVEL != SHIPPED_LEVEL
    assert load_bundle(user_dir / OTHER).ep_config().opt_level == OTHER_LEVEL


def test_each_configuration_builds_its_own_kernel_graph_and_is_ranked(user_dir):
    model = exported_model(CNN)
    [comp] = compare_models([model], devices=[paths.DEFAULT_DEVICE, OTHER], host=shipped_host())
    assert sorted(r.config for r in comp.rows) == sorted([paths.DEFAULT_DEVICE, OTHER])
    assert comp.unusable == ()
    by = {r.config: r for r in comp.rows}
    assert (by[OTHER].identity.opt_level, by[paths.DEFAULT_DEVICE].identity.opt_level) == (OTHER_LEVEL, SHIPPED_LEVEL)
    n_other, n_shipped = kernel_count(model, OTHER_LEVEL), kernel_count(model, SHIPPED_LEVEL)
    assert n_other != n_shipped  # NCHWc convolutions and their reorders at `all`
    assert (by[OTHER].estimate.n_kernels, by[paths.DEFAULT_DEVICE].estimate.n_kernels) == (n_other, n_shipped)
    plain = estimate_model(model, load_bundle(SHIPPED_DIR))  # `hase predict` without --compare
    assert by[paths.DEFAULT_DEVICE].latency_ms == pytest.approx(plain.latency_ms)
    fast, slow = comp.rows
    assert fast.latency_ms < slow.latency_ms and (comp.fastest, comp.slowest) == (fast, slow)
    assert comp.ratio(fast) == 1.0 and comp.ratio(slow) == pytest.approx(slow.latency_ms / fast.latency_ms)
    assert comp.verdict() == (f"fastest: {fast.config} ({fast.latency_ms:.3f} ms), {comp.ratio(slow):.2f}× faster "
                              f"than {slow.config} ({slow.latency_ms:.3f} ms)")
    assert all(r.mismatches == () for r in comp.rows)


def test_host_mismatches_mark_each_configuration(user_dir, conv_model_path):
    [comp] = compare_models([conv_model_path], host=shipped_host(cpu_model="Other CPU", n_cpus=1))
    cpu = [r for r in comp.rows if r.identity.execution_provider == "CPUExecutionProvider"]
    assert len(cpu) >= 2 and all(len(r.mismatches) == 1 and r.mismatches[0].startswith("CPU 'Other CPU'")
                                 for r in cpu)
    # a GPU configuration (the shipped h100-cuda) also differs by its GPU and provider
    assert all(any(m.startswith("CPU 'Other CPU'") for m in r.mismatches) for r in comp.rows)
    row = comp.to_dict()["configs"][0]
    assert row["host_mismatches"] == list(comp.rows[0].mismatches)


def test_devices_restrict_and_an_unknown_device_is_named(user_dir, conv_model_path):
    [comp] = compare_models([conv_model_path], devices=[OTHER], host=shipped_host())
    assert [r.config for r in comp.rows] == [OTHER] and comp.fastest.config == OTHER
    assert "the only configuration" in comp.verdict()
    with pytest.raises(HaseError, match=rf"no installed predictor for device\(s\) \['tpu'\].*{OTHER}"):
        compare_models([conv_model_path], devices=["tpu"], host=shipped_host())


def test_a_broken_predictor_is_reported_and_the_rest_compared(user_dir, conv_model_path):
    broken = copy_predictor(user_dir, "cpu-broken", OTHER_LEVEL)
    (broken / f"{read_manifest(broken).default_target}.json").write_text("{}")  # a file the manifest lists
    [comp] = compare_models([conv_model_path], host=shipped_host())
    assert sorted(r.config for r in comp.predicted) == sorted([*SHIPPED_DEVICES, OTHER])  # every other one
    [(path, error)] = comp.unusable
    assert path.endswith("cpu-broken") and "sha256" in error


def test_a_shadowed_shipped_predictor_is_compared_under_its_own_label(tmp_path, monkeypatch, conv_model_path):
    user = tmp_path / "user"
    copy_predictor(user, paths.DEFAULT_DEVICE, OTHER_LEVEL)
    monkeypatch.setenv(paths.PREDICTORS_ENV, str(user))
    [comp] = compare_models([conv_model_path], host=shipped_host())
    assert paths.DEFAULT_DEVICE in SHIPPED_DEVICES
    others = [d for d in SHIPPED_DEVICES if d != paths.DEFAULT_DEVICE]  # not shadowed: under their own name
    assert sorted(r.config for r in comp.rows) == sorted(
        [paths.DEFAULT_DEVICE, f"{paths.DEFAULT_DEVICE} (shipped)", *others])


def test_cli_compare_table_and_verdict(user_dir, capsys):
    model = str(exported_model(CNN))
    two = ["--device", paths.DEFAULT_DEVICE, "--device", OTHER]
    assert main(["predict", model, "--compare", "--json", *two]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["config"]: r for r in out["configs"]}
    assert len(out["configs"]) == 2 and set(rows) == {paths.DEFAULT_DEVICE, OTHER}
    assert rows[OTHER]["opt_level"] == OTHER_LEVEL
    assert rows[paths.DEFAULT_DEVICE]["opt_level"] == SHIPPED_LEVEL
    assert rows[OTHER]["n_kernels"] != rows[paths.DEFAULT_DEVICE]["n_kernels"]
    fast, slow = out["configs"]
    assert (out["fastest"], out["slowest"], fast["ratio_to_fastest"]) == (fast["config"], slow["config"], 1.0)
    assert out["speedup"] == pytest.approx(slow["latency_ms"] / fast["latency_ms"])
    assert fast["interval_ms"][0] <= fast["latency_ms"] <= fast["interval_ms"][1]
    assert 0 <= fast["held_out_acc10"] <= 1 and fast["held_out_rmspe"] > 0
    assert main(["predict", model, "--compare", *two]) == 0
    text = capsys.readouterr().out
    assert all(f" {c}" in text for c in rows) and " all " in text and " extended " in text
    assert f"fastest: {fast['config']} ({fast['latency_ms']:.3f} ms), {out['speedup']:.2f}× faster than " \
           f"{slow['config']} ({slow['latency_ms']:.3f} ms)" in text


def test_cli_compare_batch_lists_a_failed_model(user_dir, tmp_path, capsys):
    onnx.save(conv_bn_relu_model(), tmp_path / "m.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    assert main(["predict", str(tmp_path), "--compare", "--json", "--device", paths.DEFAULT_DEVICE,
                 "--device", OTHER]) == 2
    junk, ok = json.loads(capsys.readouterr().out)  # sorted: junk.onnx, m.onnx
    assert junk["fastest"] is None and all(r["error"] for r in junk["configs"])
    assert ok["fastest"] in (paths.DEFAULT_DEVICE, OTHER) and len(ok["configs"]) == 2
    assert main(["predict", str(tmp_path / "m.onnx"), str(tmp_path / "m.onnx"), "--compare"]) == 0
    assert capsys.readouterr().out.count("fastest: ") == 2


def test_cli_compare_errors_are_one_line(user_dir, tmp_path, conv_model_path, capsys):
    m = str(conv_model_path)
    assert main(["predict", m, "--compare", "--device", "tpu"]) == 2
    assert "no installed predictor for device(s) ['tpu']" in capsys.readouterr().err
    assert main(["predict", m, "--device", paths.DEFAULT_DEVICE, "--device", OTHER]) == 2
    assert "add --compare" in capsys.readouterr().err
    assert main(["predict", m, "--compare", "--measure"]) == 2
    assert "drop --measure" in capsys.readouterr().err
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    assert main(["predict", str(tmp_path / "junk.onnx"), "--compare"]) == 2
    assert "no configuration could predict it" in capsys.readouterr().err
    assert main(["predict", m, "--compare", "--device", OTHER, "--device", paths.DEFAULT_DEVICE]) == 0
    assert capsys.readouterr().out.count("fastest: ") == 1
