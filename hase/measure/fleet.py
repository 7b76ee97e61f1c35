"""`hase collect --cluster`: the jobs of a local collect, measured by the same function, on the nodes of a Ray cluster.

The driver (this process) builds each device config's job list (`collect.device_jobs`: it splits the models and
leaves out what the store holds), hands the jobs out as Ray tasks and writes what comes back through
`DeviceRun.record`, one transaction per job, exactly as a local run: the driver alone writes the store, so
resume, skips and SIGKILL safety keep their meaning. Workers run `fleet_task` -> `jobs.measure_job` and return
rows; `hase.measure.placement` decides which nodes may measure which device config and pins each job to one.
Rows that come back from a machine that does not match the config's fingerprint are refused, never mixed, and
that node stops measuring the config.

Faults: a job whose worker process or node dies is handed to another worker (up to `max_retries` times, then
recorded as a skip with the reason); a node that dies leaves the pool. A killed driver loses only the jobs in
flight, which the next run hands out again: nothing is committed twice.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase.errors import HaseError, first_line
from hase.measure.canary import Canary, CanaryCheck, canary_timer
from hase.measure.collect import CollectReport, DeviceRun, device_jobs
from hase.measure.config import CollectConfig
from hase.measure.jobs import Job, JobResult, ModelJob, job_label, measure_job
from hase.measure.placement import Worker, check_driver, pool, refusal
from hase.measure.progress import CollectEvent, JobDispatched, JobFinished, OnProgress, WorkersReady
from hase.measure.store import Store
from hase.measure.types import MeasureSettings, ModelSource
from hase.runtime.types import EPConfig

__all__ = ["collect_fleet", "connected", "fleet_task", "import_ray"]

log = logging.getLogger(__name__)

CanaryState = tuple[float | None, CanaryCheck | None]


def import_ray() -> Any:
    """The `ray` module, or a one-line HaseError naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise HaseError("Ray is not installed, so `hase collect --cluster` cannot run: `pip install \"hase[ray]\"` "
                        "(or `make setup`) on the driver and on every node") from None
    return ray


def fleet_task(job: Job, ep: EPConfig, settings: MeasureSettings, canary_state: CanaryState | None) -> JobResult:
    """What a Ray worker runs for one job: the canary when the driver asks (from the host's reference so far),
    then `measure_job`; a model job's file is written to a temporary folder first (profiling reads a file)."""
    here = dataclasses.replace(ep, device_id=0) if ep.ep == "cuda" else ep
    canary = None
    if canary_state is not None:
        canary = Canary(canary_timer(here, settings.canary), settings.canary)
        canary.reference_ms, canary.last = canary_state
    if not isinstance(job, ModelJob):
        return measure_job(job, here, settings, canary)
    with tempfile.TemporaryDirectory(prefix="hase_fleet_") as tmp:
        path = Path(tmp) / f"{job.src.path.stem or 'model'}.onnx"
        path.write_bytes(job.model.SerializeToString())
        local = dataclasses.replace(job, src=dataclasses.replace(job.src, path=path))
        return measure_job(local, here, settings, canary)


@contextlib.contextmanager
def connected(ray: Any, address: str) -> Iterator[None]:
    """Connect to the cluster at `address` (`auto`, `HOST:PORT`, `ray://HOST:PORT`) unless already connected;
    disconnect at the end only what was connected here."""
    if ray.is_initialized():
        yield
        return
    _check_reachable(address)
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except Exception as exc:  # Ray raises ConnectionError, ValueError or RuntimeError for a cluster it cannot reach
        raise HaseError(f"cannot connect to a Ray cluster at {address!r} ({first_line(exc)}): start one with "
                        f"`ray start --head` (docs/fleet.md) or give its address to --cluster") from None
    try:
        yield
    finally:
        ray.shutdown()


def _check_reachable(address: str) -> None:
    """A HaseError at once for an address nothing listens on (Ray itself waits minutes for a head that is not there)."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise HaseError(f"--cluster {address!r} is not a cluster address: give auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise HaseError(f"cannot connect to a Ray cluster at {address!r} ({exc.strerror or exc}): start one with "
                        f"`ray start --head` (docs/fleet.md) or give its address to --cluster") from None


def collect_fleet(sources: Iterable[ModelSource], cfg: CollectConfig, store: Store,
                  progress: OnProgress | None = None, *, address: str = "auto", retry_skips: bool = False,
                  max_retries: int = 2) -> CollectReport:
    """Measure every source on every device config on the nodes of a Ray cluster into the store; resumable.

    Raises HaseError when Ray is missing, the cluster cannot be reached, or a device config has no node that
    offers it and matches its fingerprint (before any work), and at the end when jobs were left because no live
    node offered their device any more (what was committed stays).
    """
    ray = import_ray()
    if max_retries < 0:
        raise HaseError(f"--max-retries {max_retries} is out of range: give 0 or more")
    report, start = CollectReport(), time.perf_counter()
    sources = list(sources)
    with connected(ray, address), store.writer_lock():
        workers, expected = pool(ray, cfg, store, report)
        check_driver(expected)
        runs = {ep.name: DeviceRun(store, ep, cfg.settings, report, progress, retry_skips) for ep in cfg.devices}
        fleet = _Fleet(ray, cfg, runs, workers, expected, max_retries, progress)
        fleet.notify(WorkersReady(tuple((w.label, tuple(w.devices)) for w in workers)))
        fleet.drive({name: device_jobs(sources, run) for name, run in runs.items()})
    report.wall_s = time.perf_counter() - start
    return report


@dataclass
class _Flight:
    """A job handed to a worker: where, which attempt, when."""

    job: Job
    device: str
    worker: Worker
    attempt: int
    submitted: float


class _Fleet:
    """The driver's loop: hand jobs to free workers, land their results in the store, retry what was lost."""

    def __init__(self, ray: Any, cfg: CollectConfig, runs: dict[str, DeviceRun], workers: list[Worker],
                 expected: dict[str, dict[str, Any]], max_retries: int, progress: OnProgress | None) -> None:
        self.ray, self.settings, self.runs, self.workers = ray, cfg.settings, runs, workers
        self.eps = {ep.name: ep for ep in cfg.devices}
        self.expected, self.max_retries, self.progress = expected, max_retries, progress
        self.remote = ray.remote(fleet_task)
        self.report = next(iter(runs.values())).report
        self.inflight: dict[Any, _Flight] = {}
        self.retry: dict[str, collections.deque[tuple[Job, int, str]]] = {d: collections.deque() for d in runs}
        self.jobs: dict[str, Iterator[Job]] = {}
        self.known = self.finished = 0

    def notify(self, event: CollectEvent) -> None:
        """Tell the progress callback, if any."""
        if self.progress:
            self.progress(event)

    def drive(self, jobs: dict[str, Iterator[Job]]) -> None:
        """Run every job of every device config to done or skipped."""
        self.jobs = dict(jobs)
        while True:
            self._fill()
            if not self.inflight:
                break
            ready, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=5.0)
            for ref in ready:
                self._land(ref, self.inflight.pop(ref))
        left = {d: len(q) for d, q in self.retry.items() if q} | {d: -1 for d in self.jobs}
        if left:
            shown = ", ".join(f"{d} ({n} jobs and more)" if n > 0 else d for d, n in left.items())
            raise HaseError(f"no live node offers {shown} any more: the jobs left are not measured (what was "
                            f"committed is kept); start a node for it (docs/fleet.md) and rerun")

    def _fill(self) -> None:
        """Give every live worker jobs up to its depth."""
        for w in self.workers:
            while w.alive and w.inflight < w.depth:
                picked = self._next(w)
                if picked is None:
                    break
                self._submit(w, *picked)

    def _next(self, w: Worker) -> tuple[str, Job, int] | None:
        """The worker's next job, its device configs taking turns: a lost job first (one last run elsewhere when
        another worker can take it), else the next of the config's job list."""
        for k in range(len(w.devices)):
            dev = w.devices[(w.turn + k) % len(w.devices)]
            queue = self.retry[dev]
            sole = sum(dev in o.devices and o.alive for o in self.workers) == 1
            for i, (lost, attempt, last) in enumerate(queue):
                if last != w.label or sole:
                    del queue[i]
                    w.turn += k + 1
                    return dev, lost, attempt
            job = next(self.jobs[dev], None) if dev in self.jobs else None
            if job is None:
                self.jobs.pop(dev, None)
                continue
            self.known += 1
            w.turn += k + 1
            return dev, job, 0
        return None

    def _submit(self, w: Worker, dev: str, job: Job, attempt: int) -> None:
        ep, watch = self.eps[dev], w.watches[dev]
        state = (watch.reference_ms, watch.last) if watch.due(job) else None
        ref = self.remote.options(**w.options(self.ray, ep)).remote(job, ep, self.settings, state)
        self.inflight[ref] = _Flight(job, dev, w, attempt, time.time())
        w.inflight += 1
        self.notify(JobDispatched(w.label, dev, job_label(job)[0]))

    def _land(self, ref: Any, flight: _Flight) -> None:
        """Record one finished task: its rows (or skip), a refusal, or a lost job to retry."""
        w = flight.worker
        w.inflight -= 1
        try:
            result: JobResult = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            self._lost(flight, first_line(exc))
            return
        self._timing(w, flight, result)
        assert w.summary is not None
        w.summary.busy_s += result.wall_s
        why = refusal(result.rows, self.expected[flight.device])
        if why:
            self._refuse(flight, why)
            return
        self.runs[flight.device].record(flight.job, result, w.watches[flight.device])
        if result.error is None:
            w.summary.jobs_done += 1
        else:
            w.summary.jobs_skipped += 1
        self._finish(flight, "skipped" if result.error else "done")

    def _finish(self, flight: _Flight, status: str) -> None:
        self.finished += 1
        self.notify(JobFinished(flight.worker.label, flight.device, status, job_label(flight.job)[0], self.finished,
                                self.known))

    def _timing(self, w: Worker, flight: _Flight, result: JobResult) -> None:
        """The worker's idle gap before a job that was queued for it, and the result's way back to the driver."""
        end = result.started_at + result.wall_s
        if w.last_end is not None and flight.submitted < w.last_end <= result.started_at:
            self.report.dispatch_gaps_s.append(result.started_at - w.last_end)
        w.last_end = end
        self.report.return_s.append(max(0.0, time.time() - end))

    def _lost(self, flight: _Flight, why: str) -> None:
        """A job whose worker process or node died: retried elsewhere within the bound, then a skip."""
        w, (target, stage) = flight.worker, job_label(flight.job)
        assert w.summary is not None
        w.summary.jobs_lost += 1
        self.report.retried.append((target, w.label, why))
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        if w.node_id not in alive and w.alive:
            w.alive = False
            log.warning("node %s died: its jobs go to the other nodes", w.label)
        if flight.attempt < self.max_retries:
            log.warning("%s on %s was lost on %s (%s): retrying it elsewhere", target, flight.device, w.label, why)
            self.retry[flight.device].append((flight.job, flight.attempt + 1, w.label))
            return
        self.runs[flight.device].skip(flight.job.job_id, target, stage, f"lost {flight.attempt + 1} times, last on "
                                      f"{w.label}: {why}")
        self._finish(flight, "skipped")

    def _refuse(self, flight: _Flight, why: str) -> None:
        """Rows from a machine that is not the device config's: not written; the node stops serving the config."""
        w, (target, _) = flight.worker, job_label(flight.job)
        assert w.summary is not None
        w.summary.jobs_refused += 1
        self.report.refused.append((target, w.label, why))
        log.warning("refused the rows of %s from %s (%s): %s; the node no longer measures it", target, w.label,
                    flight.device, why)
        if flight.device in w.devices:
            w.devices.remove(flight.device)
        self.retry[flight.device].append((flight.job, flight.attempt, w.label))

