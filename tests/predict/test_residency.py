"""hase.predict.residency: weights a model's tensors push out of cache, streamed again on each run."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import conv_bn_relu_model

from hase.kernels import graph, split
from hase.kernels.types import KernelSpec, TensorSpec
from hase.measure.types import BandwidthLevel, HostPeaks
from hase.predict import residency
from hase.predict.bundle import load_bundle
from hase.predict.calibration import Calibration
from hase.predict.estimate import compose
from hase.runtime.types import EPConfig

MB = 1 << 20
PEAKS = HostPeaks("cpu-1t", 1e11, (BandwidthLevel("L2", MB, MB // 2, 1e11), BandwidthLevel("L3", 8 * MB, 4 * MB, 5e10),
                                   BandwidthLevel("DRAM", 0, 64 * MB, 2e10)), 0.02)


def _matmul(rows: int, k: int, n: int, name: str = "mm") -> KernelSpec:
    """A MatMul of [rows, k] by a constant [k, n] weight (what ORT runs for a linear layer)."""
    ins = (TensorSpec(f"{name}_a", (rows, k), "float32"), TensorSpec(f"{name}_w", (k, n), "float32", True))
    return KernelSpec(f"{name}-{rows}-{k}-{n}", "MatMul", "", (), ins, (TensorSpec(f"{name}_y", (rows, n), "float32"),))


def _relu(elems: int) -> KernelSpec:
    t = (TensorSpec("x", (1, elems), "float32"),)
    return KernelSpec(f"relu-{elems}", "Relu", "", (), t, (TensorSpec("y", (1, elems), "float32"),))


def test_a_model_that_fits_in_cache_streams_nothing():
    specs = [n.spec for n in split.split(graph.kernel_graph(conv_bn_relu_model(c=8, hw=16), EPConfig()))]
    assert residency.footprint_bytes(specs) < 9 * MB and residency.cold_share(residency.footprint_bytes(specs),
                                                                               PEAKS) == 0.0
    assert not residency.stream_ms(specs, PEAKS).any()


def test_weights_of_a_model_over_the_caches_stream_at_dram_bandwidth():
    specs = [_matmul(1, 2048, 2048, "a"), _relu(2048), _matmul(1, 2048, 2048, "b")]  # two 16 MB weights
    footprint = residency.footprint_bytes(specs)
    assert footprint == 2 * (16 * MB + 8192) + 8192
    share = residency.cold_share(footprint, PEAKS)
    assert share == pytest.approx(1 - 9 * MB / footprint)
    stream = residency.stream_ms(specs, PEAKS)
    assert stream[1] == 0.0  # an element-wise op has no weights to read
    assert stream[0] == stream[2] == pytest.approx(share * 16 * MB / 2e10 * 1e3)


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_streaming_adds_or_is_a_smooth_maximum_and_both_are_recovered_from_held_out_kernels(power):
    assert np.array_equal(residency.with_streaming([1.0, 2.0], [5.0, 5.0], 0.0), [1.0, 2.0])
    assert residency.with_streaming([3.0], [2.0], 2.0) == pytest.approx([5.0])  # hypot(3, 2 x 2)
    assert residency.with_streaming([3.0], [2.0], 2.0, 1.0) == pytest.approx([7.0])  # 3 + 2 x 2
    rng = np.random.default_rng(0)
    pred, stream = rng.uniform(0.1, 2.0, 300), rng.uniform(0.0, 1.0, 300)
    measured = residency.with_streaming(pred, stream, 2.5, power) * np.exp(rng.normal(0, 0.02, 300))
    fitted = residency.fit_streaming(pred, measured, stream)
    assert fitted.power == power and fitted.kappa == pytest.approx(2.5, abs=0.2)
    assert residency.fit_streaming(pred, measured, np.zeros(300)) == residency.NO_STREAMING  # nothing streams


def test_compose_adds_each_node_its_streaming_with_the_calibrations_kappa(tiny_root: Path):
    pred = load_bundle(tiny_root / "predictors" / "cpu-1t", ["span"]).predictors["span"]
    peaks = pred.host_peaks()
    assert peaks is not None  # collect measured the host's peaks into the tiny store
    cache = sum(v.capacity_bytes for v in peaks.levels)
    side = int(np.sqrt(2 * cache / 4)) // 64 * 64  # one weight twice the host's caches
    specs = [_matmul(1, side, side), _relu(side)]
    plain = compose(specs, pred, Calibration(), n_draws=8)
    cal = Calibration(kappa=2.0)
    streamed = compose(specs, pred, cal, n_draws=8)
    stream = residency.stream_ms(specs, peaks)
    assert stream[0] > 0 and stream[1] == 0
    assert streamed.pred_ms[0] == pytest.approx(np.hypot(plain.pred_ms[0], 2.0 * stream[0]))
    assert streamed.pred_ms[1] == pytest.approx(plain.pred_ms[1]) and streamed.sum_ms > plain.sum_ms
    assert cal.to_dict()["kappa"] == 2.0 and "kappa" not in Calibration().to_dict()  # old manifests: unchanged
    assert Calibration.from_dict(cal.to_dict()) == cal and "κ=2.0" in cal.describe()
    added = Calibration(kappa=2.0, stream_power=1.0)
    assert compose(specs, pred, added, n_draws=8).pred_ms[0] == pytest.approx(plain.pred_ms[0] + 2.0 * stream[0])
    assert Calibration.from_dict(added.to_dict()) == added and "added" in added.describe()
    before = {k: v for k, v in cal.to_dict().items() if k != "stream_power"}  # a manifest from before the power
    assert Calibration.from_dict(before).streaming == residency.Streaming(2.0, 2.0)


def test_training_fits_no_kappa_where_every_model_fits_in_cache_and_checks_the_switch(tiny_root: Path,
                                                                                     tmp_path: Path):
    """The tiny store's models all fit in this host's caches: nothing streams, so kappa is 0 and the shipped
    calibration has none; `weight_streaming` must be a boolean."""
    from hase.errors import HaseError
    from hase.predict import crossval, dataset
    from hase.predict.train import load_train_config

    data = dataset.load_device_data(tiny_root / "tiny.sqlite", "cpu-1t")
    assert data.peaks is not None
    targets = load_bundle(tiny_root / "predictors" / "cpu-1t").manifest.targets
    assert all(t.calibration.calibration.kappa == 0.0 for t in targets.values())
    kernels = crossval.leave_family_out(data, "span", lambda: load_train_config(tiny_root / "tiny.toml").predictor(
        True, data.peaks, "span"))[1]
    assert len(kernels) and crossval.held_out_streaming(data, kernels) == residency.NO_STREAMING
    bad = tmp_path / "bad.toml"
    bad.write_text((tiny_root / "tiny.toml").read_text().replace("[training]", "[training]\nweight_streaming = 1", 1))
    with pytest.raises(HaseError, match="weight_streaming"):
        load_train_config(bad)


def test_each_form_gets_its_own_kappa_best_fit_first():
    """`fit_streaming_forms`: adding and a smooth maximum each fitted (the true form first, its kappa recovered);
    a form whose best kappa is 0 is left out, and nothing that streams gives no form."""
    rng = np.random.default_rng(1)
    pred, stream = rng.uniform(0.1, 2.0, 300), rng.uniform(0.0, 1.0, 300)
    measured = residency.with_streaming(pred, stream, 1.5, 1.0) * np.exp(rng.normal(0, 0.02, 300))
    forms = residency.fit_streaming_forms(pred, measured, stream)
    assert [f.power for f in forms] == [1.0, 2.0] and forms[0].kappa == pytest.approx(1.5, abs=0.2)
    assert forms[1].kappa > forms[0].kappa  # a smooth maximum needs more streaming to add as much
    assert forms[0] == residency.fit_streaming(pred, measured, stream)
    assert residency.fit_streaming_forms(pred, pred, stream) == []  # no streaming in the data: kappa 0 for both
    assert residency.fit_streaming_forms(pred, measured, np.zeros(300)) == []
