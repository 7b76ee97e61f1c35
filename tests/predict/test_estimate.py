"""hase.predict.estimate: composing kernel predictions into a model, batch estimates, `hase predict`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import conv_bn_relu_model
from onnx import TensorProto, helper

from hase.cli import main
from hase.predict.bundle import load_bundle
from hase.predict.calibration import Calibration
from hase.predict.estimate import (
    ModelEstimate,
    PredictFailure,
    compose,
    estimate_model,
    estimate_models,
    predict_model_latency,
)


@pytest.fixture(scope="module")
def predictors(tiny_root: Path) -> Path:
    return tiny_root / "predictors"


# ---------------------------------------------------------------------- composing and predicting models


def test_compose_counts_every_node_and_brackets_the_latency(predictors):
    from hase.kernels import graph, split
    from hase.runtime.types import EPConfig

    bundle = load_bundle(predictors / "cpu-1t", ["span"])
    specs = [n.spec for n in split.split(graph.kernel_graph(conv_bn_relu_model(c=8, hw=16), EPConfig()))]
    pred = bundle.predictors["span"]
    cal = Calibration("scale", "ols", 2.0, 0.5, 0.0)
    c = compose(specs + specs[:1], pred, cal, n_draws=16)
    assert len(c.pred_ms) == len(c.keys) == len(specs) + 1 and c.pred_ms[-1] == c.pred_ms[0]
    assert c.sum_ms == pytest.approx(pred.predict(specs).sum() + pred.predict(specs[:1])[0])
    assert c.latency_ms == pytest.approx(2 * c.sum_ms + 0.5) and c.low_ms <= c.latency_ms <= c.high_ms


def test_estimate_model_reports_sum_calibration_and_fallbacks(predictors, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])
    nodes = [helper.make_node("Sin", ["x"], ["s"], name="sin"),  # elementwise, never trained on
             helper.make_node("CumSum", ["s", "axis"], ["y"], name="cumsum")]  # no feature family at all
    axis = onnx.numpy_helper.from_array(np.array(1, dtype=np.int64), "axis")
    g = helper.make_graph(nodes, "odd", [x], [y], initializer=[axis])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "odd.onnx")
    est = estimate_model(tmp_path / "odd.onnx", load_bundle(predictors / "cpu-1t"))
    assert est.n_kernels == 2 and all(k.pred_ms > 0 for k in est.kernels)
    assert {k.op_type for k in est.fallback} == {"Sin", "CumSum"}
    assert {k.op_type: k.source for k in est.kernels}["CumSum"] == "generic"
    assert [n for _, _, n in est.fallback_counts()] == [1, 1]
    d = est.to_dict()
    assert d["n_fallback"] == 2 and d["latency_ms"] == pytest.approx(est.calibration.apply(est.sum_ms, 2))
    frame = est.frame()  # the same kernels as a DataFrame, for whoever wants one
    assert list(frame["node_name"]) == ["sin", "cumsum"] and frame["pred_ms"].sum() == pytest.approx(est.sum_ms)
    assert d["by_op"] == sorted(d["by_op"], key=lambda r: -r["pred_ms"])
    assert sum(r["n"] for r in d["by_op"]) == 2 and sum(r["share"] for r in d["by_op"]) == pytest.approx(1)


def test_predict_model_latency_and_cli(predictors, tmp_path, capsys):
    p = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(c=12, hw=20), p)
    ms = predict_model_latency(p, "cpu-1t", predictors)
    assert 0 < ms < 100
    assert main(["predict", str(p), "--predictors", str(predictors), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["latency_ms"] == pytest.approx(ms) and out["by_op"] and out["top_kernels"]
    assert main(["predict", str(tmp_path), str(p), "--predictors", str(predictors), "--target", "warm"]) == 0
    assert "2 models predicted" in capsys.readouterr().out


def test_predict_bad_input_is_one_line(predictors, tmp_path, capsys):
    p = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(), p)
    assert main(["predict", str(p), "--predictors", str(predictors), "--device", "tpu"]) == 2
    assert "no trained predictor for device 'tpu'" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "nope.onnx"), "--predictors", str(predictors)]) == 2
    assert "model file not found" in capsys.readouterr().err
    assert main(["predict", str(p), "--predictors", str(predictors), "--target", "cold"]) == 2
    assert "no predictor for target(s) ['cold']" in capsys.readouterr().err
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    assert main(["predict", str(tmp_path / "junk.onnx"), str(p), "--predictors", str(predictors)]) == 2
    assert "error" in capsys.readouterr().out  # batch mode: the bad file is reported, the rest predicted


def test_estimate_models_reports_a_failure_and_goes_on(predictors, tmp_path):
    good = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(), good)
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    results = estimate_models([tmp_path / "junk.onnx", good], load_bundle(predictors / "cpu-1t"))
    bad, ok = results
    assert isinstance(bad, PredictFailure) and bad.model == str(tmp_path / "junk.onnx") and bad.error
    assert bad.to_dict() == {"model": bad.model, "error": bad.error}
    assert isinstance(ok, ModelEstimate) and ok.latency_ms > 0


def test_predict_json_batch_lists_failures(predictors, tmp_path, capsys):
    onnx.save(conv_bn_relu_model(), tmp_path / "m.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    assert main(["predict", str(tmp_path), "--predictors", str(predictors), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert [("error" in o) for o in out] == [True, False]  # sorted: junk.onnx, m.onnx
    assert all("load_predictor_s" in o["timings_s"] for o in out)
