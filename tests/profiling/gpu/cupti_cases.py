"""Constructed CUDA-EP profiles and CUPTI activity records for the GPU attribution tests.

CONSTRUCTED for the cases the real captures (captured.py, an H200 run of 2026-11-28) do not hold: a copy launched
before Execute, a node on the CPU, a launch on another thread, a missing launch record, GPU-bound and balanced
runs. Their format follows the captures: ORT 1.31's CUDA-EP profile without fences (`<node>_kernel_time` on the
launching thread, `model_run`, `SequentialExecutor::Execute`), and `SimpleNamespace` records with cupti-python
13's attribute names (`kind`, `start`, `end`, `correlation_id`, `stream_id`, `device_id`, `name`, `copy_kind`,
`cbid`, `thread_id`, `process_id`). The assumptions themselves are checked on the captures
(test_gpu_captured.py).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hase.profiling.gpu.records import ClockSync

CUDA = "CUDAExecutionProvider"
TID = 7
C_NS = 5_000_000_000  # CUPTI's clock at the pair read
WALL_NS = 1_700_000_000_000_000_000  # time.time_ns() at the pair read
START_SHIFT_NS = 2_000_000  # the profile started 2 ms before the pair read
CLOCK = ClockSync(cupti_ns=C_NS, wall_ns=WALL_NS, profile_start_ns=WALL_NS - START_SHIFT_NS)
KERNEL, MEMCPY, DRIVER, RUNTIME, CONTEXT = 10, 1, 4, 5, 9  # cupti.ActivityKind values
CBID_LAUNCH, CBID_MEMCPY_ASYNC, CBID_CU_LAUNCH = 211, 41, 307


def ns(profile_us: float) -> int:
    """The CUPTI time that `CLOCK` maps to `profile_us`."""
    return round(C_NS - START_SHIFT_NS + profile_us * 1e3)


def ev(cat: str, name: str, ts: float, dur: float, args: dict[str, Any] | None = None, tid: int = TID) -> dict:
    return {"cat": cat, "pid": 1, "tid": tid, "dur": dur, "ts": ts, "ph": "X", "name": name, "args": args or {}}


def kernel(corr: int, start_us: float, end_us: float, name: str = "k", stream: int = 13) -> SimpleNamespace:
    return SimpleNamespace(kind=KERNEL, start=ns(start_us), end=ns(end_us), correlation_id=corr, stream_id=stream,
                           device_id=0, context_id=1, name=name, grid_x=1, grid_y=1, grid_z=1)


def memcpy(corr: int, start_us: float, end_us: float, copy_kind: int = 1) -> SimpleNamespace:
    return SimpleNamespace(kind=MEMCPY, start=ns(start_us), end=ns(end_us), correlation_id=corr, stream_id=13,
                           device_id=0, context_id=1, copy_kind=copy_kind, bytes=4096)


def api(corr: int, start_us: float, end_us: float, tid: int = TID, kind: int = RUNTIME,
        cbid: int = CBID_LAUNCH) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, start=ns(start_us), end=ns(end_us), correlation_id=corr, cbid=cbid,
                           process_id=1, thread_id=tid)


def cuda_run(t0: float, kernel_us: float, corr0: int) -> tuple[list[dict], list[SimpleNamespace]]:
    """One model_run of 1000 µs from `t0` and its records.

    An input copy launched at t0+10 (before Execute, so no node's); Execute t0+100..t0+400: `conv` launches
    two kernels in its kernel_time window [t0+110, t0+130], `shape_gather` runs on the CPU with no GPU work,
    `gemm` launches one kernel in [t0+200, t0+210]. Kernels last `kernel_us` each, back to back on one stream
    from t0+150.
    """
    events = [
        ev("Session", "model_run", t0, 1000.0),
        ev("Session", "SequentialExecutor::Execute", t0 + 100, 300.0),
        ev("Node", "conv_kernel_time", t0 + 110, 20.0, {"op_name": "FusedConv", "provider": CUDA, "node_index": "0"}),
        ev("Node", "shape_gather_kernel_time", t0 + 140, 5.0,
           {"op_name": "Gather", "provider": "CPUExecutionProvider", "node_index": "1"}),
        ev("Node", "gemm_kernel_time", t0 + 200, 10.0, {"op_name": "Gemm", "provider": CUDA, "node_index": "2"}),
    ]
    k0 = t0 + 150
    recs = [
        api(corr0, t0 + 10, t0 + 15, cbid=CBID_MEMCPY_ASYNC), memcpy(corr0, t0 + 20, t0 + 30),
        api(corr0 + 1, t0 + 112, t0 + 115), kernel(corr0 + 1, k0, k0 + kernel_us, "conv_a"),
        api(corr0 + 2, t0 + 120, t0 + 124), kernel(corr0 + 2, k0 + kernel_us, k0 + 2 * kernel_us, "conv_b"),
        api(corr0 + 3, t0 + 202, t0 + 205), kernel(corr0 + 3, k0 + 2 * kernel_us, k0 + 3 * kernel_us, "gemm"),
    ]
    return events, recs


def cuda_profile(kernel_us: float = 50.0, runs: int = 2) -> tuple[list[dict], list[SimpleNamespace]]:
    """`runs` runs of `cuda_run`, 2000 µs apart, after a session_initialization event."""
    events, recs = [ev("Session", "session_initialization", 0.0, 500.0)], []
    for i in range(runs):
        e, r = cuda_run(1000.0 + 2000.0 * i, kernel_us, 100 * (i + 1))
        events += e
        recs += r
    return events, recs
