"""Pipeline profiler overhead and memory: tracing on vs off throughput, and memory for 10,000 trace events.

Throughput: the same simulation pipeline (prep on ORT CPU -> embed data-parallel over ORT CPU + OpenVINO CPU ->
classify on OpenVINO CPU) runs with tracing off, with trace events only, and with trace events plus backend
hardware profiling (ORT profiler + OpenVINO PERF_COUNT, the default), interleaved (the order rotates every
repeat, never two runs at once); medians are reported.
Memory: each measurement runs in a fresh subprocess and reports the RSS growth over the streaming run, the
events kept, and the event-log bytes; 10,000 events, then 4x and 8x as many with max_events=10,000, show
where memory stops growing (event log capped by max_events, ORT's profile by hw_profile_events).

Usage: python benchmarks/bench_pipeline.py [--repeats 9] [--batches 300] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from hase import runtime
from hase.pipeline import PipelineSpec, run_pipeline, simulation_spec
from hase.pipeline.events import RECORD

EVENTS_PER_BATCH = 6  # prep 1 + embed (partition, 2 executors, merge) 4 + classify 1


def overhead_spec(batch: int, width: int, layers: int) -> PipelineSpec:
    return simulation_spec(batch=batch, width=width, layers=layers, dp_devices=("cpu", "ov:CPU"),
                           devices=("cpu", "ov:CPU"))


MODES = {"off": dict(trace=False), "events": dict(trace=True, hardware=False), "events+hw": dict(trace=True)}


def throughput(spec: PipelineSpec, batches: int, mode: str) -> float:
    return run_pipeline(spec, batches, **MODES[mode]).throughput_per_s


def bench_overhead(repeats: int, batches: int, batch: int, width: int, layers: int) -> dict:
    """Interleaved runs of every mode (order rotates each repeat); median throughput per mode."""
    spec = overhead_spec(batch, width, layers)
    throughput(spec, max(20, batches // 10), "events+hw")  # warm caches, thread pools, OpenVINO plugin load
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    order = list(MODES)
    for r in range(repeats):
        for mode in order[r % len(order):] + order[: r % len(order)]:
            runs[mode].append(throughput(spec, batches, mode))
    med = {m: statistics.median(v) for m, v in runs.items()}
    return {"batches": batches, "repeats": repeats, "runs": runs, "median_per_s": med,
            "overhead_pct": {m: (med["off"] - med[m]) / med["off"] * 100 for m in MODES if m != "off"}}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_child(events: int, max_events: int) -> dict:
    """(In a fresh process) stream enough batches for `events` trace events and report RSS growth."""
    base = overhead_spec(8, 64, 1)
    spec = PipelineSpec(stages=base.stages, name="memory", batch=8, features=64, max_events=max_events)
    run_pipeline(spec, 10)  # load libraries, plugins and thread pools before the baseline
    before = _rss_bytes()
    t0 = time.perf_counter()
    run = run_pipeline(spec, events // EVENTS_PER_BATCH)
    after = _rss_bytes()
    return {"events_requested": events, "max_events": max_events, "events_kept": len(run.events),
            "dropped": run.dropped_events, "rss_growth_mb": (after - before) / 1e6,
            "event_log_mb": len(run.events) * RECORD.itemsize / 1e6, "seconds": time.perf_counter() - t0}


def bench_memory(cases: list[tuple[int, int]]) -> list[dict]:
    out = []
    for events, cap in cases:
        proc = subprocess.run([sys.executable, __file__, "--memory-child", str(events), str(cap)],
                              capture_output=True, text=True, check=True)
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def device_lines() -> list[str]:
    import onnxruntime
    import openvino

    return [f"cpu: {runtime.cpu_model()} ({os.cpu_count()} logical cores), {platform.platform()}",
            f"onnxruntime {onnxruntime.__version__} (CPU EP, 1 intra-op thread per executor), "
            f"openvino {openvino.__version__} (CPU, INFERENCE_NUM_THREADS=1), python {platform.python_version()}"]


LABELS = {"off": "tracing off", "events": "trace events, no HW profiling",
          "events+hw": "trace events + HW profiling (default)"}
SIZES = ((16, 512, 3), (32, 1024, 3))  # (rows per batch, width, layers): small kernels, then larger ones


def report_overhead(repeats: int, batches: int, size: tuple[int, int, int]) -> None:
    batch, width, layers = size
    o = bench_overhead(repeats, batches, batch, width, layers)
    print(f"\npipeline: simulation, batch {batch}, width {width}, layers {layers} (embed x2), "
          f"{o['batches']} batches x {o['repeats']} interleaved repeats")
    for mode, label in LABELS.items():
        print(f"  {label:<38}: median {o['median_per_s'][mode]:7.1f} batches/s  "
              f"runs {[round(x, 1) for x in o['runs'][mode]]}")
    for mode in ("events", "events+hw"):
        print(f"  overhead vs off, {LABELS[mode]:<38}: {o['overhead_pct'][mode]:+.2f} % of throughput "
              f"(target < 5 %)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="3 repeats of 100 batches, small pipeline only")
    ap.add_argument("--memory-child", nargs=2, type=int, metavar=("EVENTS", "MAX_EVENTS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        print(json.dumps(memory_child(*args.memory_child)))
        return 0
    sizes = SIZES[:1] if args.quick else SIZES
    if args.quick:
        args.repeats, args.batches = 3, 100
    for line in device_lines():
        print(line)
    for size in sizes:
        report_overhead(args.repeats, args.batches, size)
    print("\nmemory (fresh process each; RSS growth over the streaming run):")
    for m in bench_memory([(10_000, 1_000_000), (40_000, 10_000), (80_000, 10_000)]):
        print(f"  {m['events_requested']:>6} events requested, max_events {m['max_events']:>9}: kept "
              f"{m['events_kept']:>6} (dropped {m['dropped']:>5}), event log {m['event_log_mb']:.2f} MB, "
              f"RSS growth {m['rss_growth_mb']:+.1f} MB, {m['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
