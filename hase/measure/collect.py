"""The staged collect pipeline: zoo -> split -> measure kernels and full models -> store, resumably.

Work is cut into jobs ("kernel K on device D", "model M on device D", a model being the sha256 of its file;
`hase.measure.jobs`). `device_jobs` builds one device config's job list as it goes (splitting each model when
its turn comes) and leaves out what the store already holds; `measure_job` measures one job; `DeviceRun.record`
writes its rows and its done-marker in one transaction, so a killed run resumes where it stopped with nothing
lost and nothing measured twice. `collect` runs them one after another here; `hase.measure.fleet` runs the same
jobs, measured by the same function, on a Ray cluster, and writes them the same way. A job that fails — for any
reason short of an interrupt: a Hase error, ONNX Runtime's, MemoryError — is recorded as a skip with its reason
and the run goes on. A skip holds for the settings it failed under: other settings, or `retry_skips`, try the
job again.

Each device config's first jobs measure the empty kernel and the host's peaks (`PeaksJob`, `hase.measure.peaks`:
GEMM FLOP/s, bandwidth per memory level, per-call and per-node overhead; once per device and store, a few seconds),
which training keeps with the predictor; a fleet run measures them on a worker like any job.

A noisy host is watched, not trusted: the canary (`hase.measure.canary`) is timed at the start of each device
config's run, before every full-model job and before every `every_kernels`-th kernel job; the job's rows
carry the check (`canary_ms`, `canary_ratio`, `host_busy`); at the end of the run, jobs flagged busy are measured
again while the canary reads quiet (`hase.measure.remeasure`, which also keeps the device's speed signature on this
host once per store), and the report lists the jobs still measured on a busy
host and the models whose block medians varied more than the noise bound.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from hase import paths
from hase.errors import HaseError
from hase.files import file_sha256
from hase.kernels import graph, split
from hase.kernels.types import KernelNode
from hase.measure.canary import Canary, CanaryCheck, canary_timer
from hase.measure.config import CollectConfig, load_collect_config, settings_hash
from hase.measure.jobs import (
    CANARY_TABLES,
    FixedJob,
    HostWatch,
    Job,
    JobResult,
    KernelJob,
    ModelJob,
    PeaksJob,
    job_label,
    measure_job,
    reason,
    timed_check,
)
from hase.measure.progress import CollectEvent, KernelStarted, ModelStarted, OnProgress
from hase.measure.remeasure import keep_flagged, record_signature, remeasure_flagged
from hase.measure.retime import RESERVE_SHARE, retime_models
from hase.measure.store import Store
from hase.measure.types import MeasureSettings, ModelSource
from hase.runtime import sessions
from hase.runtime.host import HostFingerprint
from hase.runtime.types import EPConfig, TimingPolicy
from hase.zoo import ZooConfig, ensure_zoo
from hase.zoo.blocks import is_sampled
from hase.zoo.registry import ModelSpec

__all__ = ["CollectConfig", "CollectReport", "DeviceRun", "ModelSource", "WorkerSummary", "collect", "device_jobs",
           "dir_sources", "load_collect_config", "model_jobs", "zoo_sources"]

log = logging.getLogger(__name__)

#: the most a spans-only collect times a sampled one-kernel block as a whole model (its three blocks still flag it
#: noisy): half of a sampled block's job time went into its whole-model timing runs, which training never reads
BLOCK_TIMING = TimingPolicy(warmup=2, min_runs=5, min_time_s=0.02)



@dataclass
class WorkerSummary:
    """What one worker of a fleet run did (`hase.measure.fleet`): jobs committed or skipped there, jobs lost
    there (its process or node died), jobs whose rows were refused, seconds spent measuring."""

    host: str
    devices: tuple[str, ...]
    jobs_done: int = 0
    jobs_skipped: int = 0
    jobs_lost: int = 0
    jobs_refused: int = 0
    busy_s: float = 0.0


@dataclass
class CollectReport:
    """What a collect run did, for the CLI summary and the benchmark."""

    models_done: int = 0
    models_skipped: int = 0
    kernels_measured: int = 0
    kernels_reused: int = 0
    node_occurrences: int = 0
    skips: list[tuple[str, str]] = field(default_factory=list)
    timed_s: float = 0.0
    wall_s: float = 0.0
    #: (model_id, block spread) of every model whose block medians varied more than the noise bound
    noisy_models: list[tuple[str, float]] = field(default_factory=list)
    #: (job target, canary ratio) of every job measured while the host stayed slower than the canary's bound
    busy_jobs: list[tuple[str, float]] = field(default_factory=list)
    #: jobs flagged busy and measured again at the end of the run on a quiet host (`hase.measure.remeasure`)
    remeasured: list[str] = field(default_factory=list)
    #: full models timed once more at the end of the run, the minimum over passes kept (`hase.measure.retime`)
    retimed: int = 0
    #: `budget_s` given: the run stopped handing out jobs when it ran out (a rerun goes on where it stopped)
    budget_s: float | None = None
    out_of_budget: bool = False
    canary_checks: int = 0
    canary_s: float = 0.0
    canary_wait_s: float = 0.0
    #: fleet runs only: worker label -> what it did; (target, worker, reason) of every retried or refused job
    workers: dict[str, WorkerSummary] = field(default_factory=dict)
    retried: list[tuple[str, str, str]] = field(default_factory=list)
    refused: list[tuple[str, str, str]] = field(default_factory=list)
    #: fleet runs only: seconds a worker sat idle between two jobs queued for it, and result round trips
    dispatch_gaps_s: list[float] = field(default_factory=list)
    return_s: list[float] = field(default_factory=list)


def zoo_sources(zoo_config: ZooConfig, out_dir: str | Path = paths.ZOO_DIR,
                specs: Iterable[ModelSpec] | None = None) -> Iterator[ModelSource]:
    """Build (where missing) and yield a parsed zoo config's models one at a time
    (`hase.sampler.config.read_zoo` reads one with its sampled blocks), in `specs`' order when given."""
    for entry in ensure_zoo(zoo_config, out_dir, specs):
        yield ModelSource(entry.spec.name, entry.spec.family, Path(entry.path))


def dir_sources(directory: str | Path, family: str = "exported") -> list[ModelSource]:
    """Every .onnx file of a directory, as models of one family."""
    d = Path(directory)
    if not d.is_dir():
        raise HaseError(f"models directory not found: {d}")
    return [ModelSource(p.stem, family, p) for p in sorted(d.glob("*.onnx"))]


@dataclass
class DeviceRun:
    """One device config's part of a collect run: the store, the settings, what the run did so far.

    A job is settled when it is done, skipped under these settings (`settings_hash`), or handed out by this run
    and not yet recorded (`claim`); with `retry_skips`, only a skip recorded by this run settles it, so every
    earlier skip is tried again once. The driver alone writes the store (`record`, `skip`).
    """

    store: Store
    ep: EPConfig
    settings: MeasureSettings
    report: CollectReport
    progress: OnProgress | None = None
    retry_skips: bool = False
    #: time.perf_counter() past which no job is handed out (`collect(budget_s=)`); None: no budget
    deadline: float | None = None
    #: measure full models only (their profiled node spans: the `span` target), no standalone kernel timings
    spans_only: bool = False
    settings_hash: str = field(init=False)
    _skipped_now: set[str] = field(init=False, default_factory=set)
    _claimed: set[str] = field(init=False, default_factory=set)
    _hosts: set[str] = field(init=False, default_factory=set)  # fingerprints kept in `hosts` by this run
    flagged: list[Job] = field(init=False, default_factory=list)  # measured on a busy host: a second try at the end

    def __post_init__(self) -> None:
        self.settings_hash = settings_hash(self.ep, self.settings)

    def settled(self, job: str) -> bool:
        """Whether the job needs no run: done, handed out, or skipped under these settings (in this run, with
        retry_skips)."""
        if job in self._claimed or self.store.is_done(job, self.ep.name):
            return True
        if self.retry_skips:
            return job in self._skipped_now
        return self.store.has_skip(job, self.ep.name, self.settings_hash)

    def settings_for(self, job: Job) -> MeasureSettings:
        """The run's settings; with `spans_only`, a sampled one-kernel block's whole-model timing under the lighter
        `BLOCK_TIMING` (training uses its spans, never its latency: blocks are no calibration point)."""
        if self.spans_only and isinstance(job, ModelJob) and is_sampled(job.src.family):
            return dataclasses.replace(self.settings, model=dataclasses.replace(
                self.settings.model, warmup=min(self.settings.model.warmup, BLOCK_TIMING.warmup),
                min_runs=min(self.settings.model.min_runs, BLOCK_TIMING.min_runs),
                min_time_s=min(self.settings.model.min_time_s, BLOCK_TIMING.min_time_s)))
        return self.settings

    def out_of_time(self) -> bool:
        """Whether the budget is spent: no job is handed out past the deadline (noted in the report once)."""
        if self.deadline is None or time.perf_counter() < self.deadline:
            return False
        if not self.report.out_of_budget:
            log.info("collect budget of %.0f s spent on %s: stopping here; rerun to go on", self.report.budget_s or 0,
                     self.ep.name)
        self.report.out_of_budget = True
        return True

    def claim(self, job: Job) -> Job:
        """Hand a job out: it is settled for the rest of the run until it is recorded."""
        self._claimed.add(job.job_id)
        return job

    def skip(self, job: str, target: str, stage: str, why: str) -> None:
        """Record a failed job as a skip with its reason (first line and exception type); the run goes on."""
        log.warning("skipped %s on %s (%s): %s", target, self.ep.name, stage, why)
        self.store.record_skip(job, self.ep.name, target, stage, why, self.settings_hash)
        self._claimed.discard(job)
        self._skipped_now.add(job)
        self.report.skips.append((target, why))
        if job.startswith(("model:", "file:")):
            self.report.models_skipped += 1

    def skip_exc(self, job: str, target: str, stage: str, exc: Exception) -> None:
        """`skip` with an exception's reason (its traceback is logged with -v)."""
        log.debug("%s failed", target, exc_info=exc)
        self.skip(job, target, stage, reason(exc))

    def note_check(self, check: CanaryCheck, spent_s: float, waited_s: float, watch: HostWatch) -> None:
        """Count a canary check and its cost; the jobs after it on that host carry its columns."""
        self.report.canary_checks += check.tries
        self.report.canary_s += spent_s
        self.report.canary_wait_s += waited_s
        watch.seen(check)
        if check.busy:
            log.warning("host busy on %s: the canary ran %.2fx slower than the run's reference after %d tries; "
                        "the next job is measured anyway and flagged host_busy", self.ep.name, check.ratio,
                        check.tries)

    def note_host(self, fingerprint: dict[str, Any]) -> None:
        """Keep the fingerprint of a host that measured a job in the store's `hosts` table, once per run and host."""
        fp = HostFingerprint.from_dict(fingerprint)
        if fp.digest not in self._hosts:
            self.store.register_host(fp)
            self._hosts.add(fp.digest)

    def record(self, job: Job, result: JobResult, watch: HostWatch) -> bool:
        """Write a measured job: its rows with the host's canary columns and its done-marker in one transaction,
        or its skip; True when this call committed the job's rows."""
        if result.check is not None:
            self.note_check(result.check, result.canary_s, result.canary_wait_s, watch)
        target, stage = job_label(job)
        if result.error is not None:
            self.skip(job.job_id, target, stage, result.error)
            return False
        if result.fingerprint:
            self.note_host(result.fingerprint)
        self.report.timed_s += result.timed_s
        host = watch.columns()
        if host.get("host_busy"):
            self.report.busy_jobs.append((f"{stage} {target}", float(host["canary_ratio"])))
            if isinstance(job, (KernelJob, ModelJob)):
                keep_flagged(self, job)
        rows = {t: [{**r, **host} for r in rs] if t in CANARY_TABLES else rs for t, rs in result.rows.items()}
        for r in rows.get("model_measurements", []):
            if r["noisy"]:
                self.report.noisy_models.append((target, float(r["block_spread"])))
        committed = self.store.commit_job(job.job_id, self.ep.name, rows)
        self._claimed.discard(job.job_id)
        if isinstance(job, KernelJob):
            self.report.kernels_measured += committed
            self.report.kernels_reused += not committed
        elif isinstance(job, ModelJob):
            self.report.models_done += committed
        return committed

    def notify(self, event: CollectEvent) -> None:
        """Tell the progress callback, if any."""
        if self.progress:
            self.progress(event)


def collect(sources: Iterable[ModelSource], cfg: CollectConfig, store: Store,
            progress: OnProgress | None = None, *, retry_skips: bool = False, budget_s: float | None = None,
            spans_only: bool = False) -> CollectReport:
    """Measure every source on every device config into the store, here, one job at a time; resumable and
    idempotent.

    One collect at a time per store (`Store.writer_lock`): a second one waits, then reuses what the first
    measured. `retry_skips` tries every job recorded as skipped again (skips under other settings are
    retried anyway). `budget_s` stops handing out jobs once that many seconds have passed (the job under way
    finishes; a rerun goes on), less `retime.RESERVE_SHARE` of it kept for the models' later timing passes
    (`MeasureSettings.model_passes`, `hase.measure.retime`) that end each device's run. `spans_only` measures
    full models only (`DeviceRun.spans_only`). Only KeyboardInterrupt, SystemExit and the budget stop the run
    early; every job committed stays.
    """
    report = CollectReport(budget_s=budget_s)
    start = time.perf_counter()
    end = None if budget_s is None else start + budget_s
    later_passes = cfg.settings.model_passes > 1
    reserve = RESERVE_SHARE if later_passes else 0.0
    deadline = None if budget_s is None else start + budget_s * (1 - reserve)
    sources = list(sources) if len(cfg.devices) > 1 else sources
    for ep in cfg.devices:
        sessions.check_provider(ep)
    with store.writer_lock():
        for ep in cfg.devices:
            run = DeviceRun(store, ep, cfg.settings, report, progress, retry_skips, deadline, spans_only)
            watch = HostWatch.for_settings(cfg.settings)
            canary = Canary(canary_timer(ep, cfg.settings.canary), cfg.settings.canary) \
                if cfg.settings.canary.enabled else None
            if canary is not None:
                run.note_check(*timed_check(canary), watch)  # the run's first reference
            record_signature(run)
            run_start = time.perf_counter()
            for job in device_jobs(sources, run):
                result = measure_job(job, ep, run.settings_for(job), canary if watch.due(job) else None)
                run.record(job, result, watch)
            if not run.out_of_time():
                remeasure_flagged(run, canary, watch, run_start)
            if later_passes:
                retime_models(run, end)
    report.wall_s = time.perf_counter() - start
    return report


def device_jobs(sources: Iterable[ModelSource], run: DeviceRun) -> Iterator[Job]:
    """One device config's jobs, built as they are taken: the empty kernel and the host's peaks, then each model's
    kernels and the model itself; what is settled is left out (a kernel shared with an earlier model counts as
    reused), and a model that cannot be read or split is recorded as a skip here. Every job handed out is claimed;
    none is once the run's budget is spent."""
    for first in (FixedJob(), PeaksJob()):  # the host's peaks: once per device and store (a failure is a skip)
        if run.out_of_time():
            return
        if not run.settled(first.job_id):
            yield run.claim(first)
    for src in sources:
        if run.out_of_time():
            return
        run.notify(ModelStarted(src.name, run.ep.name))
        for job in model_jobs(src, run):
            if run.out_of_time():
                return
            yield run.claim(job)


def model_jobs(src: ModelSource, run: DeviceRun) -> Iterator[Job]:
    """Split one model (registering it in the store), then its not-yet-settled kernels and, unless settled,
    the full model."""
    try:
        digest = file_sha256(src.path)
    except Exception as exc:
        run.skip_exc(f"file:{src.path}", src.name, "read", exc)
        return
    job = f"model:{digest}"
    model_settled = run.settled(job)
    if model_settled and (run.spans_only or all(run.settled(f"kernel:{k}")
                                                for k in run.store.model_kernels(digest, run.ep.opt_level))):
        return  # a settled model is visited again only for a kernel skip to retry
    log.debug("model %s on %s: splitting", src.name, run.ep.name)
    try:
        model = graph.load_model(src.path)
        kg = graph.kernel_graph(model, run.ep)
        nodes = split.split(kg)
        uniq = split.unique_kernels(nodes)
        rows = _model_rows(src, model, kg, nodes, uniq)
    except Exception as exc:
        if not model_settled:
            run.skip_exc(job, src.name, "split", exc)
        return
    model_id = run.store.register_model(digest, src.name, *rows)
    run.report.node_occurrences += len(nodes)
    for i, kn in enumerate(() if run.spans_only else uniq.values()):
        run.notify(KernelStarted(src.name, kn.spec.op_type, i, len(uniq)))
        kjob = _kernel_job(kg, kn, run)
        if kjob is not None:
            yield kjob
    if not model_settled:
        yield ModelJob(job, model, src, model_id, tuple(nodes))


def _kernel_job(kg: graph.KernelGraph, kn: KernelNode, run: DeviceRun) -> KernelJob | None:
    """The kernel's job, or None when it is settled (reused) or its single-kernel model cannot be built (a skip)."""
    job = f"kernel:{kn.spec.kernel_id}"
    if run.settled(job):
        run.report.kernels_reused += 1
        return None
    try:
        return KernelJob(kn.spec, split.kernel_model(kg, kg.nodes[kn.node_idx]).SerializeToString())
    except Exception as exc:
        run.skip_exc(job, f"{kn.spec.op_type}:{kn.spec.kernel_id}", "kernel", exc)
        return None


def _model_rows(src: ModelSource, model: onnx.ModelProto, kg: graph.KernelGraph, nodes: list[KernelNode],
                uniq: dict[str, KernelNode]) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The model's row, its node->kernel map and its kernels (without model_id: `Store.register_model` gives it)."""
    inputs = {n: list(a.shape) for n, a in kg.feeds.items()}
    model_row = {"family": src.family, "source": str(src.path), "n_onnx_nodes": len(model.graph.node),
                 "n_kernel_nodes": len(nodes), "n_unique_kernels": len(uniq), "inputs_json": json.dumps(inputs),
                 "opt_level": kg.opt_level}
    node_rows = [{"opt_level": kg.opt_level, "node_idx": n.node_idx, "node_name": n.node_name,
                  "kernel_id": n.spec.kernel_id, "op_type": n.spec.op_type} for n in nodes]
    kernel_rows = [{"kernel_id": k, "op_type": kn.spec.op_type, "domain": kn.spec.domain,
                    "signature_json": kn.spec.to_json()} for k, kn in uniq.items()]
    return model_row, node_rows, kernel_rows
