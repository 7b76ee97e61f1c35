"""hase.predict.estimate: calibration fits, composing kernel predictions into a model, `hase predict`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import conv_bn_relu_model
from onnx import TensorProto, helper
from test_evaluate import build_tiny_store, train_tiny

from hase.cli import main
from hase.errors import HaseError
from hase.predict.estimate import (
    CANDIDATES,
    Calibration,
    compose,
    estimate_model,
    fit_calibration,
    predict_model_latency,
)
from hase.predict.predictor import load_bundle


@pytest.fixture(scope="module")
def predictors(tmp_path_factory) -> Path:
    root = tmp_path_factory.getbasetemp() / "hase_tiny"
    root.mkdir(exist_ok=True)
    build_tiny_store(root)
    return train_tiny(root)


# ---------------------------------------------------------------------- calibration (hand-built numbers)


def test_fits_recover_exact_coefficients():
    rng = np.random.default_rng(0)
    s, n = rng.uniform(0.5, 50, 30), rng.integers(10, 300, 30).astype(float)
    y_scale = 0.8 * s + 0.3
    y_kernel = 0.8 * s - 0.004 * n + 0.3 + 0.004 * 300
    for fitter in ("ols", "relative", "huber"):
        c = fit_calibration(s, n, y_scale, "scale", fitter)
        assert (c.alpha, c.beta, c.gamma) == pytest.approx((0.8, 0.3, 0.0), abs=1e-6)
        k = fit_calibration(s, n, y_kernel, "per_kernel", fitter)
        assert (k.alpha, k.gamma) == pytest.approx((0.8, -0.004), abs=1e-6)
        assert np.allclose(k.apply(s, n), y_kernel)


def test_huber_resists_an_outlier_model():
    s = np.linspace(1, 20, 20)
    y = 0.5 * s + 0.1
    y[3] *= 3  # one model measured under contention
    huber = fit_calibration(s, np.ones(20), y, "scale", "huber")
    rel = fit_calibration(s, np.ones(20), y, "scale", "relative")
    assert abs(huber.alpha - 0.5) < abs(rel.alpha - 0.5) and huber.alpha == pytest.approx(0.5, rel=0.02)


def test_raw_and_degenerate_calibrations():
    assert fit_calibration([1.0, 2.0], [1, 1], [3.0, 4.0], "raw", "none") == Calibration()
    assert fit_calibration([1.0, 2.0], [1, 1], [3.0, 4.0], "per_kernel", "ols") == Calibration()  # too few models
    with pytest.raises(HaseError, match="unknown calibration"):
        fit_calibration([1.0], [1], [1.0], "cubic", "ols")
    c = Calibration("per_kernel", "huber", 0.9, 0.1, -0.002)
    assert Calibration.from_dict(c.to_dict()) == c and c.name == "per_kernel/huber"
    assert len(CANDIDATES) == 7


# ---------------------------------------------------------------------- composing and predicting models


def test_compose_counts_every_node_and_brackets_the_latency(predictors):
    from hase.kernels import graph, split
    from hase.measure.runtime import EPConfig

    bundle = load_bundle(predictors / "cpu-1t", ["span"])
    specs = [n.spec for n in split.split(graph.kernel_graph(conv_bn_relu_model(c=8, hw=16), EPConfig()))]
    pred = bundle.predictors["span"]
    cal = Calibration("scale", "ols", 2.0, 0.5, 0.0)
    frame, total, latency, low, high = compose(specs + specs[:1], pred, cal, n_draws=16)
    assert len(frame) == len(specs) + 1 and frame["kernel_id"].iloc[-1] == frame["kernel_id"].iloc[0]
    assert total == pytest.approx(pred.predict(specs).sum() + pred.predict(specs[:1])[0])
    assert latency == pytest.approx(2 * total + 0.5) and low <= latency <= high


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
    assert est.n_kernels == 2 and (est.kernels["pred_ms"] > 0).all()
    assert set(est.fallback["op_type"]) == {"Sin", "CumSum"}
    assert est.kernels.set_index("op_type").loc["CumSum", "source"] == "generic"
    d = est.to_dict()
    assert d["n_fallback"] == 2 and d["latency_ms"] == pytest.approx(est.calibration.apply(est.sum_ms, 2))


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
