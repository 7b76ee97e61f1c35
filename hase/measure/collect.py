"""The staged collect pipeline: zoo -> split -> measure kernels and full models -> store, resumably.

Work is cut into jobs ("kernel K on device D", "model M on device D", a model being the sha256 of its file);
each job's rows and its done-marker commit in one transaction, so a killed run resumes where it stopped
with nothing lost and nothing measured twice. A job that fails — for any reason short of an interrupt:
a Hase error, ONNX Runtime's, MemoryError — is recorded as a skip with its reason and the run goes on.
A skip holds for the settings it failed under: other settings, or `retry_skips`, try the job again.

A noisy host is watched, not trusted: the canary (`hase.measure.canary`) is timed at the start of each device
config's run, before every full-model job and before every `every_kernels`-th kernel job; the job's rows
carry the check (`canary_ms`, `canary_ratio`, `host_busy`), and the report lists the jobs measured on a busy
host and the models whose block medians varied more than the noise bound.
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from hase import paths
from hase.errors import HaseError, first_line
from hase.kernels import graph, split
from hase.kernels.types import KernelNode
from hase.measure import kernel as measure
from hase.measure import runtime
from hase.measure.canary import Canary, canary_timer
from hase.measure.config import CollectConfig, load_collect_config, settings_hash
from hase.measure.kernel import KernelJob
from hase.measure.model import measure_model
from hase.measure.store import Store
from hase.measure.types import EPConfig, MeasureSettings, ModelSource

__all__ = ["CollectConfig", "CollectReport", "DeviceRun", "ModelSource", "collect", "collect_model", "dir_sources",
           "load_collect_config", "zoo_sources"]

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, dict[str, Any]], None]


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
    canary_checks: int = 0
    canary_s: float = 0.0
    canary_wait_s: float = 0.0


def zoo_sources(zoo_config: str | Path, out_dir: str | Path = paths.ZOO_DIR) -> Iterator[ModelSource]:
    """Build (where missing) and yield the zoo's models one at a time."""
    from hase.zoo import ensure_zoo

    for entry in ensure_zoo(zoo_config, out_dir):
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

    A job is settled when it is done, or skipped under these settings (`settings_hash`); with `retry_skips`,
    only a skip recorded by this run settles it, so every earlier skip is tried again once.
    """

    store: Store
    ep: EPConfig
    settings: MeasureSettings
    report: CollectReport
    progress: ProgressFn | None = None
    retry_skips: bool = False
    canary: Canary | None = None
    settings_hash: str = field(init=False)
    _skipped_now: set[str] = field(init=False, default_factory=set)
    _host: dict[str, Any] = field(init=False, default_factory=dict)
    _kernels_unchecked: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.settings_hash = settings_hash(self.ep, self.settings)

    def settled(self, job: str) -> bool:
        """Whether the job needs no run: done, or skipped under these settings (in this run, with retry_skips)."""
        if self.store.is_done(job, self.ep.name):
            return True
        if self.retry_skips:
            return job in self._skipped_now
        return self.store.has_skip(job, self.ep.name, self.settings_hash)

    def skip(self, job: str, target: str, stage: str, exc: Exception) -> None:
        """Record a failed job as a skip with its reason (first line and exception type); the run goes on."""
        reason = _reason(exc)
        log.warning("skipped %s on %s (%s): %s", target, self.ep.name, stage, reason)
        log.debug("%s failed", target, exc_info=exc)  # the traceback, with -v
        self.store.record_skip(job, self.ep.name, target, stage, reason, self.settings_hash)
        self._skipped_now.add(job)
        self.report.skips.append((target, reason))
        if job.startswith(("model:", "file:")):
            self.report.models_skipped += 1

    def check_host(self) -> None:
        """Time the canary (waiting out a busy host within the policy's bound); later rows carry its check."""
        if self.canary is None:
            return
        spent, waited = self.canary.spent_s, self.canary.waited_s
        check = self.canary.check()
        self.report.canary_checks += check.tries
        self.report.canary_s += self.canary.spent_s - spent
        self.report.canary_wait_s += self.canary.waited_s - waited
        self._host = check.columns()
        self._kernels_unchecked = 0
        if check.busy:
            log.warning("host busy on %s: the canary ran %.2fx slower than the run's reference after %d tries; "
                        "the next job is measured anyway and flagged host_busy", self.ep.name, check.ratio,
                        check.tries)

    def before_kernel_job(self) -> None:
        """Check the host before every `every_kernels`-th kernel job."""
        if self.canary is not None and self._kernels_unchecked >= self.canary.policy.every_kernels:
            self.check_host()
        self._kernels_unchecked += 1

    def host_columns(self, target: str) -> dict[str, Any]:
        """The last check's canary columns for a job's rows; a busy one is reported under `target`."""
        if self._host.get("host_busy"):
            self.report.busy_jobs.append((target, float(self._host["canary_ratio"])))
        return dict(self._host)

    def notify(self, event: str, info: dict[str, Any]) -> None:
        """Tell the progress callback, if any."""
        if self.progress:
            self.progress(event, info)


def collect(sources: Iterable[ModelSource], cfg: CollectConfig, store: Store,
            progress: ProgressFn | None = None, *, retry_skips: bool = False) -> CollectReport:
    """Measure every source on every device config into the store; resumable and idempotent.

    One collect at a time per store (`Store.writer_lock`): a second one waits, then reuses what the first
    measured. `retry_skips` tries every job recorded as skipped again (skips under other settings are
    retried anyway). Only KeyboardInterrupt and SystemExit stop the run early; every job committed stays.
    """
    report = CollectReport()
    start = time.perf_counter()
    sources = list(sources) if len(cfg.devices) > 1 else sources
    for ep in cfg.devices:
        runtime.check_provider(ep)
    with store.writer_lock():
        for ep in cfg.devices:
            canary = Canary(canary_timer(ep, cfg.settings.canary), cfg.settings.canary) \
                if cfg.settings.canary.enabled else None
            run = DeviceRun(store, ep, cfg.settings, report, progress, retry_skips, canary)
            run.check_host()  # the run's first reference
            _collect_fixed_cost(run)
            for src in sources:
                run.notify("model", {"model": src.name, "device": ep.name})
                collect_model(src, run)
    report.wall_s = time.perf_counter() - start
    return report


def _collect_fixed_cost(run: DeviceRun) -> None:
    job = "fixed:empty_kernel"
    if run.settled(job):
        return
    try:
        row = measure.measure_fixed_cost(run.ep, run.settings)
    except Exception as exc:  # any failure of the job is a skip; interrupts go through
        run.skip(job, "empty kernel", "fixed", exc)
        return
    run.report.timed_s += row["n_runs"] * row["mean_ms"] / 1e3
    run.store.commit_job(job, run.ep.name, {"fixed_costs": [row]})


def collect_model(src: ModelSource, run: DeviceRun) -> None:
    """Split one model, measure its not-yet-measured kernels, then the full model; a failure is a skip."""
    try:
        digest = file_sha256(src.path)
    except Exception as exc:
        run.skip(f"file:{src.path}", src.name, "read", exc)
        return
    job = f"model:{digest}"
    model_settled = run.settled(job)
    if model_settled and all(run.settled(f"kernel:{k}") for k in run.store.model_kernels(digest, run.ep.opt_level)):
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
            run.skip(job, src.name, "split", exc)
        return
    model_id = run.store.register_model(digest, src.name, *rows)
    run.report.node_occurrences += len(nodes)
    for i, kn in enumerate(uniq.values()):
        run.notify("kernel", {"model": src.name, "op_type": kn.spec.op_type, "i": i, "n": len(uniq)})
        _collect_kernel(kg, kn, run)
    if not model_settled:
        log.debug("model %s on %s: full-model runs", model_id, run.ep.name)
        _collect_full_model(model, src, model_id, nodes, job, run)


def _collect_full_model(model: onnx.ModelProto, src: ModelSource, model_id: str, nodes: list[KernelNode],
                        job: str, run: DeviceRun) -> None:
    run.check_host()
    try:
        model_row, span_rows = measure_model(model, src, nodes, run.ep, run.settings, model_id=model_id)
    except Exception as exc:
        run.skip(job, model_id, "model", exc)
        return
    run.report.timed_s += model_row["n_runs"] * model_row["mean_ms"] / 1e3 + model_row.pop("profiled_s", 0.0)
    model_row.update(run.host_columns(f"model {model_id}"))
    if model_row["noisy"]:
        run.report.noisy_models.append((model_id, float(model_row["block_spread"])))
    if run.store.commit_job(job, run.ep.name, {"model_measurements": [model_row], "node_spans": span_rows}):
        run.report.models_done += 1


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


def _collect_kernel(kg: graph.KernelGraph, kn: KernelNode, run: DeviceRun) -> None:
    job = f"kernel:{kn.spec.kernel_id}"
    if run.settled(job):
        run.report.kernels_reused += 1
        return
    log.debug("kernel %s (%s) on %s", kn.spec.kernel_id, kn.spec.op_type, run.ep.name)
    run.before_kernel_job()
    try:
        kjob = KernelJob(kn.spec, split.kernel_model(kg, kg.nodes[kn.node_idx]).SerializeToString())
        rows = measure.measure_kernel(kjob, run.ep, run.settings)
    except Exception as exc:
        run.skip(job, f"{kn.spec.op_type}:{kn.spec.kernel_id}", "kernel", exc)
        return
    run.report.timed_s += sum(r["n_runs"] * r["mean_ms"] for r in rows) / 1e3
    host = run.host_columns(f"kernel {kn.spec.op_type}:{kn.spec.kernel_id}")
    rows = [{**r, **host} for r in rows]
    if run.store.commit_job(job, run.ep.name, {"kernel_measurements": rows}):
        run.report.kernels_measured += 1
    else:
        run.report.kernels_reused += 1


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB chunks (a model's identity in the store)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _reason(exc: BaseException) -> str:
    """A skip's reason: the exception's first line and its type, e.g. `Unable to allocate 224 GiB (MemoryError)`."""
    line, name = first_line(exc), type(exc).__name__
    return line if line == name else f"{line} ({name})"
