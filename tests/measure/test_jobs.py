"""hase.measure.jobs: when the canary is due on a host, and `measure_job` on real ONNX Runtime (rows, or the reason)."""
from __future__ import annotations

from collect_cases import FAST, relu_model

from hase.kernels.types import KernelSpec
from hase.measure.canary import CanaryCheck
from hase.measure.config import load_collect_config
from hase.measure.jobs import FixedJob, HostWatch, KernelJob, ModelJob, job_label, measure_job
from hase.measure.types import ModelSource


def test_the_canary_is_due_first_before_every_model_and_every_nth_kernel():
    watch = HostWatch(every_kernels=2)
    kernel = KernelJob(KernelSpec("k1", "Relu", "", (), (), ()), b"")
    model = ModelJob("model:abc", relu_model(), ModelSource("m", "user", __file__), "m", ())
    seq = [FixedJob(), kernel, kernel, kernel, model, kernel, kernel, kernel]
    assert [watch.due(j) for j in seq] == [True, False, False, True, True, False, False, True]
    assert not any(HostWatch(every_kernels=None).due(j) for j in seq)
    assert watch.columns() == {}
    watch.seen(CanaryCheck(2.0, 1.0, 1, 0.0, 1.3))
    watch.seen(CanaryCheck(1.1, 1.1, 1, 0.0, 1.3))
    assert watch.reference_ms == 1.0 and watch.columns() == {"canary_ms": 1.1, "canary_ratio": 1.0, "host_busy": 0}
    assert [job_label(j) for j in (FixedJob(), kernel, model)] == [("empty kernel", "fixed"), ("Relu:k1", "kernel"),
                                                                   ("m", "model")]


def test_measure_job_returns_rows_or_the_reason(tmp_path):
    cfg_path = tmp_path / "devices.toml"
    cfg_path.write_text(FAST)
    cfg = load_collect_config(cfg_path)
    ok = measure_job(FixedJob(), cfg.devices[0], cfg.settings)
    assert ok.error is None and ok.rows["fixed_costs"][0]["median_ms"] > 0 and ok.timed_s > 0 and ok.check is None
    broken = KernelJob(KernelSpec("k1", "Relu", "", (), (), ()), b"not a model")
    bad = measure_job(broken, cfg.devices[0], cfg.settings)
    assert bad.rows == {} and bad.error is not None and bad.error.endswith("(HaseError)")
    assert "ONNX Runtime cannot load the model" in bad.error
