"""The units of a collect run and the one function that measures them, wherever it runs.

A job is "the empty kernel on device D" (`FixedJob`), "the host's peaks on device D" (`PeaksJob`, once per device
and store: `hase.measure.peaks`), "kernel K on device D" (`hase.measure.kernel.KernelJob`) or "model M on device D"
(`ModelJob`). `measure_job` times one on the host it runs on — the local process of
`hase.measure.collect`, or a Ray worker of `hase.measure.fleet` — and returns its rows (`JobResult`); it never
touches the store: the driver alone writes, one transaction per job (`DeviceRun.record` in `collect`).
`HostWatch` is the driver's record of one measuring host's canary: when a check is due, and what the last
check said (its columns go on the rows of the jobs measured after it).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import onnx

from hase.errors import first_line
from hase.kernels.types import KernelNode
from hase.measure import kernel as measure
from hase.measure.canary import Canary, CanaryCheck
from hase.measure.kernel import KernelJob
from hase.measure.model import measure_model
from hase.measure.peaks import PEAKS_JOB, measure_peaks, peaks_rows
from hase.measure.types import MeasureSettings, ModelSource
from hase.runtime import sessions
from hase.runtime.host import host_fingerprint
from hase.runtime.types import EPConfig

__all__ = ["FixedJob", "HostWatch", "Job", "JobResult", "KernelJob", "ModelJob", "PeaksJob", "job_label", "measure_job",
           "reason", "timed_check"]

log = logging.getLogger(__name__)

#: the tables whose rows carry the canary columns of the check before their job
CANARY_TABLES = ("kernel_measurements", "model_measurements")


@dataclass(frozen=True)
class FixedJob:
    """The empty kernel on a device config: what every standalone run pays (`fixed_costs`)."""

    job_id: str = "fixed:empty_kernel"


@dataclass(frozen=True)
class PeaksJob:
    """The host's peaks on a device config (`hase.measure.peaks`): GEMM FLOP/s, bandwidth per level, overheads."""

    job_id: str = PEAKS_JOB


@dataclass(frozen=True)
class ModelJob:
    """A full model on a device config: its loaded model (static shapes, named nodes), where it came from,
    its id in the store and its kernel nodes (to map profiled nodes back to kernels)."""

    job_id: str  # model:<sha256 of the file>
    model: onnx.ModelProto
    src: ModelSource
    model_id: str
    nodes: tuple[KernelNode, ...]


Job: TypeAlias = FixedJob | PeaksJob | KernelJob | ModelJob


def job_label(job: Job) -> tuple[str, str]:
    """(target, stage) of a job, as skips and logs name it: `('Conv:ab12..', 'kernel')`, `('resnet18', 'model')`."""
    if isinstance(job, KernelJob):
        return f"{job.spec.op_type}:{job.spec.kernel_id}", "kernel"
    if isinstance(job, ModelJob):
        return job.model_id, "model"
    if isinstance(job, PeaksJob):
        return "host peaks", "peaks"
    return "empty kernel", "fixed"


@dataclass(frozen=True)
class JobResult:
    """What measuring one job gave: its rows per table (without canary columns), or the reason it failed.

    `timed_s` is the time spent in timed and profiled runs; `check` the canary check taken just before the job
    (None when none was due), with `canary_s`/`canary_wait_s` spent timing it and waiting for a busy host;
    `started_at` (epoch s) and `wall_s` frame the whole job on its host.
    """

    job_id: str
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    timed_s: float = 0.0
    error: str | None = None
    check: CanaryCheck | None = None
    canary_s: float = 0.0
    canary_wait_s: float = 0.0
    started_at: float = 0.0
    wall_s: float = 0.0
    fingerprint: dict[str, Any] = field(default_factory=dict)  # the measuring host's (`hase.runtime.host`)


def reason(exc: BaseException) -> str:
    """A skip's reason: the exception's first line and its type, e.g. `Unable to allocate 224 GiB (MemoryError)`."""
    line, name = first_line(exc), type(exc).__name__
    return line if line == name else f"{line} ({name})"


def timed_check(canary: Canary) -> tuple[CanaryCheck, float, float]:
    """One canary check and what it cost: (check, seconds timing it, seconds waiting for a busy host)."""
    spent, waited = canary.spent_s, canary.waited_s
    check = canary.check()
    return check, canary.spent_s - spent, canary.waited_s - waited


def measure_job(job: Job, ep: EPConfig, settings: MeasureSettings, canary: Canary | None = None) -> JobResult:
    """Check the host (when a canary is given), then measure the job on this host.

    Any failure of the job (a Hase error, ONNX Runtime's, MemoryError) comes back as `JobResult.error`, to be
    recorded as a skip; KeyboardInterrupt and SystemExit go through.
    """
    started, t0 = time.time(), time.perf_counter()
    check, canary_s, canary_wait_s = timed_check(canary) if canary is not None else (None, 0.0, 0.0)
    try:
        rows, timed_s = _measure(job, ep, settings)
    except Exception as exc:  # any failure of the job is a skip; interrupts go through
        log.debug("%s failed", job.job_id, exc_info=exc)  # the traceback, with -v
        return JobResult(job.job_id, error=reason(exc), check=check, canary_s=canary_s, canary_wait_s=canary_wait_s,
                         started_at=started, wall_s=time.perf_counter() - t0)
    return JobResult(job.job_id, rows, timed_s, None, check, canary_s, canary_wait_s, started,
                     time.perf_counter() - t0, host_fingerprint().to_dict())


def _measure(job: Job, ep: EPConfig, settings: MeasureSettings) -> tuple[dict[str, list[dict[str, Any]]], float]:
    """The job's rows per table and the seconds spent in timed (and profiled) runs."""
    if isinstance(job, KernelJob):
        rows = measure.measure_kernel(job, ep, settings)
        return {"kernel_measurements": rows}, sum(r["n_runs"] * r["mean_ms"] for r in rows) / 1e3
    if isinstance(job, ModelJob):
        model_row, span_rows = measure_model(job.model, job.src, list(job.nodes), ep, settings, model_id=job.model_id)
        timed = model_row["n_runs"] * model_row["mean_ms"] / 1e3 + model_row.pop("profiled_s", 0.0)
        return {"model_measurements": [model_row], "node_spans": span_rows}, timed
    if isinstance(job, PeaksJob):
        return {"device_peaks": peaks_rows(measure_peaks(ep), sessions.row_metadata(ep))}, 0.0
    row = measure.measure_fixed_cost(ep, settings)
    return {"fixed_costs": [row]}, row["n_runs"] * row["mean_ms"] / 1e3


@dataclass
class HostWatch:
    """The canary of one measuring host and device config, seen from the driver: when a check is due (the
    host's first job, every full-model job, every `every_kernels`-th kernel job) and what the last check said.

    `every_kernels` None: the canary is off. `reference_ms` and `last` are what a worker's fresh `Canary`
    starts from, so the reference stays the quickest check of the run on that host.
    """

    every_kernels: int | None
    reference_ms: float | None = None
    last: CanaryCheck | None = None
    _started: bool = field(default=False, init=False)
    _unchecked: int = field(default=0, init=False)

    @classmethod
    def for_settings(cls, settings: MeasureSettings) -> HostWatch:
        """A watch with the settings' canary policy (off when the canary is disabled)."""
        return cls(settings.canary.every_kernels if settings.canary.enabled else None)

    def due(self, job: Job) -> bool:
        """Whether a check must run just before this job (counts the kernel jobs since the last one)."""
        if self.every_kernels is None:
            return False
        first, self._started = not self._started, True
        if isinstance(job, KernelJob):
            due = first or self._unchecked >= self.every_kernels
            self._unchecked = 1 if due else self._unchecked + 1
            return due
        if first or isinstance(job, ModelJob):
            self._unchecked = 0
            return True
        return False

    def seen(self, check: CanaryCheck) -> None:
        """Take a check's result: the quickest reference so far, and the columns of the jobs that follow."""
        self._started = True
        self.last = check
        if self.reference_ms is None or check.reference_ms < self.reference_ms:
            self.reference_ms = check.reference_ms

    def columns(self) -> dict[str, Any]:
        """The last check's canary columns (none before the first check)."""
        return self.last.columns() if self.last is not None else {}
