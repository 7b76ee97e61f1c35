"""Pipeline profiler overhead and memory: tracing on vs off throughput, and memory for 10,000 trace events.

Throughput: the same simulation pipeline (prep on ORT CPU -> embed data-parallel over ORT CPU + OpenVINO CPU ->
classify on OpenVINO CPU) runs in four modes: tracing off; trace events only; trace events + hardware time
sampled (the default: ORT profiler / OpenVINO PERF_COUNT on one batch in `hw_sample_every`, in blocks of
`hw_sample_block`); trace events + hardware time on every run (`hw_sample_every = 1`). The modes run
interleaved (one after the other, never two at once; the order rotates every repeat) and the report gives the
median throughput per mode, and the median and quartiles of the per-repeat overhead against tracing off
(paired, so slow drifts of background load cancel), with the machine's load average before and after.
Memory: each measurement runs in a fresh subprocess and reports the RSS growth over the streaming run, the
events kept, and the event-log bytes; 10,000 events, then 4x and 8x as many with max_events=10,000 and
hardware time on every run (the fastest way to reach ORT's profile budget), show where memory stops growing
(event log capped by max_events, ORT's profile by hw_profile_events).

Usage: python benchmarks/bench_pipeline.py [--repeats 15] [--batches 300] [--quick | --small] [--no-memory]
                                          [--extra 8:1:0,8:32:8] [--ov-only]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from hase.pipeline import PipelineSpec, run_pipeline, simulation_spec
from hase.pipeline.event_log import RECORD
from hase.pipeline.spec import DEFAULT_HW_SAMPLE_BLOCK, DEFAULT_HW_SAMPLE_EVERY, DEFAULT_HW_SAMPLE_WARMUP
from hase.runtime import sessions

EVENTS_PER_BATCH = 6  # prep 1 + embed (partition, 2 executors, merge) 4 + classify 1
DEFAULT_SAMPLING = (DEFAULT_HW_SAMPLE_EVERY, DEFAULT_HW_SAMPLE_BLOCK, DEFAULT_HW_SAMPLE_WARMUP)


def overhead_spec(batch: int, width: int, layers: int) -> PipelineSpec:
    return simulation_spec(batch=batch, width=width, layers=layers, dp_devices=("cpu", "ov:CPU"),
                           devices=("cpu", "ov:CPU"))


def modes(extra: list[tuple[int, int, int]], ov_only: bool = False) -> dict[str, dict]:
    """Mode name -> run_pipeline keywords plus `sampling` (hw_sample_every, _block, _warmup) for the hw modes.

    `ov_only` adds OpenVINO PERF_COUNT on every run with the ORT profiler off (hw_profile_events = 0).
    """
    out = {"off": {"trace": False}, "events": {"trace": True, "hardware": False}}
    for k, m, w in dict.fromkeys([DEFAULT_SAMPLING, *extra, (1, 1, 0)]):
        out[f"hw {k}:{m}:{w}"] = {"trace": True, "sampling": (k, m, w)}
    if ov_only:
        out["hw ov-only"] = {"trace": True, "sampling": (1, 1, 0), "hw_profile_events": 0}
    return out


def throughput(spec: PipelineSpec, batches: int, mode: dict) -> float:
    kw = dict(mode)
    sampling = kw.pop("sampling", None)
    if sampling is not None:
        k, m, w = sampling
        spec = dataclasses.replace(spec, hw_sample_every=k, hw_sample_block=m, hw_sample_warmup=w)
    if "hw_profile_events" in kw:
        spec = dataclasses.replace(spec, hw_profile_events=kw.pop("hw_profile_events"))
    return run_pipeline(spec, batches, **kw).throughput_per_s


def bench_overhead(repeats: int, batches: int, batch: int, width: int, layers: int,
                   extra: list[tuple[int, int, int]], ov_only: bool = False) -> dict:
    """Interleaved runs of every mode (order rotates each repeat); median throughput and paired overhead per mode."""
    spec = overhead_spec(batch, width, layers)
    all_modes = modes(extra, ov_only)
    throughput(spec, max(20, batches // 10), all_modes["hw 1:1:0"])  # warm caches, thread pools, OpenVINO plugin
    runs: dict[str, list[float]] = {m: [] for m in all_modes}
    order = list(all_modes)
    load = [os.getloadavg()[0]]
    for r in range(repeats):
        for mode in order[r % len(order):] + order[: r % len(order)]:
            runs[mode].append(throughput(spec, batches, all_modes[mode]))
    load.append(os.getloadavg()[0])
    paired = {m: [(off - x) / off * 100 for off, x in zip(runs["off"], v, strict=True)]
              for m, v in runs.items() if m != "off"}
    return {"batches": batches, "repeats": repeats, "runs": runs, "load": load,
            "median_per_s": {m: statistics.median(v) for m, v in runs.items()},
            "paired_pct": {m: (statistics.median(v), *statistics.quantiles(v, n=4)[::2]) for m, v in paired.items()}}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_child(events: int, max_events: int, sample_every: int) -> dict:
    """(In a fresh process) stream enough batches for `events` trace events and report RSS growth."""
    base = overhead_spec(8, 64, 1)
    spec = PipelineSpec(stages=base.stages, name="memory", batch=8, features=64, max_events=max_events,
                        hw_sample_every=sample_every)
    run_pipeline(spec, 10)  # load libraries, plugins and thread pools before the baseline
    before = _rss_bytes()
    t0 = time.perf_counter()
    run = run_pipeline(spec, events // EVENTS_PER_BATCH)
    after = _rss_bytes()
    return {"events_requested": events, "max_events": max_events, "hw_sample_every": sample_every,
            "events_kept": len(run.events),
            "dropped": run.dropped_events, "rss_growth_mb": (after - before) / 1e6,
            "event_log_mb": len(run.events) * RECORD.itemsize / 1e6, "seconds": time.perf_counter() - t0}


def bench_memory(cases: list[tuple[int, int, int]]) -> list[dict]:
    out = []
    for events, cap, k in cases:
        proc = subprocess.run([sys.executable, __file__, "--memory-child", str(events), str(cap), str(k)],
                              capture_output=True, text=True, check=True)
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def device_lines() -> list[str]:
    import onnxruntime
    import openvino

    return [f"cpu: {sessions.cpu_model()} ({os.cpu_count()} logical cores), {platform.platform()}",
            f"onnxruntime {onnxruntime.__version__} (CPU EP, 1 intra-op thread per executor), "
            f"openvino {openvino.__version__} (CPU, INFERENCE_NUM_THREADS=1), python {platform.python_version()}"]


SIZES = ((16, 512, 3), (32, 1024, 3))  # (rows per batch, width, layers): small kernels, then larger ones


def label(mode: str) -> str:
    if mode == "off":
        return "tracing off"
    if mode == "events":
        return "trace events, no HW profiling"
    if mode == "hw ov-only":
        return "events + OpenVINO HW every run, ORT off"
    k, m, w = (int(v) for v in mode.split()[1].split(":"))
    if k == 1:
        return "events + HW, every run"
    tag = " (default)" if (k, m, w) == DEFAULT_SAMPLING else ""
    return f"events + HW, 1 in {k}, blocks {m}, warm-up {w}{tag}"


def report_overhead(repeats: int, batches: int, size: tuple[int, int, int], extra: list[tuple[int, int, int]],
                    ov_only: bool = False) -> None:
    batch, width, layers = size
    o = bench_overhead(repeats, batches, batch, width, layers, extra, ov_only)
    print(f"\npipeline: simulation, batch {batch}, width {width}, layers {layers} (embed x2), "
          f"{o['batches']} batches x {o['repeats']} interleaved repeats; load average "
          f"{o['load'][0]:.2f} before, {o['load'][1]:.2f} after")
    for mode, runs in o["runs"].items():
        print(f"  {label(mode):<52}: median {o['median_per_s'][mode]:7.1f} batches/s "
              f"(min {min(runs):6.1f}, max {max(runs):6.1f})")
    for mode, (med, q1, q3) in o["paired_pct"].items():
        print(f"  overhead vs off, {label(mode):<52}: {med:+6.2f} % of throughput "
              f"(paired repeats, quartiles {q1:+.1f} .. {q3:+.1f}; target < 5 %)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="3 repeats of 100 batches, small pipeline only")
    ap.add_argument("--extra", default="", help="more sampling settings to compare, EVERY:BLOCK:WARMUP,... "
                                                "e.g. 8:1:0 (every 8th batch, no blocks)")
    ap.add_argument("--ov-only", action="store_true",
                    help="add a mode with OpenVINO PERF_COUNT on every run and the ORT profiler off")
    ap.add_argument("--small", action="store_true", help="the small-kernel pipeline only")
    ap.add_argument("--no-memory", action="store_true", help="skip the memory measurements")
    ap.add_argument("--memory-child", nargs=3, type=int, metavar=("EVENTS", "MAX_EVENTS", "K"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        print(json.dumps(memory_child(*args.memory_child)))
        return 0
    sizes = SIZES[:1] if args.quick or args.small else SIZES
    if args.quick:
        args.repeats, args.batches = 3, 100
    for line in device_lines():
        print(line)
    extra = [tuple(int(v) for v in e.split(":")) for e in args.extra.split(",") if e.strip()]
    for size in sizes:
        report_overhead(args.repeats, args.batches, size, extra, args.ov_only)
    if args.no_memory:
        return 0
    print("\nmemory (fresh process each; RSS growth over the streaming run):")
    cases = [(10_000, 1_000_000, DEFAULT_HW_SAMPLE_EVERY), (10_000, 1_000_000, 1), (40_000, 10_000, 1),
             (80_000, 10_000, 1)]  # sampling with the default block / warm-up, or every run
    for m in bench_memory(cases):
        print(f"  {m['events_requested']:>6} events requested, max_events {m['max_events']:>9}, "
              f"hw_sample_every {m['hw_sample_every']:>2}: kept "
              f"{m['events_kept']:>6} (dropped {m['dropped']:>5}), event log {m['event_log_mb']:.2f} MB, "
              f"RSS growth {m['rss_growth_mb']:+.1f} MB, {m['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
