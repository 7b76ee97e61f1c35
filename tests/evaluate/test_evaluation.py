"""hase.predict.crossval, baselines, train, evaluate and report on a real store: folds, baselines, the report.

The store these tests train on is real: a small collect of tiny models of three families measured on
ONNX Runtime with a fast timing policy (built once per session, reused by test_estimate).
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pandas as pd
import pytest
from tiny_store import TINY_CONFIG, mlp_model

from hase.cli import main
from hase.errors import HaseError
from hase.evaluate.evaluation import evaluate_predictor
from hase.predict import baselines, crossval, dataset
from hase.predict.calibration import CANDIDATES
from hase.predict.manifest import Manifest

# ---------------------------------------------------------------------- on a real tiny store


def test_store_tables_and_measured_sums(tiny_root):
    data = dataset.load_device_data(tiny_root / "tiny.sqlite")
    assert data.families == ["convnet", "embed", "mlp"] and len(data.models) == 9
    sums = dataset.model_sums(data)
    assert (sums[dataset.SUM_COLUMNS["warm"]] > 0).all() and (sums["n_missing_standalone"] == 0).all()
    held = dataset.kernel_targets(data, "span", data.models.loc[data.models[dataset.FAMILY] == "mlp", dataset.MODEL_ID])
    assert set(held.index) <= set(data.nodes.loc[data.nodes[dataset.FAMILY] == "mlp", dataset.KERNEL_ID])
    with pytest.raises(HaseError, match="unknown target"):
        dataset.kernel_targets(data, "nope")
    with pytest.raises(HaseError, match="no measurements for device"):
        dataset.load_device_data(tiny_root / "tiny.sqlite", "cuda9")


def test_train_writes_an_evaluated_predictor(tiny_root):
    d = tiny_root / "predictors" / "cpu-1t"
    manifest = json.loads((d / "manifest.json").read_text())
    assert {"warm.npz", "warm.json", "span.npz", "span.json", "cv_models.csv", "cv_kernels.csv",
            "baselines.csv"} <= set(manifest["files"])
    assert manifest["default_target"] in ("warm", "span") and manifest["training_data"]["n_models"] == 9
    entry = manifest["targets"][manifest["default_target"]]
    assert {"alpha", "beta", "gamma", "fit_data"} <= set(entry["calibration"])
    assert len(entry["calibration"]["fit_data"]) == 9 and entry["held_out"]["n"] == 9
    fit = entry["calibration"]["fit_data"][0]
    assert {"model_id", "family", "sum_ms", "n_kernels", "measured_ms", "weight", "fitted_ms",
            "residual_pct"} == set(fit)
    cv = pd.read_csv(d / "cv_models.csv")
    held = cv[cv[crossval.SPLIT] == crossval.HELD_OUT]
    assert set(held[crossval.FOLD]) == {"convnet", "embed", "mlp"}
    assert (held[crossval.FOLD] == held[dataset.FAMILY]).all()  # every held-out row was predicted without its family


def test_the_typed_manifest_agrees_with_the_cross_validation_rows(tiny_root):
    from hase.predict.bundle import read_manifest
    from hase.predict.metrics import score

    d = tiny_root / "predictors" / "cpu-1t"
    manifest = read_manifest(d)
    assert Manifest.from_dict(manifest.to_dict()) == manifest
    assert manifest.to_dict() == json.loads((d / "manifest.json").read_text())  # the typed view loses nothing
    cv = pd.read_csv(d / "cv_models.csv")
    for name, entry in manifest.targets.items():
        rows = cv[(cv[crossval.TARGET] == name) & (cv[crossval.SPLIT] == crossval.HELD_OUT)
                  & (cv[crossval.CALIBRATION] == entry.calibration.calibration.name)]
        recomputed = dataclasses.asdict(score(rows[dataset.MEASURED_MS], rows["pred_ms"]))
        assert dataclasses.asdict(entry.held_out) == pytest.approx(recomputed, rel=1e-4)  # the CSV keeps 6 digits
        assert entry.predictor.n_kernels > 0 and entry.held_out.n == 9


def test_leave_family_out_never_trains_on_the_held_out_family(tiny_root):
    data = dataset.load_device_data(tiny_root / "tiny.sqlite")
    seen = []

    class Spy:
        def __init__(self):
            from hase.predict.predictor import KernelPredictor
            self.inner = KernelPredictor({"default": {"n_estimators": 4}}, min_samples=3)

        def fit(self, specs, y):
            seen.append({s.kernel_id for s in specs})
            self.inner.fit(specs, y)
            return self.inner

    models, kernels = crossval.fold_frames(data, "span", "mlp", Spy)
    only_mlp = set(data.nodes[data.nodes[dataset.FAMILY] == "mlp"][dataset.KERNEL_ID]) - set(
        data.nodes[data.nodes[dataset.FAMILY] != "mlp"][dataset.KERNEL_ID])
    assert seen and not (seen[0] & only_mlp)
    assert set(kernels[dataset.KERNEL_ID]) <= only_mlp and len(models) == 3 * len(CANDIDATES)


def test_baselines_are_held_out_linear_fits(tiny_root):
    data = dataset.load_device_data(tiny_root / "tiny.sqlite")
    b = baselines.baseline_lofo(data)
    assert set(baselines.BASELINES) <= set(b.columns) and b["flops"].notna().all()
    assert (b[baselines.MODEL_FLOPS] > 0).all()
    assert list(baselines.baseline_scores(b)["baseline"]) == list(baselines.BASELINES)
    assert (b[baselines.MODEL_BYTES] > 0).all()
    assert b["flops"].ne(b[baselines.MODEL_FLOPS]).all()  # predictions, not inputs


@pytest.mark.slow
def test_evaluate_report_files_and_ratio_table(tiny_root, tmp_path):
    from hase.evaluate.report import write_report

    ev = evaluate_predictor(tiny_root / "tiny.sqlite", tiny_root / "predictors" / "cpu-1t")
    m = ev.models
    assert np.allclose(m["sum_span_ratio"], m[dataset.SUM_COLUMNS["span"]] / m[dataset.MEASURED_MS])
    assert m["calibrated_held_out_ms"].notna().all() and m["calibrated_train_ms"].notna().all()
    assert {"measured", "held_out", "train"} == set(ev.summary["split"])
    assert ev.headline.n_models == 9 and ev.headline.held_out.n == 9 and ev.headline.train.n == 9
    assert set(ev.headline.baselines) == set(baselines.BASELINES)
    assert ev.headline.to_dict()["calibration"] == ev.calibration
    with pytest.raises(HaseError, match="has no evaluation of target 'cold'"):
        evaluate_predictor(tiny_root / "tiny.sqlite", tiny_root / "predictors" / "cpu-1t", "cold")
    paths = write_report(ev, tmp_path / "rep")
    html = paths["report.html"].read_text()
    assert html.count("data:image/png;base64,") == 4 and "Every model" in html
    assert "held-out families" in paths["report.md"].read_text()
    assert pd.read_csv(paths["models.csv"]).shape[0] == 9
    assert json.loads(paths["headline.json"].read_text()) == json.loads(json.dumps(ev.headline.to_dict()))


@pytest.mark.slow
def test_cli_train_and_evaluate(tiny_root, tmp_path, capsys):
    (tmp_path / "t.toml").write_text(TINY_CONFIG.replace('targets = ["warm", "span"]', 'targets = ["span"]'))
    rc = main(["-q", "train", "--store", str(tiny_root / "tiny.sqlite"), "--out", str(tmp_path / "p"),
               "--config", str(tmp_path / "t.toml"), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)[0]["default_target"] == "span"
    rc = main(["-q", "evaluate", "--store", str(tiny_root / "tiny.sqlite"), "--predictors", str(tmp_path / "p"),
               "--out", str(tmp_path / "rep"), "--json"])
    assert rc == 0 and "held_out" in json.loads(capsys.readouterr().out)
    assert (tmp_path / "rep" / "report.html").is_file()


def test_train_errors_are_one_line(tiny_root, tmp_path, capsys):
    assert main(["train", "--store", str(tmp_path / "none.sqlite")]) == 2
    assert "store not found" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text("[training]\nnope = 1\n")
    assert main(["train", "--store", str(tiny_root / "tiny.sqlite"), "--config", str(tmp_path / "bad.toml")]) == 2
    assert "unknown [training] keys" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text('[training]\nfamily_exclude = "Resize"\n')
    assert main(["train", "--store", str(tiny_root / "tiny.sqlite"), "--config", str(tmp_path / "bad.toml")]) == 2
    assert "family_exclude must be a list of op types" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text('[training]\ntree_mean = "median"\n')
    assert main(["train", "--store", str(tiny_root / "tiny.sqlite"), "--config", str(tmp_path / "bad.toml")]) == 2
    assert "tree_mean must be one of ['arithmetic', 'geometric']" in capsys.readouterr().err
    assert main(["evaluate", "--predictors", str(tmp_path), "--device", "nodev"]) == 2
    assert "no trained predictor for device 'nodev'" in capsys.readouterr().err


def test_one_family_is_not_enough(tiny_root, tmp_path):
    from hase.measure.collect import CollectConfig, ModelSource, collect
    from hase.measure.store import Store
    from hase.measure.types import MeasureSettings
    from hase.predict.train import TrainConfig, train
    from hase.runtime.types import EPConfig, TimingPolicy

    p = tmp_path / "m.onnx"
    onnx.save(mlp_model(8), p)
    fast = TimingPolicy(warmup=1, min_runs=3, max_runs=3, min_time_s=0.0, max_time_s=0.02)
    with Store(tmp_path / "one.sqlite") as store:
        collect([ModelSource("m", "mlp", p)], CollectConfig((EPConfig(name="cpu-1t"),),
                MeasureSettings(kernel=fast, model=fast, profile_warmup=1, profile_runs=2, cold_sessions=2)), store)
    with pytest.raises(HaseError, match="needs two"):
        train(tmp_path / "one.sqlite", tmp_path / "out", TrainConfig())


@pytest.mark.parametrize("calibrate_on", ["measured", "predicted"])
def test_fold_calibration_is_fitted_on_aligned_model_rows(tiny_root, calibrate_on):
    from hase.predict.calibration import fit_calibration
    from hase.predict.predictor import KernelPredictor

    data = dataset.load_device_data(tiny_root / "tiny.sqlite")
    make = lambda: KernelPredictor({"default": {"n_estimators": 4}}, min_samples=3)  # noqa: E731
    rows, _ = crossval.fold_frames(data, "warm", "embed", make, calibrate_on)
    train = data.models[data.models[dataset.FAMILY] != "embed"].set_index(dataset.MODEL_ID)
    pred = crossval.fit_predictor(data, "warm", train.index, make)
    sums = (crossval.measured_sum(data, "warm", train.index) if calibrate_on == "measured"
            else crossval.model_predictions(data, pred, train.index)[crossval.SUM_PRED_MS]).reindex(train.index)
    expected = fit_calibration(sums, train[dataset.N_KERNELS], train[dataset.MEASURED_MS], "scale", "ols")
    got = rows[rows[crossval.CALIBRATION] == "scale/ols"].iloc[0]
    assert got["alpha"] == pytest.approx(expected.alpha) and got["beta"] == pytest.approx(expected.beta)
