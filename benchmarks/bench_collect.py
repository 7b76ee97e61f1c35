"""Benchmark of `collect` on a zoo config: throughput, time share in timed runs, dedupe ratio, peak memory.

Runs a fresh collect into a temporary store (never the project's data/hase.sqlite) and prints figures
with the device metadata. Usage: python benchmarks/bench_collect.py [--zoo configs/zoo_small.toml]
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from figures import print_figures

from hase import paths
from hase.measure import collect as coll
from hase.measure.store import Store
from hase.runtime import sessions
from hase.sampler.config import read_zoo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--zoo", default=paths.ZOO_CONFIG)
    ap.add_argument("--devices", default=paths.DEVICES_CONFIG)
    ap.add_argument("--zoo-dir", default=paths.ZOO_DIR)
    ap.add_argument("--limit", type=int, default=None, help="only the first N models")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cfg = coll.load_collect_config(args.devices)
    # Build the zoo first so model generation is not counted as collect time.
    t0 = time.perf_counter()
    sources = list(coll.zoo_sources(read_zoo(args.zoo), args.zoo_dir))[: args.limit]
    build_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "bench.sqlite") as store:
        report = coll.collect(sources, cfg, store)
        counts = store.counts()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = {
        "models": len(sources),
        "zoo_build_s": round(build_s, 1),
        "collect_wall_s": round(report.wall_s, 1),
        "unique_kernels_measured": report.kernels_measured,
        "unique_kernels_per_min": round(report.kernels_measured / report.wall_s * 60, 1),
        "share_in_timed_runs": round(report.timed_s / report.wall_s, 3),
        "node_occurrences": report.node_occurrences,
        "dedupe_ratio": round(report.node_occurrences / max(counts["kernels"], 1), 2),
        "skips": counts["skips"],
        "peak_rss_mb": round(peak_mb, 1),
        **sessions.device_metadata(cfg.devices[0]),
    }
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
