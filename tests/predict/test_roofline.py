"""Kernels predicted within physics: the host's peaks (`hase.measure.peaks`), the roofline and the band
(`hase.predict.roofline`), clamps counted by `KernelPredictor` and reported by `hase predict`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from tiny_store import TINY_CONFIG

from hase.cli import main
from hase.kernels.types import KernelSpec, TensorSpec
from hase.measure.jobs import PeaksJob, job_label
from hase.measure.peaks import NODE_OVERHEAD_FLOOR_MS, measure_peaks, peaks_from_rows, peaks_rows
from hase.measure.store import Store
from hase.measure.types import BandwidthLevel, HostPeaks
from hase.predict import dataset, roofline
from hase.predict.bundle import load_bundle, read_manifest
from hase.predict.estimate import estimate_model
from hase.predict.features import extract
from hase.predict.predictor import KernelPredictor
from hase.predict.train import load_train_config
from hase.runtime.types import EPConfig

PEAKS = HostPeaks("cpu-1t", 1e11, (BandwidthLevel("L1", 32 << 10, 16 << 10, 2e11),
                                   BandwidthLevel("L2", 1 << 20, 512 << 10, 1e11),
                                   BandwidthLevel("DRAM", 0, 64 << 20, 1e10)), 0.01)




def test_roofline_is_compute_or_memory_bound_at_the_working_sets_level():
    # 1 GFLOP over 1 kB: compute bound, 10 ms; 1 kFLOP over 100 MB: DRAM bound, 10 ms; 16 kB: L1, 0.08 us
    roof = roofline.roofline_ms(PEAKS, [1e9, 1e3, 0.0], [1e3, 1e8, 16e3])
    assert roof == pytest.approx([10.0 + 0.01, 10.0 + 0.01, 16e3 / 2e11 * 1e3 + 0.01])
    assert list(roofline.bandwidth(PEAKS, [1, 32 << 10, (32 << 10) + 1, 1 << 30])) == [2e11, 2e11, 1e11, 1e10]


def test_bands_widen_the_observed_ratios_and_clamp_counts():
    bands = roofline.fit_bands(["pool", "pool", "conv"], [0.5, 4.0, 2.0], margin=2.0)
    assert bands == {"*": (0.25, 8.0), "pool": (0.25, 8.0), "conv": (1.0, 4.0)}
    low, high = roofline.band_ms(np.array([1.0, 1.0, 1.0]), ["pool", "conv", "matmul"], bands)  # matmul: no band, '*'
    pred, flags = roofline.clamp(np.array([100.0, 0.5, 3.0]), low, high)
    assert list(pred) == [8.0, 1.0, 3.0] and flags == ["high", "low", ""]


def test_a_kernel_with_a_zero_roofline_has_no_band():
    """A byte-less kernel whose overhead measured 0 has no measured/roofline ratio: left out of the bands, never
    clamped (it was clamped to 0 ms once, on a loaded host)."""
    bands = roofline.fit_bands(["shape", "shape"], [np.inf, 2.0], margin=2.0)
    assert bands["shape"] == (1.0, 4.0)
    low, high = roofline.band_ms(np.array([0.0, 1.0]), ["shape", "shape"], bands)
    pred, flags = roofline.clamp(np.array([0.01, 9.0]), low, high)
    assert list(pred) == [0.01, 4.0] and flags == ["", "high"]


def test_peaks_are_measured_on_real_sessions_and_round_trip_the_store_rows():
    peaks = measure_peaks(EPConfig(name="cpu-1t"), gemm_size=256, caches={"L1": 32 << 10, "L2": 256 << 10,
                                                                          "L3": 2 << 20})
    assert peaks.gemm_flops_per_s > 0 and peaks.call_overhead_ms > 0
    assert peaks.node_overhead_ms >= NODE_OVERHEAD_FLOOR_MS
    assert [v.name for v in peaks.levels] == ["L1", "L2", "L3", "DRAM"] and all(v.bytes_per_s > 0 for v in peaks.levels)
    rows = peaks_rows(peaks, {"device": "cpu-1t"})
    assert peaks_from_rows("cpu-1t", rows) == peaks and peaks_from_rows("cpu-mt", rows) is None
    assert HostPeaks.from_dict(json.loads(json.dumps(peaks.to_dict()))) == peaks


def test_collect_stores_the_peaks_and_training_keeps_them(tiny_root):
    assert job_label(PeaksJob()) == ("host peaks", "peaks")
    with Store(tiny_root / "tiny.sqlite", readonly=True) as store:
        assert store.is_done(PeaksJob().job_id, "cpu-1t")  # one job per device and store: never measured twice
    data = dataset.load_device_data(tiny_root / "tiny.sqlite", "cpu-1t")
    assert data.peaks is not None and data.peaks.gemm_flops_per_s > 0
    manifest = read_manifest(tiny_root / "predictors" / "cpu-1t")
    assert manifest.peaks is not None and HostPeaks.from_dict(manifest.peaks) == data.peaks
    pred = load_bundle(tiny_root / "predictors" / "cpu-1t").predictors["span"]
    assert pred.host_peaks() == data.peaks and roofline.ALL in pred.bands_
    assert manifest.targets["span"].predictor.bands == pred.bands_  # the bands are readable in manifest.json


def test_in_range_kernels_are_never_clamped(tiny_root):
    """Every training kernel's prediction is the same with and without the band: clamping touches none of them."""
    data = dataset.load_device_data(tiny_root / "tiny.sqlite", "cpu-1t")
    cfg = load_train_config(tiny_root / "tiny.toml")
    y = dataset.kernel_targets(data, "span")
    specs = [data.specs[k] for k in y.index]
    bounded = cfg.predictor(False, data.peaks, "span").fit(specs, y.to_numpy()).predict_bounded(specs)
    free = cfg.predictor(False, None, "span").fit(specs, y.to_numpy()).predict_bounded(specs)
    assert set(bounded.clamped) == {""} and np.array_equal(bounded.pred_ms, free.pred_ms)
    assert np.isnan(free.roofline_ms).all() and (bounded.roofline_ms > 0).all()


def test_roofline_forests_predict_and_save(tiny_root, tmp_path):
    """With `roofline = true` the trees correct the roofline time; the predictor saves, loads and predicts alike."""
    data = dataset.load_device_data(tiny_root / "tiny.sqlite", "cpu-1t")
    (tmp_path / "r.toml").write_text(TINY_CONFIG.replace("[training]", "[training]\nroofline = true"))
    y = dataset.kernel_targets(data, "warm")
    specs = [data.specs[k] for k in y.index]
    pred = load_train_config(tmp_path / "r.toml").predictor(False, data.peaks).fit(specs, y.to_numpy())
    assert all(m.roofline for m in pred.forests_.values())
    back = KernelPredictor.from_arrays(*pred.to_arrays())
    assert np.array_equal(back.predict(specs), pred.predict(specs))
    assert np.median(np.abs(pred.predict(specs) / y.to_numpy() - 1)) < 0.5


def huge_pool_model(path: Path) -> Path:
    """An AveragePool 3x3 over 1x64x512x512: 64 MB in, far beyond any kernel of the tiny store."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 512, 512])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 512, 512])
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="pool")
    m = helper.make_model(helper.make_graph([node], "pool", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_a_kernel_far_outside_the_training_range_is_bounded_and_counted(tiny_root, tmp_path, capsys):
    """The band is learnt from the tiny store's measured ratios, which move with the host's load, so whether this
    pool leaves it varies from run to run: the predictor's own band is checked to hold, and a band the unclamped
    forecast is sure to leave (half its ratio to the roofline) checks the clamp and its count."""
    path = huge_pool_model(tmp_path / "pool.onnx")
    bundle = load_bundle(tiny_root / "predictors" / "cpu-1t")
    predictor = bundle.predictors[bundle.default_target]
    est = estimate_model(path, bundle)
    (k,) = [k for k in est.kernels if k.op_type == "AveragePool"]
    lo, hi = roofline.band_ms(np.array([k.roofline_ms]), ["pool"], predictor.bands_)
    assert lo[0] * (1 - 1e-9) <= k.pred_ms <= hi[0] * (1 + 1e-9)
    learnt = dict(predictor.bands_)
    predictor.bands_ = {f: (0.0, np.inf) for f in learnt}  # every band wide open: the forests' own forecast
    (free,) = [f for f in estimate_model(path, bundle).kernels if f.op_type == "AveragePool"]
    ratio = free.pred_ms / free.roofline_ms
    predictor.bands_ = {**learnt, "pool": (ratio / 100, ratio / 2)}
    est = estimate_model(path, bundle)
    (k,) = [k for k in est.kernels if k.op_type == "AveragePool"]
    assert k.clamped == "high" and k.pred_ms == pytest.approx(free.roofline_ms * ratio / 2)
    assert k in est.clamped and ("AveragePool", "high", 1) in est.clamp_counts()
    d = est.to_dict()
    assert d["n_clamped"] == len(est.clamped) and {"op_type": "AveragePool", "side": "high"}.items() <= next(
        c for c in d["clamped"] if c["op_type"] == "AveragePool").items()
    assert main(["predict", str(path), "--predictors", str(tiny_root / "predictors"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_clamped"] == len(out["clamped"])  # one entry per clamped kernel
    assert main(["predict", str(path), "--predictors", str(tiny_root / "predictors")]) == 0
    assert ("clamped to the physical band" in capsys.readouterr().out) == (out["n_clamped"] > 0)


def test_a_predictor_without_peaks_predicts_as_before():
    """Predictors trained before peaks have no peaks and no band: they clamp nothing and predict what the forests
    say (the shipped one with its peaks and bands taken away)."""
    bundle = load_bundle(Path(__file__).parents[2] / "hase" / "predictors" / "cpu-1t")
    assert bundle.manifest.peaks is not None  # trained with peaks
    pred = bundle.predictors[bundle.default_target]
    pred.peaks, pred.bands_ = None, {}
    spec = KernelSpec("pool7", "AveragePool", "", (("kernel_shape", [7, 7]),),
                      (TensorSpec("x", (1, 1280, 7, 7), "float32"),), (TensorSpec("y", (1, 1280, 1, 1), "float32"),))
    r = pred.predict_bounded([spec])
    assert r.clamped == [""] and np.isnan(r.roofline_ms).all()
    assert np.array_equal(r.pred_ms, pred.predict_routes([spec])[2])


def test_a_pool_window_beyond_the_plane_costs_what_the_plane_does():
    """HF's EfficientNet pools 1280x7x7 with a 1280x1280 window: its features (and FLOPs, and so its roofline) are
    those of a 7x7 window, not 2 GFLOP."""
    x, y = (TensorSpec("x", (1, 1280, 7, 7), "float32"),), (TensorSpec("y", (1, 1280, 1, 1), "float32"),)
    hf = KernelSpec("hf", "AveragePool", "", (("ceil_mode", 1), ("kernel_shape", [1280, 1280]),
                                              ("strides", [1280, 1280])), x, y)
    plane = KernelSpec("w7", "AveragePool", "", (("kernel_shape", [7, 7]), ("strides", [7, 7])), x, y)
    assert extract(hf) == extract(plane) and extract(hf)["flops"] == 1280 * 49
