"""Benchmark of Hase's defences against a noisy host: the canary's cost in collect, and quiet vs loaded figures.

1. A fresh collect of the first `--limit` zoo models (temporary store) with the shipped settings: wall time,
   canary checks, seconds timing the canary and its share of the wall time, jobs flagged host_busy.
2. One model (`--model`) and the canary on one pinned core, three ways: quiet; with a busy-loop process pinned
   to the same core for the whole measurement (steady load: every block slows, the canary sees it); and with
   the busy loop running only for the first `--burst-s` seconds (a burst: the robust latency, the quietest
   block's median, stays near quiet while the median of all runs does not).

Usage: python benchmarks/bench_noise.py [--limit 8] [--model tests/data/models/timm_semnasnet_050_cls10_b1.onnx]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from figures import print_figures

from hase import paths
from hase.measure import collect as coll
from hase.measure.canary import Canary, canary_timer
from hase.measure.model import measure_latency
from hase.measure.store import Store
from hase.runtime import sessions
from hase.runtime.robust import BlockPolicy
from hase.runtime.types import TimingPolicy
from hase.sampler.config import read_zoo

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "tests" / "data" / "models" / "timm_semnasnet_050_cls10_b1.onnx"


@contextlib.contextmanager
def busy_loop(core: int, seconds: float | None) -> Iterator[None]:
    """A process spinning on `core` (for `seconds`, or until the block ends)."""
    end = f"time.perf_counter() < {time.perf_counter() + seconds!r}" if seconds else "True"
    code = f"import os, time\nos.sched_setaffinity(0, {{{core}}})\nwhile {end}: pass"
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(0.5)  # let it start spinning
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def collect_cost(args: argparse.Namespace) -> dict[str, Any]:
    cfg = coll.load_collect_config(args.devices)
    sources = list(coll.zoo_sources(read_zoo(args.zoo), args.zoo_dir))[: args.limit]
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "bench.sqlite") as store:
        report = coll.collect(sources, cfg, store)
    return {"collect_models": len(sources), "collect_wall_s": round(report.wall_s, 1),
            "canary_checks": report.canary_checks, "canary_timing_s": round(report.canary_s, 2),
            "canary_wait_s": round(report.canary_wait_s, 1),
            "canary_share_of_wall": round(report.canary_s / report.wall_s, 4),
            "jobs_host_busy": len(report.busy_jobs), "models_noisy": len(report.noisy_models)}


def quiet_vs_loaded(args: argparse.Namespace) -> dict[str, Any]:
    cfg = coll.load_collect_config(args.devices)
    ep, settings = cfg.devices[0], cfg.settings
    core = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    canary = Canary(canary_timer(ep, settings.canary), settings.canary)
    policy = BlockPolicy(warmup=settings.model.warmup, blocks=args.blocks, noise_bound=settings.noise_bound,
                         block=TimingPolicy(warmup=0, min_runs=10, max_runs=1000, min_time_s=args.block_s,
                                            max_time_s=args.block_s * 3))
    out: dict[str, Any] = {"pinned_core": core, "model": Path(args.model).name, "blocks": args.blocks}
    for label, load in (("quiet", None), ("steady_load", 0.0), ("burst_load", args.burst_s)):
        cm = busy_loop(core, load or None) if load is not None else contextlib.nullcontext()
        with cm:
            check = canary.check()
            t = measure_latency(args.model, ep, policy=policy)
        out.update({f"{label}_canary_ratio": round(check.ratio, 2), f"{label}_latency_ms": round(t.latency_ms, 3),
                    f"{label}_median_ms": round(t.median_ms, 3), f"{label}_spread": round(t.spread, 3),
                    f"{label}_noisy": t.noisy})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", default=paths.ZOO_CONFIG)
    ap.add_argument("--zoo-dir", default=paths.ZOO_DIR)
    ap.add_argument("--devices", default=paths.DEVICES_CONFIG)
    ap.add_argument("--limit", type=int, default=8, help="zoo models in the collect-cost run (0: skip it)")
    ap.add_argument("--model", default=str(DEFAULT_MODEL), help="the model timed quiet and under load")
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--block-s", type=float, default=0.3, help="minimum seconds per block")
    ap.add_argument("--burst-s", type=float, default=1.6, help="how long the burst of load lasts")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not hasattr(os, "sched_setaffinity"):
        print("os.sched_setaffinity is not available: this benchmark needs Linux", file=sys.stderr)
        return 1
    figures = collect_cost(args) if args.limit else {}
    figures.update(quiet_vs_loaded(args))
    figures.update(sessions.device_metadata(coll.load_collect_config(args.devices).devices[0]))
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
