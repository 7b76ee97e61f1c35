"""hase.predict.adapt on the tiny store's predictor: the adapted predictor loads, records its source and this host's
fingerprint and signature, predicts, and is the one the lookup picks here; its host map multiplies every
prediction; an interrupted adaptation writes nothing. Trained predictors keep their machine's fingerprint, signature
and noise."""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import numpy as np
import pytest
from tiny_store import adapt_tiny, build_tiny_store, train_tiny

from hase.errors import HaseError
from hase.measure.signature import Signature
from hase.measure.store import Store
from hase.measure.types import MeasureSettings, ModelSource
from hase.predict.adapt import (
    TRANSFER_PASSES,
    MeasuredModel,
    adapt,
    measure_transfer,
    merge_passes,
    next_family,
    recalibrate,
    scale_forests,
    transfer_noise,
)
from hase.predict.bundle import load_bundle, read_manifest
from hase.predict.calibration import Calibration
from hase.predict.dataset import load_device_data
from hase.predict.estimate import estimate_model
from hase.predict.host_map import forest_label
from hase.predict.locate import find_predictor
from hase.runtime.host import host_fingerprint
from hase.runtime.types import HOST_FP, EPConfig, TimingPolicy


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny store, its trained predictor and its adaptation to this host."""
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_store(root)
    train_tiny(root)
    adapt_tiny(root)
    return root


def test_a_trained_predictor_keeps_its_machine_and_its_store_noise(root):
    fp = host_fingerprint()
    with Store(root / "tiny.sqlite", readonly=True) as store:
        assert store.hosts() == {fp.digest: fp}
        for table in ("kernel_measurements", "model_measurements", "node_spans", "fixed_costs"):
            assert set(store.table(table)[HOST_FP]) == {fp.digest}, table
    m = read_manifest(root / "predictors" / "cpu-1t")
    assert m.host == host_fingerprint()
    sig = Signature.from_dict(m.signature or {})
    assert sig.host_fp == m.host.digest and {p.family for p in sig.probes} >= {"conv", "gemm", "pool"}
    assert m.noise["models"] == 9 and m.noise["jobs"] > 9 and 0 <= m.noise["busy_share"] <= 1
    assert m.noise["model_spread_median"] is not None


def test_the_adapted_predictor_loads_records_its_source_and_predicts(root):
    out = adapt_tiny(root)
    bundle = load_bundle(out)
    m = bundle.manifest
    assert out.name == f"cpu-1t@{host_fingerprint().digest}" and m.device == "cpu-1t"
    assert m.adaptation["source_path"] == str(root / "predictors" / "cpu-1t") and m.host == host_fingerprint()
    assert Signature.from_dict(m.signature or {}).host_fp == host_fingerprint().digest
    assert m.adaptation["scales"] and len(m.adaptation["models"]) == 9
    assert m.target(bundle.default_target).calibration.calibration.to_dict() == m.adaptation["calibration"]["after"]
    assert find_predictor("cpu-1t", out.parent).path == out  # the lookup prefers the adaptation made here
    with pytest.raises(HaseError, match="no trained predictor"):  # adapt starts from the device's own, never this
        find_predictor("cpu-1t", out.parent, adapted=False)
    est = estimate_model(root / "mlp0.onnx", bundle)
    assert est.latency_ms > 0 and est.n_kernels == 3


def test_the_host_map_multiplies_every_prediction_and_travels_with_the_predictor(root):
    data = load_device_data(root / "tiny.sqlite")
    specs = list(data.specs.values())[:12]
    pred = load_bundle(root / "predictors" / "cpu-1t").predictors["warm"]
    base = pred.predict(specs)
    doubled = MeasuredModel("x", "convnet", 1.0, tuple(specs), tuple(2 * base))
    scaled, scales, global_scale = scale_forests(pred, [doubled], shrink=5.0)
    assert global_scale == pytest.approx(2.0)
    assert all(s["measured_ratio"] == pytest.approx(2.0) for s in scales.values())
    # applied after the band clamp: a prediction at its band's edge is doubled too
    np.testing.assert_allclose(scaled.predict(specs), 2 * base, rtol=1e-9)
    np.testing.assert_allclose(pred.predict(specs), base)  # the source is left as it was
    meta, arrays = scaled.to_arrays()
    assert meta["host_maps"] and np.array_equal(type(scaled).from_arrays(meta, arrays).predict(specs),
                                                scaled.predict(specs))
    # one kernel measured 4x, the rest as predicted: its forest's offset is shrunk toward no offset
    once = MeasuredModel("y", "convnet", 1.0, tuple(specs), tuple([4 * base[0], *base[1:]]))
    _, scales, g = scale_forests(pred, [once], shrink=5.0)
    key = pred.route(specs[0])
    label = forest_label(key[0], key[1], key[2].family)
    assert scales[label]["scale"] < scales[label]["measured_ratio"] <= 4.0 and g > 1.0
    # adapted again: the second map is fitted on what the first predicts, and both apply
    twice, _, g2 = scale_forests(scaled, [doubled], shrink=5.0)
    assert len(twice.host_maps_) == 2 and g2 == pytest.approx(1.0)
    np.testing.assert_allclose(twice.predict(specs), 2 * base, rtol=1e-6)


def test_the_recalibration_keeps_the_sources_weight_streaming(root):
    data = load_device_data(root / "tiny.sqlite")
    specs = list(data.specs.values())
    pred = load_bundle(root / "predictors" / "cpu-1t").predictors["warm"]
    models = [MeasuredModel(f"m{i}", "convnet", 2 * float(pred.predict(specs[i:i + 4]).sum()), tuple(specs[i:i + 4]),
                            tuple(2 * pred.predict(specs[i:i + 4]))) for i in range(0, 4 * 8, 4)]
    cal = Calibration("per_kernel", "relative", 1.0, 0.0, 0.0, kappa=1.1, stream_power=1.0)
    new, choice, _ = recalibrate(pred, cal, models)
    assert (new.kappa, new.stream_power) == (1.1, 1.0) and choice in ("rescaled", "refitted")


def test_an_interrupted_adaptation_writes_nothing(root, tmp_path):
    sources = [ModelSource(p.stem, "tiny", p) for p in sorted(root.glob("*.onnx"))]

    def stop(msg: str) -> None:
        if msg.startswith("transfer model 2"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        adapt("cpu-1t", sources, 40.0, tmp_path / "out", root / "predictors", progress=stop)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_transfer_order_measures_every_family_first_then_where_the_source_is_most_wrong(tmp_path):
    """`next_family`, pure composition: unmeasured families in queue order first; then the family whose kernels'
    measured/predicted log ratios stray furthest from the rest, damped as it gets measured more."""
    src = [ModelSource(f"{f}{i}", f, tmp_path / f"{f}{i}.onnx") for f in ("conv", "gemm", "pool") for i in range(3)]
    queues = {f: [s for s in src if s.family == f] for f in ("conv", "gemm", "pool")}
    none_yet = {"conv": [], "gemm": [], "pool": []}
    assert next_family(queues, none_yet, {"conv": 1, "gemm": 0, "pool": 0}) == "gemm"
    ratios = {"conv": [-0.6] * 6, "gemm": [-0.61, -0.6], "pool": [0.1, 0.3, 0.2]}  # pool is off here
    assert next_family(queues, ratios, {"conv": 1, "gemm": 1, "pool": 1}) == "pool"
    ratios["gemm"] = [-0.3, -0.2]  # gemm is off too, less so: it waits while pool is measured little ...
    assert next_family(queues, ratios, {"conv": 1, "gemm": 1, "pool": 1}) == "pool"
    assert next_family(queues, ratios, {"conv": 1, "gemm": 1, "pool": 50}) == "gemm"  # ... and not once it is a lot
    assert next_family(queues, {**ratios, "gemm": []}, {"conv": 1, "gemm": 1, "pool": 1}) == "gemm"  # nothing back yet


def test_transfer_models_are_measured_in_several_passes_and_keep_the_quickest(root):
    fast = TimingPolicy(warmup=1, min_runs=5, max_runs=10, min_time_s=0.0, max_time_s=0.05)
    settings = MeasureSettings(kernel=fast, model=fast, model_blocks=2, profile_warmup=1, profile_runs=3)
    sources = [ModelSource(p.stem, "tiny", p) for p in sorted(root.glob("*.onnx"))][:4]
    said: list[str] = []
    measured, skipped = measure_transfer(sources, EPConfig(name="cpu-1t"), "span", settings,
                                         time.perf_counter() + 120, said.append)
    assert [m.name for m in measured] == [s.name for s in sources] and not skipped
    last = f"pass {TRANSFER_PASSES}/{TRANSFER_PASSES}"
    assert TRANSFER_PASSES >= 2 and sum(last in msg for msg in said) == len(sources)  # later passes revisit each
    for m in measured:
        assert len(m.pass_ms) == TRANSFER_PASSES and m.latency_ms == min(m.pass_ms) and m.spread >= 0
        assert all(math.isfinite(v) and v > 0 for v in m.target_ms)
    noise, repeated = transfer_noise(measured)
    assert repeated == len(sources) and noise >= 0


def test_two_passes_merge_into_the_quickest_latency_and_each_nodes_quickest_target(root):
    """`merge_passes`, pure composition over real kernel specs."""
    specs = tuple(list(load_device_data(root / "tiny.sqlite").specs.values())[:3])
    a = MeasuredModel("m", "tiny", 2.0, specs, (1.0, math.nan, 3.0), (2.0,))
    b = MeasuredModel("m", "tiny", 1.5, specs, (2.0, 0.5, math.nan), (1.5,))
    m = merge_passes(a, b)
    assert m.latency_ms == 1.5 and m.pass_ms == (2.0, 1.5) and m.spread == pytest.approx(2.0 / 1.5 - 1)
    assert m.target_ms == (1.0, 0.5, 3.0)
    assert merge_passes(m, b).pass_ms == (2.0, 1.5, 1.5)
    assert math.isnan(a.spread) and transfer_noise([a]) == (pytest.approx(math.nan, nan_ok=True), 0)
    with pytest.raises(HaseError, match="different kernel graphs"):
        merge_passes(a, dataclasses.replace(b, specs=specs[::-1]))
