"""Benchmark of `collect --cluster`: per-job dispatch overhead, and a 2-worker local Ray cluster vs a local collect.

On this machine: a local collect of the first N zoo models into one temporary store, then a local Ray cluster (a
head that runs nothing and `--workers` nodes of one CPU each, all offering the device config) collecting the same
models into another; then bare Ray tasks with the options a measuring job gets (pinned to a node, all its CPUs):
their round trip one at a time, and their cost per task when queued two deep, as the fleet queues jobs. Every
node shares this machine's cores with the driver (which splits the models meanwhile): on a 2-core VM the fleet
cannot be faster than the cores allow, and another tenant's load moves both figures. Never touches
data/hase.sqlite.

Usage: python benchmarks/bench_fleet.py [--zoo configs/zoo_small.toml] [--limit 12] [--device cpu-1t] [--workers 2]
                                       [--canary-wait 0]
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from figures import print_figures

from hase import paths
from hase.measure import collect as coll
from hase.measure import fleet, placement
from hase.measure.store import Store
from hase.runtime import sessions
from hase.sampler.config import read_zoo


def _jobs(store: Store) -> int:
    return store.counts()["jobs"]


def _noop() -> int:
    return 0


def bare_dispatch(ray: Any, workers: list[placement.Worker], ep: Any, n: int) -> dict[str, float]:
    """Round trip of an empty task with a measuring job's options, one at a time; and per task, two deep."""
    remote = ray.remote(_noop)
    opts = workers[0].options(ray, ep)
    ray.get(remote.options(**opts).remote())  # a worker process started
    t0 = time.perf_counter()
    for _ in range(n):
        ray.get(remote.options(**opts).remote())
    serial_ms = (time.perf_counter() - t0) / n * 1e3
    t0 = time.perf_counter()
    pending = [remote.options(**opts).remote() for _ in range(2)]
    for _ in range(n - 2):
        done, pending = ray.wait(pending, num_returns=1)
        ray.get(done)
        pending.append(remote.options(**opts).remote())
    ray.get(pending)
    return {"empty_task_round_trip_ms": round(serial_ms, 2),
            "empty_task_per_task_two_deep_ms": round((time.perf_counter() - t0) / n * 1e3, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--zoo", default=paths.ZOO_CONFIG)
    ap.add_argument("--zoo-dir", default=paths.ZOO_DIR)
    ap.add_argument("--devices", default=paths.DEVICES_CONFIG)
    ap.add_argument("--device", default="cpu-1t", help="the device config both collects measure")
    ap.add_argument("--limit", type=int, default=12, help="the first N models of the zoo")
    ap.add_argument("--workers", type=int, default=2, help="worker nodes of the local cluster (one CPU each)")
    ap.add_argument("--tasks", type=int, default=200, help="empty tasks timed for the bare dispatch figures")
    ap.add_argument("--canary-wait", type=float, default=None, metavar="S",
                    help="seconds the canary waits for a busy host before it retries (default: the config's); "
                         "0 compares the two collects without those waits")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ray = fleet.import_ray()
    from ray.cluster_utils import Cluster

    cfg = coll.load_collect_config(args.devices, [args.device])
    if args.canary_wait is not None:
        canary = dataclasses.replace(cfg.settings.canary, wait_s=args.canary_wait)
        cfg = coll.CollectConfig(cfg.devices, dataclasses.replace(cfg.settings, canary=canary))
    sources = list(coll.zoo_sources(read_zoo(args.zoo), args.zoo_dir))[: args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "local.sqlite") as store:
            local = coll.collect(sources, cfg, store)
            local_jobs = _jobs(store)
        res = {"object_store_memory": 200 << 20}
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **res})
        try:
            for _ in range(args.workers):
                cluster.add_node(num_cpus=1, resources={placement.device_resource(args.device): 1}, **res)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
            with Store(Path(tmp) / "fleet.sqlite") as store:
                remote = fleet.collect_fleet(sources, cfg, store)
                fleet_jobs = _jobs(store)
            workers = [w for w in placement.live_workers(ray, cfg.devices) if w.devices]
            bare = bare_dispatch(ray, workers, cfg.devices[0], args.tasks)
        finally:
            ray.shutdown()
            cluster.shutdown()
    gaps, back = remote.dispatch_gaps_s, remote.return_s
    figures = {
        "models": len(sources),
        "jobs_local": local_jobs,
        "jobs_fleet": fleet_jobs,
        "local_wall_s": round(local.wall_s, 1),
        "local_jobs_per_min": round(local_jobs / local.wall_s * 60, 1),
        "fleet_workers": args.workers,
        "fleet_wall_s": round(remote.wall_s, 1),
        "fleet_jobs_per_min": round(fleet_jobs / remote.wall_s * 60, 1),
        "fleet_over_local_throughput": round(local.wall_s / remote.wall_s, 2),
        "fleet_worker_busy_share": round(sum(w.busy_s for w in remote.workers.values())
                                         / (args.workers * remote.wall_s), 3),
        "dispatch_gap_median_ms": round(statistics.median(gaps) * 1e3, 2) if gaps else None,
        "dispatch_gap_p90_ms": round(sorted(gaps)[int(0.9 * (len(gaps) - 1))] * 1e3, 2) if gaps else None,
        "result_return_median_ms": round(statistics.median(back) * 1e3, 2) if back else None,
        **bare,
        "canary_wait_s_local_fleet": f"{local.canary_wait_s:.1f} / {remote.canary_wait_s:.1f}",
        "ray_version": ray.__version__,
        **sessions.device_metadata(cfg.devices[0]),
    }
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
