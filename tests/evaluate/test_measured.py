"""hase.evaluate.measured and `hase predict --measure`: predicted vs measured, in the predictor's configuration."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model

from hase.cli import main
from hase.evaluate.measured import KernelCheck, PredictionCheck, check_models, check_prediction
from hase.predict.bundle import load_bundle
from hase.predict.estimate import PredictFailure, estimate_models
from hase.runtime.robust import BlockPolicy
from hase.runtime.types import TimingPolicy

QUICK = BlockPolicy(warmup=1, blocks=2, block=TimingPolicy(warmup=0, min_runs=3, max_runs=5, min_time_s=0,
                                                           max_time_s=0.5))


@pytest.fixture(scope="module")
def predictors(tiny_root: Path) -> Path:
    return tiny_root / "predictors"


@pytest.fixture
def model(tmp_path) -> Path:
    p = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(c=12, hw=20), p)
    return p


def test_check_prediction_measures_in_the_predictors_configuration(predictors, model):
    bundle = load_bundle(predictors / "cpu-1t")
    check = check_prediction(model, bundle, policy=QUICK, top=3)
    assert check.ep == bundle.ep_config() and check.device_meta["opt_level"] == bundle.ep_config().opt_level
    m = check.measured
    assert m.latency_ms == min(m.block_medians_ms) and m.n_runs >= 6 and len(m.block_medians_ms) == 2
    assert check.error_pct == pytest.approx((check.estimate.latency_ms / m.latency_ms - 1) * 100)
    assert [k.node_name for k in check.kernels] == [k.node_name for k in check.estimate.top(3)]
    assert all(k.measured_ms is not None and k.measured_ms > 0 for k in check.kernels)  # names match the profile
    assert check.n_unmatched == 0 and check.n_profiled_nodes == check.estimate.n_kernels
    assert check.kernel_time_sum_ms > 0
    d = check.to_dict(top=3)
    assert d["latency_ms"] == check.estimate.latency_ms and d["measured"]["latency_ms"] == m.latency_ms
    assert d["measured"]["statistic"] == "min of block medians" and d["measured"]["config"]["opt_level"]
    assert len(d["measured"]["kernels"]["top"]) == 3 and "error_pct" in d["measured"]["kernels"]["top"][0]


def test_kernel_error_is_none_without_a_measurement():
    assert KernelCheck("n", "Conv", "k", 1.0, None).error_pct is None
    assert KernelCheck("n", "Conv", "k", 1.5, 1.0).error_pct == pytest.approx(50)


def test_check_models_keeps_failures_and_goes_on(predictors, model, tmp_path):
    bundle = load_bundle(predictors / "cpu-1t")
    (tmp_path / "junk.onnx").write_bytes(b"junk")
    results = check_models(estimate_models([tmp_path / "junk.onnx", model], bundle), bundle, policy=QUICK, top=2)
    assert isinstance(results[0], PredictFailure) and isinstance(results[1], PredictionCheck)


def test_predict_measure_cli(predictors, model, capsys):
    args = ["predict", str(model), "--predictors", str(predictors), "--measure", "--blocks", "2", "--top", "3"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    measured = out["measured"]
    assert measured["latency_ms"] > 0 and measured["n_runs"] >= 2 * 10 and len(measured["block_medians_ms"]) == 2
    assert measured["error_pct"] == pytest.approx((out["latency_ms"] / measured["latency_ms"] - 1) * 100)
    assert {"p10_ms", "p90_ms", "spread", "noisy", "noise_bound"} <= set(measured)
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "measured here:" in text and "prediction error" in text and "in-model" in text
    assert main(["predict", str(model), str(model), "--predictors", str(predictors), "--measure", "--blocks", "2"]) == 0
    assert "2 models predicted and measured" in capsys.readouterr().out


@pytest.mark.parametrize("extra, match", [(["--blocks", "3"], "add --measure"),
                                          (["--measure", "--blocks", "0"], "--blocks must be >= 1"),
                                          (["--measure", "--noise-bound", "0"], "--noise-bound > 0")])
def test_predict_measure_bad_options(predictors, model, capsys, extra, match):
    assert main(["predict", str(model), "--predictors", str(predictors), *extra]) == 2
    assert match in capsys.readouterr().err


def test_predict_does_not_import_pandas_or_sklearn(model):
    code = ("import sys; from hase.cli import main; rc = main(['-q', 'predict', sys.argv[1], '--json']); "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'sklearn', 'scipy', 'matplotlib'}); "
            "print(heavy, file=sys.stderr); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"
