"""`hase collect`: build the zoo, split every model, measure kernels and full models into the store.

Progress: on a terminal, bars (models, and the current model's kernels) on the console the log handler
shares, so warnings print above the bars; elsewhere (a log file, CI) one log line per model with its
number, the total and the elapsed time.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import statistics
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from hase import paths
from hase.commands.common import (
    add_device_arg,
    add_ep_arg,
    add_store_arg,
    add_threads_arg,
    plural,
    stderr_console,
    stdout_console,
    titled_table,
)
from hase.errors import HaseError
from hase.measure import collect as coll
from hase.measure import fleet
from hase.measure.progress import (
    CollectEvent,
    JobDispatched,
    JobFinished,
    KernelStarted,
    ModelStarted,
    OnProgress,
    WorkersReady,
)
from hase.measure.store import Store
from hase.runtime import sessions
from hase.runtime.types import EPConfig
from hase.sampler.active import store_order
from hase.sampler.config import read_zoo
from hase.zoo.order import coverage_order
from hase.zoo.registry import ModelSpec

log = logging.getLogger(__name__)

def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `collect` subcommand."""
    p = sub.add_parser("collect", help="measure zoo models and their kernels into the store (resumable)",
                       description="Build the model zoo, split each model into ORT kernels, measure every unique "
                                   "kernel standalone (warm and cold-weights), profile every full model, and store "
                                   "it all. Interrupt at any time; rerun to resume. A model that fails is recorded "
                                   "as a skip and the run goes on; a second collect on the same store waits for "
                                   "the first, then reuses what it measured.")
    p.add_argument("--zoo", default=paths.ZOO_CONFIG, help="zoo config (TOML); 'none' to skip the zoo")
    p.add_argument("--zoo-dir", default=paths.ZOO_DIR, help="where generated zoo models are written")
    p.add_argument("--models-dir", action="append", default=[], metavar="DIR",
                   help="also collect every .onnx in DIR (family 'exported'); repeatable")
    p.add_argument("--model", action="append", default=[], metavar="PATH", help="also collect this model; repeatable")
    p.add_argument("--devices", default=paths.DEVICES_CONFIG, help="device configurations and timing settings")
    add_device_arg(p, "only this device config (repeatable)", repeatable=True)
    add_ep_arg(p, default=None, help="measure on this execution provider only (device name '<ep>-<threads>t'), "
                                     "with the timing settings of --devices; CUDA where unavailable is an error")
    add_threads_arg(p, help="intra-op threads with --ep (default 1)")
    add_store_arg(p)
    p.add_argument("--limit", type=int, default=None, help="collect at most N models (for a quick look)")
    p.add_argument("--budget-s", type=float, default=None, metavar="SECONDS",
                   help="stop handing out jobs after this many seconds (the job under way finishes; rerun to go on): "
                        "with --spans-only and the zoo's coverage order, a new host's first predictor in minutes")
    p.add_argument("--spans-only", action="store_true",
                   help="measure full models only (their profiled node spans: the `span` target `hase train` ships); "
                        "skip the standalone kernel timings (warm, cold)")
    p.add_argument("--order", choices=["coverage", "active", "config"], default="coverage",
                   help="the zoo's order: 'coverage' (default) architectures one family at a time in turn, then "
                        "sampled blocks likewise, so a run cut short holds every family; 'active': architectures, "
                        "then the blocks of the ops real graphs spend most time in and a surrogate forest is least "
                        "sure of, chosen as the run goes (one --device); 'config': the file's")
    p.add_argument("--retry-skips", action="store_true",
                   help="try every job recorded as skipped again (a skip under other settings is retried anyway)")
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="measure on the nodes of a Ray cluster: 'auto' (a cluster running on this machine), "
                        "HOST:PORT or ray://HOST:PORT; this process splits the models and writes the store "
                        "(needs `pip install hase[ray]`; see docs/fleet.md)")
    p.add_argument("--max-retries", type=int, default=2, metavar="N",
                   help="with --cluster: hand a job whose worker died to another worker up to N times, then "
                        "record it as a skip (default 2)")
    p.set_defaults(func=run)


def gather_sources(args: argparse.Namespace, device: str | None = None) -> tuple[Iterator[coll.ModelSource], int]:
    """The models to collect, lazily for the zoo, and how many there are (for the ETA). The active order chooses
    from what `args.store` holds for `device` as the run goes."""
    chains: list[Iterable[coll.ModelSource]] = []
    total = 0
    if args.zoo and args.zoo != "none":
        config = read_zoo(paths.config_file(args.zoo, paths.ZOO_CONFIG))
        specs: Iterable[ModelSpec] | None = None
        if args.order == "coverage":
            config = dataclasses.replace(config, specs=tuple(coverage_order(config.specs)))
        elif args.order == "active":
            if device is None:
                raise HaseError("--order active needs the one device it chooses for: give --device NAME")
            specs = store_order(config.specs, args.store, device)
        total += len(config.specs)
        chains.append(coll.zoo_sources(config, args.zoo_dir, specs))
    for d in args.models_dir:
        srcs = coll.dir_sources(d)
        total += len(srcs)
        chains.append(srcs)
    for m in args.model:
        path = Path(m)
        if not path.is_file():
            raise HaseError(f"--model {path}: no such file")
        chains.append([coll.ModelSource(path.stem, "user", path)])
        total += 1
    sources: Iterator[coll.ModelSource] = itertools.chain.from_iterable(chains)
    if args.limit is not None:
        sources = itertools.islice(sources, args.limit)
        total = min(total, args.limit)
    return sources, total


def checked_config(args: argparse.Namespace) -> coll.CollectConfig:
    """The device configs and settings to collect with, every value and option checked before the store is opened."""
    if args.limit is not None and args.limit < 0:
        raise HaseError(f"--limit {args.limit} is out of range: give a number of models, 0 or more")
    if args.budget_s is not None and not args.budget_s > 0:
        raise HaseError(f"--budget-s {args.budget_s:g} is out of range: give a number of seconds above 0")
    cfg = coll.load_collect_config(paths.config_file(args.devices, paths.DEVICES_CONFIG), args.device)
    if args.ep:
        if not 0 <= args.threads <= 1024:
            raise HaseError(f"--threads {args.threads} is out of range: use 0 (ONNX Runtime chooses) to 1024")
        ep = EPConfig(name=f"{args.ep}-{args.threads}t", ep=args.ep, intra_op_threads=args.threads)
        cfg = coll.CollectConfig((ep,), cfg.settings)
    for ep in cfg.devices:
        sessions.check_provider(ep)
    return cfg


def run(args: argparse.Namespace) -> int:
    """Measure every source on every device configuration into the store, with progress bars and a summary."""
    if args.cluster is not None:
        return run_cluster(args)
    cfg = checked_config(args)
    if args.order == "active" and len(cfg.devices) != 1:
        raise HaseError(f"--order active chooses from one device's measurements, and {len(cfg.devices)} are "
                        f"selected: give one --device NAME (e.g. --device {cfg.devices[0].name})")
    sources, total = gather_sources(args, cfg.devices[0].name)
    console = stderr_console()
    with Store(args.store) as store:
        with collect_progress(console, total * len(cfg.devices)) as on_event:
            report = coll.collect(sources, cfg, store, on_event, retry_skips=args.retry_skips,
                                  budget_s=args.budget_s, spans_only=args.spans_only)
        counts = store.counts()
    print_summary(report, counts, args.store)
    return 0


def run_cluster(args: argparse.Namespace) -> int:
    """`collect --cluster`: the same jobs measured on a Ray cluster's nodes; Ray and the cluster are checked
    before the store is opened."""

    if args.budget_s is not None or args.spans_only:
        raise HaseError("--budget-s and --spans-only are for a collect on this host: drop them or --cluster")
    if args.order == "active":
        raise HaseError("--order active chooses from what a collect on this host measures: use --order coverage "
                        "with --cluster")
    ray = fleet.import_ray()
    if args.max_retries < 0:
        raise HaseError(f"--max-retries {args.max_retries} is out of range: give 0 or more")
    cfg = checked_config(args)
    sources, total = gather_sources(args)
    console = stderr_console()
    with fleet.connected(ray, args.cluster), Store(args.store) as store:
        with fleet_progress(console, total * len(cfg.devices)) as on_event:
            report = fleet.collect_fleet(sources, cfg, store, on_event, address=args.cluster,
                                         retry_skips=args.retry_skips, max_retries=args.max_retries)
        counts = store.counts()
    print_summary(report, counts, args.store)
    print_workers(report)
    return 0


@contextmanager
def collect_progress(console: Console, total: int) -> Iterator[OnProgress]:
    """The progress callback of `collect`: bars on a terminal (on `console`, which the log handler shares),
    else one INFO line per model: `collect model 3/95 on cpu-1t: resnet18_w0.5 [84 s]`."""
    if not console.is_terminal:
        t0, seen = time.perf_counter(), itertools.count(1)

        def log_model(event: CollectEvent) -> None:
            if isinstance(event, ModelStarted):
                log.info("collect model %d/%d on %s: %s [%.0f s]", next(seen), total, event.device, event.model,
                         time.perf_counter() - t0)

        yield log_model
        return
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("models", total=total)
        ktask = bar.add_task("kernels", total=None)
        started = False

        def on_event(event: CollectEvent) -> None:
            nonlocal started
            if isinstance(event, ModelStarted):
                if started:
                    bar.advance(task)
                started = True
                bar.update(task, description=f"models \\[{escape(event.device)}] {escape(event.model)}")
            elif isinstance(event, KernelStarted):
                bar.update(ktask, total=event.total, completed=event.index + 1,
                           description=f"kernels {escape(event.op_type)}")

        yield on_event
        bar.update(task, completed=total)


@contextmanager
def fleet_progress(console: Console, models: int) -> Iterator[OnProgress]:
    """The progress callback of `collect --cluster`: on a terminal, bars for the models split, the jobs done out
    of the jobs expected (the jobs of the models split so far, scaled to all models) with the ETA, and one per
    worker with its current job; elsewhere one INFO line per model and one every 50 jobs."""
    t0, seen = time.perf_counter(), [0]

    def expected(event: JobFinished) -> int:
        known = event.known
        return known if seen[0] >= models else max(known, round(known * models / max(seen[0], 1)))

    if not console.is_terminal:
        def log_event(event: CollectEvent) -> None:
            if isinstance(event, ModelStarted):
                seen[0] += 1
                log.info("collect model %d/%d on %s: %s [%.0f s]", seen[0], models, event.device, event.model,
                         time.perf_counter() - t0)
            elif isinstance(event, JobFinished) and event.done % 50 == 0:
                log.info("collect jobs %d/~%d done [%.0f s]", event.done, expected(event), time.perf_counter() - t0)

        yield log_event
        return
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=False) as bar:
        split_task = bar.add_task("models split", total=models)
        jobs_task = bar.add_task("jobs", total=None)
        per_worker: dict[str, Any] = {}

        def on_event(event: CollectEvent) -> None:
            if isinstance(event, ModelStarted):
                seen[0] += 1
                bar.update(split_task, completed=seen[0] - 1,
                           description=f"models split \\[{escape(event.device)}] {escape(event.model)}")
            elif isinstance(event, WorkersReady):
                for label, devices in event.workers:
                    per_worker[label] = bar.add_task(f"  {escape(label)} \\[{escape(', '.join(devices))}]", total=None)
            elif isinstance(event, JobDispatched):
                where = f"\\[{escape(event.device)}] {escape(event.target)}"
                bar.update(per_worker[event.worker], description=f"  {escape(event.worker)}: {where}")
            elif isinstance(event, JobFinished):
                bar.advance(per_worker[event.worker])
                bar.update(jobs_task, completed=event.done, total=expected(event))

        yield on_event
        bar.update(split_task, completed=models)


def print_workers(report: coll.CollectReport) -> None:
    """A fleet run's summary per worker, then its dispatch figures and the jobs lost or refused."""
    table = titled_table("per worker")
    for col in ("worker", "device configs", "done", "skipped", "lost", "refused", "measuring (s)", "share of wall"):
        table.add_column(col, justify="left" if col in ("worker", "device configs") else "right")
    for label, w in report.workers.items():
        share = w.busy_s / report.wall_s if report.wall_s else 0.0
        table.add_row(escape(label), escape(", ".join(w.devices)), str(w.jobs_done), str(w.jobs_skipped),
                      str(w.jobs_lost), str(w.jobs_refused), f"{w.busy_s:.1f}", f"{share:.0%}")
    console = stdout_console()
    console.print(table)
    if report.dispatch_gaps_s:
        console.print(f"dispatch: a worker waited {statistics.median(report.dispatch_gaps_s) * 1e3:.1f} ms "
                      f"(median of {len(report.dispatch_gaps_s)}) between two jobs; results took "
                      f"{statistics.median(report.return_s) * 1e3:.1f} ms to reach the driver")
    for target, worker, why in report.retried[:20]:
        console.print(f"[yellow]lost[/] {escape(target)} on {escape(worker)}: {escape(why)}")
    for target, worker, why in report.refused[:20]:
        console.print(f"[yellow]refused[/] {escape(target)} from {escape(worker)}: {escape(why)}")


def print_summary(report: coll.CollectReport, counts: dict[str, int], store_path: str) -> None:
    """The run's figures and the store's totals as a table, then the first skipped targets."""
    table = titled_table(f"collect finished -> {escape(str(store_path))}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    share = report.timed_s / report.wall_s if report.wall_s else 0.0
    rows = [
        ("models measured this run", report.models_done),
        ("models skipped this run", report.models_skipped),
        ("kernels measured this run", report.kernels_measured),
        ("kernels measured per minute",
         f"{report.kernels_measured / report.wall_s * 60:.0f}" if report.wall_s else "-"),
        ("kernels already measured (reused)", report.kernels_reused),
        ("wall time (s)", f"{report.wall_s:.1f}"),
        ("share of wall time in timed runs", f"{share:.0%}"),
        ("store: models / kernels / kernel rows / model rows",
         " / ".join(str(counts[k]) for k in ("models", "kernels", "kernel_measurements", "model_measurements"))),
        ("store: skips", counts["skips"]),
        *([("budget", f"{report.budget_s:.0f} s, " + ("spent: rerun to go on" if report.out_of_budget
                                                        else "not reached: everything was measured"))]
          if report.budget_s is not None else []),
        *noise_rows(report),
    ]
    for k, v in rows:
        table.add_row(k, str(v))
    stdout_console().print(table)
    for line in noise_lines(report):
        stdout_console().print(f"[yellow]{escape(line)}[/]")
    for target, reason in report.skips[:20]:
        stdout_console().print(f"[yellow]skipped[/] {escape(target)}: {escape(reason)}")


def noise_rows(report: coll.CollectReport) -> list[tuple[str, str]]:
    """The summary's rows about the host: canary checks and their cost, jobs on a busy host, noisy models."""
    share = report.canary_s / report.wall_s if report.wall_s else 0.0
    return [
        ("canary checks (s timing / s waiting / share of wall)",
         f"{report.canary_checks} ({report.canary_s:.1f} / {report.canary_wait_s:.1f} / {share:.1%})"),
        ("jobs measured on a busy host (flagged host_busy)", str(len(report.busy_jobs))),
        ("flagged jobs measured again once the host was quiet", str(len(report.remeasured))),
        ("models timed once more at the end (minimum over passes kept)", str(report.retimed)),
        ("models noisy (block medians over the bound)", str(len(report.noisy_models))),
    ]


def noise_lines(report: coll.CollectReport, worst: int = 5) -> list[str]:
    """The worst few busy-host jobs and noisy models, by name, for the lines under the summary."""
    lines = []
    if report.busy_jobs:
        shown = ", ".join(f"{t} ({r:.2f}x)" for t, r in sorted(report.busy_jobs, key=lambda j: -j[1])[:worst])
        lines.append(f"host busy (canary slower than its reference) during {plural(len(report.busy_jobs), 'job')}, "
                     f"worst: {shown}; their rows are flagged host_busy")
    if report.noisy_models:
        shown = ", ".join(f"{m} ({s:.0%})" for m, s in sorted(report.noisy_models, key=lambda j: -j[1])[:worst])
        lines.append(f"{plural(len(report.noisy_models), 'model')} varied more than the noise bound between blocks, "
                     f"worst: {shown}; their latency is the quietest block's")
    return lines
