"""The Python API (`import hase`), used as a user would: real ONNX Runtime sessions on the vendored exported models
and the shipped predictors, no mocks. `hase predict` through the API and through the CLI give the same numbers, and
the README's Python example names only what the API has."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import re
import subprocess
import sys
import typing
from pathlib import Path

import onnx
import pandas as pd
import pytest
from conftest import REPO, SHIPPED_DEVICES, VENDORED, exported_model

import hase
from hase.cli import main
from hase.errors import HaseError

SEMNASNET = "timm_semnasnet_050_cls10_b1"
README = REPO / "README.md"
FIGURES = ("latency_ms", "low_ms", "high_ms", "sum_ms", "n_kernels")


@pytest.fixture(scope="module")
def predictor() -> hase.Predictor:
    """The shipped cpu-1t predictor, loaded once for the module."""
    return hase.load_predictor("cpu-1t")


def symbolic(name: str = SEMNASNET) -> onnx.ModelProto:
    """A vendored exported model with the first dimension of its inputs and outputs renamed to the symbol `batch`."""
    model = onnx.load(exported_model(name))
    for vi in [*model.graph.input, *model.graph.output]:
        d = vi.type.tensor_type.shape.dim[0]
        d.Clear()
        d.dim_param = "batch"
    return model


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, typing.Any]:
    assert main(["predict", *argv, "--json"]) == 0
    out: dict[str, typing.Any] = json.loads(capsys.readouterr().out)
    return out


# ---------------------------------------------------------------- the package


def test_import_hase_loads_no_heavy_library() -> None:
    code = ("import sys, hase; heavy = [m for m in ('onnxruntime', 'pandas', 'sklearn', 'onnx', 'matplotlib', "
            "'hase.api') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    code = ("import sys, hase; hase.load_predictor; heavy = [m for m in ('onnxruntime', 'sklearn', 'matplotlib') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_every_public_name_is_exported_and_documented() -> None:
    assert hase.__version__
    for name in hase.__all__:
        obj = getattr(hase, name)
        assert name in dir(hase)
        if name.startswith("__"):
            continue
        assert inspect.getdoc(obj), f"hase.{name} has no docstring"
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, (property,
                                                                                                 classmethod))):
                    assert inspect.getdoc(member), f"hase.{name}.{attr} has no docstring"
    with pytest.raises(AttributeError, match="no attribute 'estimate'"):
        hase.estimate  # noqa: B018 - one verb for one idea: predict


def test_dir_of_hase_is_the_public_api_only() -> None:
    """Issue 30: `dir(hase)` listed `Any`, `TYPE_CHECKING` and `annotations`, the imports of `hase/__init__.py`."""
    names = dir(hase)  # `hase.cli`, imported above, is an attribute of the package, not its API
    assert names == sorted(hase.__all__)
    assert not {"Any", "TYPE_CHECKING", "annotations", "cli", "api", "version"} & set(names)
    assert all(getattr(hase, name) is not None for name in hase.__all__)


# ---------------------------------------------------------------- predict


def test_api_and_cli_predict_give_identical_numbers(predictor: hase.Predictor, capsys) -> None:
    model = str(exported_model(SEMNASNET))
    cli = cli_json(capsys, model)
    pred = predictor.predict(model)
    assert (pred.latency_ms, [pred.low_ms, pred.high_ms], pred.sum_ms, pred.n_kernels) == (
        cli["latency_ms"], cli["interval_ms"], cli["sum_kernel_ms"], cli["n_kernels"])
    api = pred.to_dict()
    for key in ("model", "device", "target", "by_op", "top_kernels", "fallback", "calibration"):
        same = json.dumps(api[key], default=float, sort_keys=True) == json.dumps(cli[key], sort_keys=True)
        assert same, key  # compared as the JSON they print: a NaN field is the same NaN
    assert cli["predictor"]["path"] == str(predictor.path) and cli["predictor"]["target"] == predictor.target
    kernels = pred.kernels
    assert len(kernels) == pred.n_kernels and kernels["pred_ms"].sum() == pytest.approx(pred.sum_ms)


def test_api_and_cli_agree_with_free_dims_and_input_shapes(predictor: hase.Predictor, tmp_path, capsys) -> None:
    path = tmp_path / "symbolic.onnx"
    onnx.save(symbolic(), path)
    name = onnx.load(path, load_external_data=False).graph.input[0].name
    cli = cli_json(capsys, str(path), "--free-dim", "batch=2")
    by_dim = predictor.predict(path, free_dims={"batch": 2})
    by_shape = predictor.predict(str(path), input_shapes={name: (2, 3, 160, 160)})
    assert by_dim.latency_ms == by_shape.latency_ms == cli["latency_ms"]
    assert by_dim.n_kernels == by_shape.n_kernels == cli["n_kernels"]
    assert by_dim.latency_ms > predictor.predict(path, free_dims={"batch": 1}).latency_ms
    with pytest.raises(HaseError, match=r"symbolic shape \[batch, 3, 160, 160\]"):
        predictor.predict(path)
    for bad in ({"batch": 0}, {"batch": "2"}, {"batch": True}, {"batch": 2.0}):
        with pytest.raises(HaseError, match=r"free_dims\['batch'\]"):
            predictor.predict(path, free_dims=bad)
    with pytest.raises(HaseError, match=r"input_shapes\["):
        predictor.predict(path, input_shapes={name: (2, 0, 160, 160)})


def test_predict_threads_agrees_with_the_cli_and_with_predict_at_one_thread(predictor: hase.Predictor,
                                                                           capsys) -> None:
    model = str(exported_model(SEMNASNET))
    frame = predictor.predict_threads(model, [1, 2, 4])
    assert frame["threads"].tolist() == [1, 2, 4] and (frame["model"] == model).all()
    assert frame["latency_ms"].iloc[0] == pytest.approx(predictor.predict(model).latency_ms, rel=1e-9)
    assert main(["predict", model, "--threads", "1,2,4", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [r["latency_ms"] for r in cli["by_threads"]] == pytest.approx(frame["latency_ms"].tolist(), rel=1e-12)
    from_proto = predictor.predict_threads(onnx.load(model), [2])
    assert from_proto["latency_ms"].iloc[0] == pytest.approx(frame["latency_ms"].iloc[1], rel=1e-12)
    with pytest.raises(HaseError, match="at least 1"):
        predictor.predict_threads(model, [0])


def test_a_model_in_memory_predicts_as_its_file(predictor: hase.Predictor) -> None:
    path = exported_model(SEMNASNET)
    model = onnx.load(path)
    before = model.SerializeToString()
    from_proto, from_file = predictor.predict(model), predictor.predict(path)
    assert from_proto.model == f"<ModelProto {model.graph.name}>" and from_file.model == str(path)
    assert [getattr(from_proto, f) for f in FIGURES] == [getattr(from_file, f) for f in FIGURES]
    assert model.SerializeToString() == before, "predict changed the caller's model"
    sym = symbolic()
    assert predictor.predict(sym, free_dims={"batch": 1}).latency_ms == from_file.latency_ms
    with pytest.raises(TypeError, match=r"path or an onnx\.ModelProto"):
        predictor.predict(b"not a model")  # type: ignore[arg-type]


def test_predict_many_is_one_row_per_model_failures_included(predictor: hase.Predictor, exported_dir: Path,
                                                              tmp_path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not onnx")
    model = onnx.load(exported_model(SEMNASNET))
    frame = predictor.predict_many([exported_dir, model, broken])
    assert list(frame.columns) == ["model", "device", "target", "latency_ms", "low_ms", "high_ms", "sum_ms",
                                   "n_kernels", "n_fallback", "error"]
    names = [str(exported_dir / f"{n}.onnx") for n in sorted(VENDORED)]
    assert list(frame["model"]) == [*names, f"<ModelProto {model.graph.name}>", str(broken)]
    ok, failed = frame.iloc[:-1], frame.iloc[-1]
    assert (ok["error"] == "").all() and (ok["latency_ms"] > 0).all() and (ok["device"] == "cpu-1t").all()
    assert "broken.onnx is not a valid ONNX file" in failed["error"] and math.isnan(failed["latency_ms"])
    assert pd.isna(failed["n_kernels"]) and failed["device"] == "cpu-1t"
    one = predictor.predict(exported_model(SEMNASNET)).to_frame().iloc[0]
    for row in (frame.set_index("model").loc[str(exported_model(SEMNASNET))], frame.iloc[-2]):
        assert [row[f] for f in FIGURES] == [one[f] for f in FIGURES]
    (tmp_path / "empty").mkdir()
    with pytest.raises(HaseError, match=r"holds no \.onnx files"):
        predictor.predict_many([tmp_path / "empty"])


def test_a_model_that_cannot_be_predicted_is_one_error(predictor: hase.Predictor, tmp_path) -> None:
    with pytest.raises(HaseError, match="model file not found"):
        predictor.predict(tmp_path / "missing.onnx")
    with pytest.raises(HaseError, match="is a directory"):
        predictor.predict(tmp_path)


# ---------------------------------------------------------------- predictors


def test_predictors_lists_the_shipped_ones() -> None:
    frame = hase.predictors()
    assert sorted(frame["device"]) == SHIPPED_DEVICES
    assert set(frame["source"]) == {"shipped"} and (frame["error"] == "").all()
    assert {"path", "cpu_model", "ort_version", "opt_level", "acc10", "rmspe", "host_mismatches"} <= set(frame.columns)


def test_load_predictor_by_name_by_directory_and_from_a_folder_of_predictors(predictor: hase.Predictor) -> None:
    assert predictor.device == "cpu-1t" and predictor.source == "shipped"
    assert predictor.describe().startswith("cpu-1t: ")
    path = predictor.path
    by_dir = hase.load_predictor(path)
    by_root = hase.load_predictor("cpu-1t", predictors_dir=path.parent)
    assert by_dir.path == by_root.path == path and by_dir.source == by_root.source == "--predictors"
    model = exported_model(SEMNASNET)
    assert by_dir.predict(model).latency_ms == by_root.predict(str(model)).latency_ms == \
        predictor.predict(model).latency_ms
    assert hase.load_predictor(str(path)).path == path
    with pytest.raises(HaseError, match=r"folder of predictors \(cpu-1t"):
        hase.load_predictor(path.parent)
    with pytest.raises(HaseError, match="no trained predictor for device 'nope'"):
        hase.load_predictor("nope")
    with pytest.raises(HaseError, match="either it or predictors_dir"):
        hase.load_predictor(path, predictors_dir=path.parent)
    with pytest.raises(HaseError, match=r"has no predictor for target\(s\) \['nope'\]"):
        hase.load_predictor("cpu-1t", target="nope")


# ---------------------------------------------------------------- profile and pipeline


def test_profile_measures_the_model_in_the_predictors_configuration(tmp_path) -> None:
    prof = hase.profile(symbolic(), device="cpu-1t", runs=2, warmup=1, free_dims={"batch": 1})
    assert prof.model.startswith("<ModelProto") and prof.device == "cpu-1t" and prof.runs == 2
    assert prof.metadata["intra_op_threads"] == 1
    assert int(prof.summary["n_runs"]) == 2 and prof.model_run_ms > 0 and prof.wall.n == 2
    nodes = prof.to_frame()
    assert len(nodes) > 0 and {"node_name", "op_type", "span_us", "kernel_time_us"} <= set(nodes.columns)
    assert (nodes["n_runs"] == 2).all()
    trace = prof.write_trace(tmp_path / "trace.json")
    assert json.loads(trace.read_text())["traceEvents"]
    assert not list(tmp_path.glob("*_*.json")), "the ORT profile was left beside the trace"


def test_run_pipeline_streams_a_config(tmp_path) -> None:
    config = tmp_path / "pipe.toml"
    config.write_text('[pipeline]\nname = "tiny"\nbatch = 4\nfeatures = 32\nbatches = 50\nwarmup = 1\n\n'
                      '[[stages]]\nname = "a"\ndevice = "cpu"\ndummy = { width = 32, layers = 1 }\n\n'
                      '[[stages]]\nname = "b"\ndevice = "cpu"\ndummy = { width = 32, layers = 1, seed = 1 }\n')
    run = hase.run_pipeline(config, batches=6, trace_path=tmp_path / "trace.json", predict_device="cpu-1t")
    assert run.name == "tiny" and run.batches == run.completed == 6 and run.throughput_per_s > 0
    assert list(run.to_frame()["stage"]) == ["a", "b"] and run.bottleneck in ("a", "b")
    assert run.files["trace"].is_file() and run.comparison is not None and len(run.comparison)
    assert run.to_dict()["completed"] == 6
    with pytest.raises(HaseError, match="warm-up runs must be >= 0"):
        hase.run_pipeline(config, warmup=-1)


# ---------------------------------------------------------------- the README


def readme_python() -> list[str]:
    """The statements of the README's Python example (the `>>>` lines of its python block)."""
    block = re.search(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)
    assert block, "README.md has no ```python block"
    return [line.split(">>> ", 1)[1] for line in block.group(1).splitlines() if line.startswith(">>> ")]


def returned(func: typing.Any) -> typing.Any:
    """The class a function or method is annotated to return."""
    return typing.get_type_hints(func, vars(sys.modules[func.__module__]))["return"]


def test_readme_python_example_uses_only_the_api() -> None:
    """Every `hase.<name>`, method, keyword and attribute the README's example uses exists, as a type checker
    would follow the example: each variable has the class its call returns."""
    lines = readme_python()
    assert lines[0] == "import hase"
    types: dict[str, typing.Any] = {"hase": hase}
    for line in lines[1:]:
        tree = ast.parse(line)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                owner = types[node.value.id]
                if owner is hase:
                    assert node.attr in hase.__all__, f"README uses hase.{node.attr}, which hase does not export"
                names = {f.name for f in dataclasses.fields(owner)} if dataclasses.is_dataclass(owner) else set()
                assert hasattr(owner, node.attr) or node.attr in names, f"README: {line!r}: no {node.attr!r}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                func = getattr(types[node.func.value.id], node.func.attr)  # type: ignore[attr-defined]
                params = inspect.signature(func).parameters
                for kw in node.keywords:
                    assert kw.arg in params, f"README: {line!r}: {node.func.attr}() takes no {kw.arg}="
        stmt = tree.body[0]
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            call = stmt.value.func
            assert isinstance(call, ast.Attribute) and isinstance(call.value, ast.Name)
            target = stmt.targets[0]
            assert isinstance(target, ast.Name)
            types[target.id] = returned(getattr(types[call.value.id], call.attr))
    assert {"load_predictor", "predictors", "profile", "run_pipeline"} <= {
        n for line in lines for n in re.findall(r"\bhase\.(\w+)", line)}


@pytest.mark.slow
def test_readme_python_example_runs(tmp_path, exported_dir: Path, monkeypatch) -> None:
    """The README's example, run line by line on real models: `model.onnx` with a symbolic batch dimension, `a.onnx`
    and `b.onnx` two vendored models; the pipeline example config as it is."""
    onnx.save(symbolic(), tmp_path / "model.onnx")
    names = sorted(VENDORED)
    for stem, name in zip(("a", "b"), names, strict=False):
        (tmp_path / f"{stem}.onnx").write_bytes((exported_dir / f"{name}.onnx").read_bytes())
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "pipeline_example.toml").write_text(
        (REPO / "configs" / "pipeline_example.toml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, typing.Any] = {}
    values: list[typing.Any] = []
    for line in readme_python():  # as the interpreter would: an expression's value is shown, a statement runs
        stmt = ast.parse(line).body[0]
        if isinstance(stmt, ast.Expr):
            values.append(eval(compile(ast.Expression(stmt.value), "README.md", "eval"), scope))
        else:
            exec(compile(line, "README.md", "exec"), scope)
            values.append(None)
    assert isinstance(scope["pred"], hase.Prediction) and isinstance(values[4], pd.DataFrame)
    assert list(values[5]["model"]) == ["a.onnx", "b.onnx"] and (values[5]["error"] == "").all()
    assert isinstance(values[6], pd.DataFrame) and len(scope["prof"].nodes) and scope["run"].completed > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "b.onnx", "configs", "model.onnx"], \
        "the example left files behind"
