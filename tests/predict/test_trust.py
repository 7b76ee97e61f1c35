"""hase.predict.trust and its use in training: rows measured on a busy host are dropped or down-weighted.

The store is real: tiny models collected with ONNX Runtime the way `hase collect` does it, in two runs. The
first sees a quiet host; in the second the canary (scripted: quiet at its reference, twice as slow at every
later check) finds the host busy before every job, so every kernel and model measured there carries
`host_busy = 1`. One model of the second run is a byte-different copy of a quiet one (same kernels, already
measured clean), so its spans have clean twins; the others bring kernels of their own, measured busy.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from conftest import REPO, conv_bn_relu_model, embedding_model
from tiny_store import mlp_model

from hase.errors import HaseError
from hase.predict import crossval, dataset, trust
from hase.predict.bundle import read_manifest
from hase.predict.calibration import fit_calibration
from hase.predict.manifest import Manifest, manifest_digest
from hase.predict.predictor import KernelPredictor
from hase.predict.train import load_train_config, train

QUIET = {"convnet0": ("convnet", conv_bn_relu_model(c=4, hw=16)), "convnet1": ("convnet", conv_bn_relu_model(c=8)),
         "mlp0": ("mlp", mlp_model(16)), "mlp1": ("mlp", mlp_model(64)), "embed0": ("embed", embedding_model(50))}
BUSY = {"convnet1b": ("convnet", conv_bn_relu_model(c=8)), "convnet2": ("convnet", conv_bn_relu_model(c=8, hw=24)),
        "mlp2": ("mlp", mlp_model(128)), "embed1": ("embed", embedding_model(200))}
CONFIG = """
[training]
targets = ["warm", "span"]
min_samples = 3
n_jobs = 1
{extra}
[forest.default]
n_estimators = 8
max_depth = 8
max_features = 0.8
[forest.fallback]
n_estimators = 6
max_depth = 6
"""


def _collect(root: Path, models: dict[str, tuple[str, onnx.ModelProto]], canary_ms: list[float]) -> None:
    """Collect `models` into root/busy.sqlite, the canary timing `canary_ms` then its last value for ever."""
    from hase.measure import collect as coll
    from hase.measure.store import Store
    from hase.measure.types import CanaryPolicy, MeasureSettings
    from hase.runtime.types import EPConfig, TimingPolicy

    fast = TimingPolicy(warmup=1, min_runs=5, max_runs=10, min_time_s=0.0, max_time_s=0.05)
    settings = MeasureSettings(kernel=fast, model=fast, model_blocks=2, noise_bound=100.0, profile_warmup=1,
                               profile_runs=3, cold_sessions=2,
                               canary=CanaryPolicy(retries=1, wait_s=0.0, every_kernels=1))
    sources = []
    for name, (family, model) in models.items():
        model.doc_string = name  # a copy of another model is another file: its own model job, the same kernels
        onnx.save(model, root / f"{name}.onnx")
        sources.append(coll.ModelSource(name, family, root / f"{name}.onnx"))
    times = itertools.chain(canary_ms, itertools.repeat(canary_ms[-1]))
    with pytest.MonkeyPatch.context() as mp, Store(root / "busy.sqlite") as store:
        mp.setattr(coll, "canary_timer", lambda ep, policy: lambda: next(times))
        report = coll.collect(sources, coll.CollectConfig((EPConfig(name="cpu-1t"),), settings), store)
    assert report.models_done == len(models)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("busy")
    _collect(root, QUIET, [1.0])  # the host stays as quiet as at the reference
    _collect(root, BUSY, [1.0, 2.0])  # the reference, then 2x slower at every check: every job flagged
    return root / "busy.sqlite"


@pytest.fixture(scope="module")
def data(store: Path) -> dataset.DeviceData:
    return dataset.load_device_data(store)


def _busy_kernels(store: Path) -> set[str]:
    from hase.measure.store import Store

    with Store(store, readonly=True) as s:
        km = s.table("kernel_measurements")
    return set(km.loc[km["host_busy"] == 1, "kernel_id"])


def test_the_store_carries_the_flags_as_collect_wrote_them(store, data):
    m = data.models.set_index(dataset.MODEL_ID)
    assert set(m.index[m[dataset.HOST_BUSY]]) == set(BUSY) and not m[dataset.NOISY].any()
    busy = _busy_kernels(store)
    assert busy and set(data.kernels.loc[data.kernels[dataset.HOST_BUSY], dataset.KERNEL_ID]) == busy
    copy = set(data.nodes.loc[data.nodes[dataset.MODEL_ID] == "convnet1b", dataset.KERNEL_ID])
    assert copy == set(data.nodes.loc[data.nodes[dataset.MODEL_ID] == "convnet1",
                                      dataset.KERNEL_ID]) and not copy & busy


def _occurrences(data: dataset.DeviceData) -> pd.DataFrame:
    occ = data.nodes[data.nodes[dataset.SPAN_MS].notna()].copy()
    occ["suspect"] = occ[dataset.MODEL_ID].isin(set(BUSY))
    occ["has_clean"] = (~occ["suspect"]).groupby(occ[dataset.KERNEL_ID]).transform("any")
    return occ


def test_drop_leaves_out_busy_spans_with_a_clean_twin_and_weights_the_rest(data):
    policy = trust.BusyPolicy("drop", 0.2)
    y, w, counts = trust.training_rows(data, "span", policy)
    occ = _occurrences(data)
    twins = occ[occ["suspect"] & occ["has_clean"]]
    assert counts.dropped == len(twins) >= (data.nodes[dataset.MODEL_ID] == "convnet1b").sum() > 0
    assert counts.suspect == occ["suspect"].sum() and counts.rows == len(y) == len(w)
    clean = occ[~occ["suspect"]].groupby(dataset.KERNEL_ID)[dataset.SPAN_MS].median()
    assert np.allclose(y[clean.index], clean) and (w[clean.index] == 1.0).all()
    only_busy = sorted(set(y.index) - set(clean.index))
    assert only_busy and (w[only_busy] == 0.2).all() and counts.weighted == len(only_busy)
    assert np.allclose(y[only_busy], dataset.kernel_targets(data, "span")[only_busy])


def test_weight_keeps_every_span_and_keep_ignores_the_flags(data):
    old = dataset.kernel_targets(data, "span")
    y, w, counts = trust.training_rows(data, "span", trust.BusyPolicy("weight", 0.2))
    assert counts.dropped == 0 and y.equals(old)
    occ = _occurrences(data)
    expected = occ.assign(w=np.where(occ["suspect"], 0.2, 1.0)).groupby(dataset.KERNEL_ID)["w"].mean()
    assert np.allclose(w, expected[w.index]) and counts.weighted == (expected < 1).sum() > 0
    y, w, counts = trust.training_rows(data, "span", trust.KEEP)
    assert y.equals(old) and (w == 1.0).all() and (counts.dropped, counts.weighted) == (0, 0)


def test_standalone_rows_of_busy_jobs_are_down_weighted_never_dropped(store, data):
    busy = _busy_kernels(store)
    for mode in ("drop", "weight"):
        y, w, counts = trust.training_rows(data, "warm", trust.BusyPolicy(mode, 0.25))
        assert y.equals(dataset.kernel_targets(data, "warm")) and counts.dropped == 0
        assert set(w.index[w < 1]) == busy & set(y.index) and set(w[w < 1]) == {0.25}
        assert counts.suspect == counts.weighted == len(busy & set(y.index))
    held = list(data.models.loc[data.models[dataset.FAMILY] != "mlp", dataset.MODEL_ID])  # a fold's training models
    y, w, _ = trust.training_rows(data, "warm", trust.BusyPolicy(), held)
    assert y.equals(dataset.kernel_targets(data, "warm", held)) and w.index.equals(y.index)


def test_model_weights_follow_busy_and_noisy(data):
    policy = trust.BusyPolicy("drop", 0.2)
    ids = list(data.models[dataset.MODEL_ID])
    w = trust.model_weights(data, policy, ids)
    assert list(w.index) == ids and dict(w[w < 1]) == dict.fromkeys(BUSY, 0.2)
    noisy = dataclasses.replace(data,
                                models=data.models.assign(**{dataset.NOISY: data.models[dataset.MODEL_ID] == "mlp0"}))
    assert trust.model_weights(noisy, policy, ["mlp0", "mlp1"]).tolist() == [0.2, 1.0]
    counts = trust.model_counts(noisy, policy)
    assert counts == {"rows": 9, "host_busy": 4, "noisy": 1, "suspect": 5, "dropped": 0, "weighted": 5}
    assert trust.model_counts(noisy, trust.KEEP)["weighted"] == 0
    assert (trust.model_weights(noisy, trust.KEEP, ids) == 1).all()


def test_a_down_weighted_row_barely_moves_the_forest(data):
    """The same kernels measured twice, once 4x slower: weighted 1e-3, the slow copy hardly counts."""
    y = dataset.kernel_targets(data, "warm")
    specs = [data.specs[k] for k in y.index]
    twice, y2 = specs + specs, np.concatenate([y, 4 * y])
    kw = {"params": {"default": {"n_estimators": 10, "max_depth": 10}}, "min_samples": 3, "base": False}
    weighted = KernelPredictor(**kw).fit(twice, y2, sample_weight=[1.0] * len(y) + [1e-3] * len(y))
    plain = KernelPredictor(**kw).fit(twice, y2)
    assert np.median(weighted.predict(specs) / y) < 1.2 and np.median(plain.predict(specs) / y) > 1.6
    with pytest.raises(ValueError, match="sample weights"):
        KernelPredictor(**kw).fit(specs, y, sample_weight=np.zeros(len(y)))


def test_weighted_calibration_follows_the_clean_models():
    s = np.linspace(1, 20, 12)
    y = 0.5 * s + 0.1
    y[[2, 7]] *= 2.0  # two models measured on a busy host
    w = np.where(np.isin(np.arange(12), [2, 7]), 1e-6, 1.0)
    for fitter in ("ols", "relative", "huber"):
        c = fit_calibration(s, np.ones(12), y, "scale", fitter, weight=w)
        assert (c.alpha, c.beta) == pytest.approx((0.5, 0.1), rel=1e-3, abs=1e-3), fitter
        plain = fit_calibration(s, np.ones(12), y, "scale", fitter)
        if fitter != "huber":  # the Huber loss resists two outliers on its own
            assert (plain.alpha, plain.beta) != pytest.approx((0.5, 0.1), rel=1e-2, abs=1e-2), fitter
    assert fit_calibration(s, np.ones(12), y, "scale", "relative", weight=np.ones(12)) == \
        fit_calibration(s, np.ones(12), y, "scale", "relative")
    with pytest.raises(ValueError, match="weights"):
        fit_calibration(s, np.ones(12), y, "scale", "ols", weight=np.ones(3))


def test_a_fold_fits_its_calibration_with_the_weights(data):
    """Busy models pulled 3x slow: with them at weight 0.001 the fold's calibration stays near the clean one."""
    slow = data.models.assign(**{dataset.MEASURED_MS: np.where(data.models[dataset.HOST_BUSY], 3.0, 1.0)
                                 * data.models[dataset.MEASURED_MS]})
    skewed = dataclasses.replace(data, models=slow)
    weight = trust.BusyPolicy("weight", 1e-3)
    alpha = {name: _fold_alpha(d, p) for name, d, p in (("keep", skewed, trust.KEEP), ("weight", skewed, weight),
                                                         ("clean", data, weight))}
    assert abs(alpha["weight"] / alpha["clean"] - 1) < 0.02 < abs(alpha["keep"] / alpha["clean"] - 1)


def _small_forests() -> KernelPredictor:
    return KernelPredictor({"default": {"n_estimators": 4, "max_depth": 6}}, min_samples=3)


def _fold_alpha(data: dataset.DeviceData, policy: trust.BusyPolicy) -> float:
    """alpha of the relative-least-squares calibration of the fold that holds out `embed`."""
    rows = crossval.fold_frames(data, "warm", "embed", _small_forests, "measured", policy)[0]
    return float(rows.loc[rows[crossval.CALIBRATION] == "scale/relative", crossval.ALPHA].iloc[0])


def test_a_fold_weighs_its_calibration_models_as_calibration_busy_says(data):
    """The forests follow `busy`; the calibration's models follow `calibration_busy` when it is given."""
    slow = data.models.assign(**{dataset.MEASURED_MS: np.where(data.models[dataset.HOST_BUSY], 3.0, 1.0)
                                 * data.models[dataset.MEASURED_MS]})
    skewed = dataclasses.replace(data, models=slow)
    weight = trust.BusyPolicy("weight", 1e-3)

    def alpha(calibration_busy: trust.BusyPolicy | None) -> float:
        rows = crossval.fold_frames(skewed, "warm", "embed", _small_forests, "measured", weight,
                                    calibration_busy=calibration_busy)[0]
        return float(rows.loc[rows[crossval.CALIBRATION] == "scale/relative", crossval.ALPHA].iloc[0])

    assert alpha(None) == alpha(weight) != alpha(trust.KEEP)
    assert alpha(trust.KEEP) == _fold_alpha(skewed, trust.KEEP)


@pytest.mark.parametrize("extra, match", [('busy = "sometimes"', "busy = 'sometimes' is not a policy"),
                                          ("busy_weight = 0", "busy_weight = 0 is out of range"),
                                          ("busy_weight = 1.5", "busy_weight = 1.5 is out of range"),
                                          ('calibration_busy = "drop"', "calibration_busy must be one of")])
def test_config_checks_the_policy(tmp_path, extra, match):
    path = tmp_path / "p.toml"
    path.write_text(CONFIG.format(extra=extra))
    with pytest.raises(HaseError, match=match):
        load_train_config(path)


def test_shipped_config_drops_by_default():
    cfg = load_train_config(REPO / "configs" / "predictor.toml")
    assert cfg.busy_policy() == trust.BusyPolicy("drop", 0.2)
    assert cfg.calibration_busy == "keep" and cfg.calibration_policy() == trust.KEEP


@pytest.mark.parametrize("mode, calibration", [("drop", "follow"), ("drop", "keep"), ("keep", "follow")])
def test_train_records_what_it_dropped_and_weighted(store, data, tmp_path, mode, calibration):
    path = tmp_path / "p.toml"
    path.write_text(CONFIG.format(extra=f'busy = "{mode}"\nbusy_weight = 0.2\ncalibration_busy = "{calibration}"'))
    res = train(store, tmp_path / "out", load_train_config(path))
    busy = res.manifest.training_data.busy
    policy = trust.BusyPolicy(mode, 0.2)
    weighs_models = mode != "keep" and calibration == "follow"
    assert busy["policy"] == mode and busy["busy_weight"] == 0.2
    assert busy["models"] == trust.model_counts(data, policy if calibration == "follow" else trust.KEEP)
    for target in ("warm", "span"):
        assert busy["kernels"][target] == trust.training_rows(data, target, policy)[2].to_dict()
    if mode == "drop":
        assert busy["kernels"]["span"]["dropped"] > 0
    else:
        assert all(c["dropped"] == c["weighted"] == 0 for c in busy["kernels"].values())
    assert busy["models"]["weighted"] == (4 if weighs_models else 0)
    fit = pd.DataFrame(res.manifest.target("span").calibration.fit_data).set_index(dataset.MODEL_ID)
    assert dict(fit.loc[fit[trust.WEIGHT] < 1, trust.WEIGHT]) == (dict.fromkeys(BUSY, 0.2) if weighs_models else {})
    assert res.manifest.config["busy"] == mode and res.manifest.config["calibration_busy"] == calibration


def test_train_cli_says_what_it_did_with_busy_rows(store, tmp_path, capsys):
    from hase.cli import main

    path = tmp_path / "p.toml"
    path.write_text(CONFIG.format(extra=""))
    assert main(["-q", "train", "--store", str(store), "--config", str(path), "--out", str(tmp_path / "o")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps lines at the console width
    assert "measured on a busy host or noisy (policy 'drop', weight 0.2): models 4 of 9 (4 busy, 0 noisy)" in out


def test_manifests_without_the_busy_record_still_load_with_their_digest(tmp_path):
    """A manifest written before the busy policy (no `training_data.busy`) loads, and writes back the same digest."""
    shutil.copytree(REPO / "hase" / "predictors" / "cpu-1t", tmp_path / "cpu-1t")
    raw = json.loads((tmp_path / "cpu-1t" / "manifest.json").read_text())
    del raw["training_data"]["busy"]
    raw["digest"] = manifest_digest(raw)
    (tmp_path / "cpu-1t" / "manifest.json").write_text(json.dumps(raw))
    manifest = read_manifest(tmp_path / "cpu-1t")
    assert manifest.training_data.busy == {} and manifest.to_dict()["digest"] == raw["digest"]
    assert Manifest.from_dict(manifest.to_dict()) == manifest
