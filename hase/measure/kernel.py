"""Units of measuring work: one kernel, or the empty kernel, on one device config (`model.py` does full models).

Each is a plain function of (job, EPConfig, settings) returning store rows, so a job list can be
spread over a fleet of devices by any distributed engine; nothing here touches the store.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from hase.errors import HaseError, first_line
from hase.kernels.split import kernel_feeds
from hase.kernels.types import KernelSpec
from hase.measure.store import timing_row
from hase.measure.types import MeasureSettings
from hase.runtime import sessions
from hase.runtime.sessions import BoundRunner, time_loop
from hase.runtime.types import EPConfig


@dataclass(frozen=True)
class KernelJob:
    """Measure one unique kernel: its signature and its serialized single-node model."""

    spec: KernelSpec
    model_bytes: bytes

    @property
    def job_id(self) -> str:
        """The store's done-marker of this job (per device)."""
        return f"kernel:{self.spec.kernel_id}"

    @property
    def weight_bytes(self) -> int:
        """Bytes of the kernel's constant inputs: what each cold session holds a copy of."""
        return sum(t.nbytes for t in self.spec.inputs if t.const and t.name)


def cold_session_count(weight_bytes: int, settings: MeasureSettings) -> int:
    """How many sessions (each with its own weight copy) to rotate so weights are not cache-hot.

    At least 2, at most `settings.cold_sessions`, and no more copies than fit in `cold_max_bytes`.
    """
    if weight_bytes <= 0:
        return 2
    return int(max(2, min(settings.cold_sessions, settings.cold_max_bytes // weight_bytes)))


def measure_kernel(job: KernelJob, ep: EPConfig, settings: MeasureSettings) -> list[dict[str, Any]]:
    """Standalone latency of one kernel, warm and with cold weights; rows for `kernel_measurements`.

    warm: one session, the same bound buffers every run (nn-Meter's way).
    cold_weights: round-robin over K sessions of the same kernel, each holding its own weights; on the CPU
    EP all are bound to the same host input buffers (activations stay warm, weights come from further away);
    on CUDA each runner copies the inputs to its own device buffers, so activations rotate as well.
    """
    feeds = kernel_feeds(job.spec)
    meta = sessions.row_metadata(ep)
    k = cold_session_count(job.weight_bytes, settings)
    kernel_sessions = [sessions.make_session(job.model_bytes, ep, opt_level="disabled") for _ in range(k)]
    runners = [BoundRunner(s, feeds, ep) for s in kernel_sessions]
    try:
        runners[0].run()
    except Exception as exc:
        raise HaseError(f"kernel {job.spec.op_type} {job.spec.kernel_id} fails to run standalone: "
                        f"{first_line(exc)}") from exc
    warm = time_loop([runners[0].run], settings.kernel)
    cold = time_loop([r.run for r in runners], dataclasses.replace(
        settings.kernel, warmup=max(settings.kernel.warmup, k), min_runs=max(settings.kernel.min_runs, 2 * k)))
    now = time.time()
    base = {"kernel_id": job.spec.kernel_id, "op_type": job.spec.op_type, "weight_bytes": job.weight_bytes,
            **meta, "measured_at": now}
    return [{**base, "variant": "warm", "n_sessions": 1, **timing_row(warm)},
            {**base, "variant": "cold_weights", "n_sessions": k, **timing_row(cold)}]


def empty_kernel_model() -> onnx.ModelProto:
    """An Identity on one float: what a standalone run costs when the kernel does nothing."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="empty")], "empty", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="hase")
    m.ir_version = 8
    return m


def measure_fixed_cost(ep: EPConfig, settings: MeasureSettings) -> dict[str, Any]:
    """Per-run fixed cost of a standalone kernel run (row for `fixed_costs`)."""
    sess = sessions.make_session(empty_kernel_model().SerializeToString(), ep, opt_level="disabled")
    runner = BoundRunner(sess, {"x": np.zeros(1, np.float32)}, ep)
    policy = dataclasses.replace(settings.kernel, min_runs=max(settings.kernel.min_runs, 200),
                                 max_runs=max(settings.kernel.max_runs, 2000))
    t = time_loop([runner.run], policy)
    return {"kind": "empty_kernel", **timing_row(t), **sessions.row_metadata(ep), "measured_at": time.time()}
