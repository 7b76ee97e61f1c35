"""The host's peaks, measured once per device config at the start of `collect`: what kernels cannot beat.

Three probes, each a real ONNX Runtime session in the device config's own settings (threads, provider), timed
the robust way (`hase.runtime.robust`: minimum of block medians), a few seconds in all:

- per-call overhead: one Add over 16 floats, whose session.run is almost all ORT's own cost; per-node overhead:
  what each further Add of a chain of 16 such Adds adds;
- GEMM FLOP/s: a `gemm_size`² fp32 MatMul (2·n³ FLOPs), its run less the per-call overhead;
- bandwidth per memory level: a chain of Adds (y_i = y_{i-1} + b) over buffers whose working set (three
  buffers) is half of L1, L2, L3 (sizes from sysfs) and a multiple of L3 for DRAM; bytes moved per node
  (read two, write one) over the run less the overhead, per node.

    >>> peaks = measure_peaks(EPConfig(name="cpu-1t"))
    >>> peaks.gemm_flops_per_s, [round(v.bytes_per_s / 1e9) for v in peaks.levels], peaks.call_overhead_ms
    (9.1e10, [58, 41, 27, 12], 0.011)
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from hase.measure.canary import overhead_model
from hase.measure.types import BandwidthLevel, HostPeaks
from hase.runtime import sessions
from hase.runtime.robust import BlockPolicy, RobustTiming, time_blocks
from hase.runtime.types import EPConfig, TimingPolicy

__all__ = ["PEAKS_JOB", "cache_sizes", "measure_peaks", "peaks_from_rows", "peaks_rows"]

log = logging.getLogger(__name__)

PEAKS_JOB = "peaks:host"  # the store's done-marker of a device config's peaks
DEFAULT_CACHES = {"L1": 32 << 10, "L2": 1 << 20, "L3": 8 << 20}  # where sysfs says nothing
NODE_CHAIN = 16  # tiny Adds whose chain gives the per-node overhead
#: the least a node inside a model costs (10 ns, a few dozen cycles: below any ORT node dispatch); the measured
#: difference of two ~50 us sessions can come out at or below 0 on a loaded host, and a zero node overhead gives
#: a byte-less kernel (Reshape) a zero roofline
NODE_OVERHEAD_FLOOR_MS = 1e-5
CHAIN_BYTES = 256 << 20  # bytes a bandwidth probe's chain moves per run (its node count follows, 2 to 64)
_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


def cache_sizes(root: Path = _SYSFS_CACHE) -> dict[str, int]:
    """Data cache size per level ("L1", "L2", "L3") of CPU 0, from sysfs; the defaults where it is not readable."""
    sizes: dict[str, int] = {}
    for index in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            size = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        if kind == "Instruction" or not size:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
        sizes[f"L{level}"] = int(size.rstrip("KMG")) * scale
    return {name: sizes.get(name, default) for name, default in DEFAULT_CACHES.items()}


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], output: str, shape: list[int]) -> bytes:
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    g = helper.make_graph(nodes, "peaks", vi, [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="hase")
    m.ir_version = 8
    return bytes(m.SerializeToString())


def _time(model: bytes, feeds: dict[str, np.ndarray], ep: EPConfig, runs: int) -> RobustTiming:
    """The robust run time of a session of `model` on `ep` (3 blocks of at least `runs` runs, 0.05-0.5 s each)."""
    session = sessions.make_session(model, ep, opt_level="disabled")
    runner = sessions.BoundRunner(session, feeds, ep)
    runner.run()
    block = TimingPolicy(warmup=0, min_runs=runs, max_runs=max(runs, 5000), min_time_s=0.05, max_time_s=0.5)
    return time_blocks(runner.run, BlockPolicy(warmup=2, blocks=3, block=block, noise_bound=0.2))


def _overhead(ep: EPConfig) -> RobustTiming:
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 16)).astype(np.float32) for n in ("a", "b")}
    return _time(overhead_model().SerializeToString(), feeds, ep, runs=100)


def _gemm(ep: EPConfig, n: int) -> RobustTiming:
    rng = np.random.default_rng(0)
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": [n, n], "b": [n, n]}, "y", [n, n])
    return _time(model, {k: rng.standard_normal((n, n)).astype(np.float32) for k in ("a", "b")}, ep, runs=3)


def _chain(ep: EPConfig, elems: int, k: int) -> RobustTiming:
    """k Adds in a chain over `elems` floats each: y_i = y_{i-1} + b."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"y{i - 1}", "b"], [f"y{i}"]) for i in range(k)]
    model = _model(nodes, {"x": [elems], "b": [elems]}, f"y{k - 1}", [elems])
    return _time(model, {n: rng.standard_normal(elems).astype(np.float32) for n in ("x", "b")}, ep, runs=3)


def measure_peaks(ep: EPConfig, gemm_size: int = 1024, caches: dict[str, int] | None = None) -> HostPeaks:
    """The host's peaks on `ep` (module docstring): a few seconds of real ORT sessions."""
    caches = caches or cache_sizes()
    overhead = _overhead(ep).latency_ms
    node = (_chain(ep, 16, NODE_CHAIN).latency_ms - overhead) / (NODE_CHAIN - 1)
    if node < NODE_OVERHEAD_FLOOR_MS:
        log.warning("per-node overhead on %s measured %.6f ms (a loaded host?): using the floor %g ms", ep.name, node,
                    NODE_OVERHEAD_FLOOR_MS)
        node = NODE_OVERHEAD_FLOOR_MS
    gemm = _gemm(ep, gemm_size).latency_ms
    flops = 2.0 * gemm_size**3 / max(gemm - overhead, 1e-6) * 1e3
    working_sets = [(name, size, size // 2) for name, size in caches.items()]
    working_sets.append(("DRAM", 0, max(4 * caches["L3"], 64 << 20)))
    levels = []
    for name, capacity, ws in working_sets:
        elems = max(ws // 12, 256)  # three float buffers: two read, one written
        moved = 12 * elems
        k = int(np.clip(CHAIN_BYTES // moved, 2, 64))
        per_node_ms = max(_chain(ep, elems, k).latency_ms - overhead, 1e-6) / k
        levels.append(BandwidthLevel(name, capacity, moved, moved / per_node_ms * 1e3))
    peaks = HostPeaks(ep.name, flops, tuple(levels), overhead, time.time(), node)
    log.info("peaks on %s: %.1f GFLOP/s, bandwidth %s GB/s, %.4f ms per call, %.4f ms per node", ep.name, flops / 1e9,
             [round(v.bytes_per_s / 1e9, 1) for v in levels], overhead, node)
    return peaks


def peaks_rows(peaks: HostPeaks, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The store's `device_peaks` rows of the peaks (one per figure), with the measurement's metadata `meta`."""
    base = {**meta, "measured_at": peaks.measured_at}
    rows = [{**base, "metric": "gemm_flops_per_s", "value": peaks.gemm_flops_per_s},
            {**base, "metric": "call_overhead_ms", "value": peaks.call_overhead_ms},
            {**base, "metric": "node_overhead_ms", "value": peaks.node_overhead_ms}]
    rows += [{**base, "metric": f"bandwidth_{v.name}", "value": v.bytes_per_s, "capacity_bytes": v.capacity_bytes,
              "working_set_bytes": v.working_set_bytes} for v in peaks.levels]
    return rows


def peaks_from_rows(device: str, rows: Iterable[Mapping[Any, Any]]) -> HostPeaks | None:
    """The peaks the store's `device_peaks` rows of one device hold (None when there are none)."""
    by = {r["metric"]: r for r in rows if r.get("device") == device}
    if "gemm_flops_per_s" not in by or "call_overhead_ms" not in by:
        return None
    levels = sorted((r for m, r in by.items() if m.startswith("bandwidth_")),
                    key=lambda r: (int(r["capacity_bytes"] or 0) == 0, int(r["capacity_bytes"] or 0)))
    return HostPeaks(device, float(by["gemm_flops_per_s"]["value"]),
                     tuple(BandwidthLevel(str(r["metric"]).removeprefix("bandwidth_"), int(r["capacity_bytes"] or 0),
                                          int(r["working_set_bytes"] or 0), float(r["value"])) for r in levels),
                     float(by["call_overhead_ms"]["value"]), float(by["gemm_flops_per_s"]["measured_at"] or 0.0),
                     float(by["node_overhead_ms"]["value"]) if "node_overhead_ms" in by else 0.0)
