"""Streaming execution of a prepared pipeline: one thread per stage stream, bounded queues between stages.

Batch n+1 enters stage 1 while batch n is in stage 2, so overlap, bubbles and contention are real. A
source thread feeds the first queue (it blocks when the queue is full), the calling thread is the sink.
A stage that raises stops every thread, the events recorded so far are kept, and `PipelineFailedError`
carries the partial run (so its trace can still be written).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from hase.errors import HaseError, first_line
from hase.pipeline import schema
from hase.pipeline.build import PreparedPipeline, StageRuntime, prepared
from hase.pipeline.event_log import EventBudget, EventLog, events_frame, tracks_frame
from hase.pipeline.partition import merge, partition
from hase.pipeline.spec import PipelineSpec

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often a blocked thread checks whether the run was stopped
now = time.perf_counter_ns
Batches: TypeAlias = "queue.Queue[tuple[int, np.ndarray]]"  # (batch id, data) between two stages


@dataclass(frozen=True)
class StageFailure:
    """Where a run broke: the stage, batch, stream and executor, and the exception's one-line text."""

    stage: str
    batch_id: int
    stream: int
    executor: int
    device: str
    error: str


@dataclass(frozen=True)
class PipelineRun:
    """A finished (or stopped) run: trace events, tracks, per-batch entry/exit times and run settings.

    `enter_ns`/`exit_ns` (ns since the run started; -1 where it never happened) are kept even with
    tracing off, so throughput and end-to-end latency never depend on trace events.
    """

    spec: PipelineSpec
    events: pd.DataFrame
    tracks: pd.DataFrame
    batches: int
    enter_ns: np.ndarray
    exit_ns: np.ndarray
    traced: bool
    dropped_events: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    failure: StageFailure | None = None

    @property
    def completed(self) -> int:
        """Batches that left the last stage."""
        return int((self.exit_ns >= 0).sum())

    @property
    def span_ns(self) -> int:
        """From the first batch entering stage 1 to the last batch leaving the pipeline."""
        done = self.exit_ns[self.exit_ns >= 0]
        entered = self.enter_ns[self.enter_ns >= 0]
        return int(done.max() - entered.min()) if done.size and entered.size else 0

    @property
    def throughput_per_s(self) -> float:
        """Completed batches per second over `span_ns`; NaN when nothing completed."""
        return self.completed / (self.span_ns / 1e9) if self.span_ns > 0 else float("nan")


class PipelineFailedError(HaseError):
    """A stage raised mid-run; `.run` holds every event recorded up to then."""

    def __init__(self, message: str, run: PipelineRun) -> None:
        super().__init__(message)
        self.run = run


def run_pipeline(spec: PipelineSpec, batches: int, *, trace: bool = True, hardware: bool = True, warmup: int = 2,
                 workdir: str | Path | None = None) -> PipelineRun:
    """Validate, warm up and stream `batches` batches through the pipeline; returns the run.

    `trace=False` records no events (throughput and latency only); `hardware=False` keeps the events but
    turns backend profiling off (no hardware times, none of the ORT profiler's per-node cost).

    Raises HaseError before the run for bad input, PipelineFailedError (with the partial run) if a stage
    raises mid-run. Dummy models and ORT profiles go to `workdir` (a temporary directory by default).
    """
    if batches < 1:
        raise HaseError(f"batches must be >= 1 (got {batches})")
    with prepared(spec, workdir, trace=trace, hardware=hardware, warmup=warmup) as prep:
        return stream(prep, batches)


class _Context:
    """State shared by the threads of one run."""

    def __init__(self, prep: PreparedPipeline, batches: int) -> None:
        depth = prep.spec.queue_depth
        self.queues: list[Batches] = [queue.Queue(maxsize=depth) for _ in range(len(prep.stages) + 1)]
        self.stop = threading.Event()
        self.enter = np.full(batches, -1, dtype=np.int64)
        self.exit = np.full(batches, -1, dtype=np.int64)
        self.budget = EventBudget(prep.spec.max_events)
        self.hw_sampled = prep.spec.hw_sampled
        self.failure: StageFailure | None = None
        self._lock = threading.Lock()

    def fail(self, failure: StageFailure) -> None:
        """Keep the first failure and stop every thread."""
        with self._lock:
            if self.failure is None:
                self.failure = failure
        self.stop.set()


def stream(prep: PreparedPipeline, batches: int) -> PipelineRun:
    """Run `batches` batches through a prepared pipeline, once (executors stay open until it is closed)."""
    if prep.streamed:
        raise HaseError("this prepared pipeline has already run (its profiles were read): prepare it again")
    if batches < 1:
        raise HaseError(f"batches must be >= 1 (got {batches})")
    prep.streamed = True
    ctx = _Context(prep, batches)
    logs: list[EventLog] = []
    threads = [threading.Thread(target=_source, args=(ctx, prep.inputs, batches), name="hase-source", daemon=True)]
    for rt in prep.stages:
        for s in range(rt.spec.streams):
            lg = EventLog(ctx.budget, enabled=prep.trace)
            logs.append(lg)
            threads.append(threading.Thread(target=_worker, args=(ctx, rt, s, lg), daemon=True,
                                            name=f"hase-{rt.spec.name}-s{s}"))
    t0 = now()
    for t in threads:
        t.start()
    try:
        _sink(ctx, batches)
    finally:
        ctx.stop.set()
        for t in threads:
            t.join()
    return _collect(prep, ctx, logs, t0, batches)


def _collect(prep: PreparedPipeline, ctx: _Context, logs: list[EventLog], t0: int, batches: int) -> PipelineRun:
    hardware = {}
    for rt in prep.stages:
        for s, stream_execs in enumerate(rt.executors):
            for j, ex in enumerate(stream_execs):
                times = ex.finish()
                if times is not None:
                    hardware[rt.device_tracks[s][j].track_id] = times
    tracks = tracks_frame(prep.tracks)
    events = events_frame(logs, tracks, t0, hardware)
    enter, exit_ = (np.where(a >= 0, a - t0, -1) for a in (ctx.enter, ctx.exit))
    run = PipelineRun(prep.spec, events, tracks, batches, enter, exit_, prep.trace,
                      ctx.budget.dropped, prep.metadata, ctx.failure)
    if ctx.budget.dropped:
        log.warning("%d trace events over the max_events=%d budget were dropped", ctx.budget.dropped,
                    prep.spec.max_events)
    if ctx.failure is not None:
        f = ctx.failure
        raise PipelineFailedError(f"stage {f.stage!r} failed on batch {f.batch_id} ({f.device}, stream {f.stream}): "
                             f"{f.error}; {len(events)} events recorded before it are kept", run)
    return run


def _get(q: Batches, stop: threading.Event) -> tuple[int, np.ndarray] | None:
    """The next item of `q`, or None once the run was stopped."""
    while True:
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            if stop.is_set():
                return None


def _put(q: Batches, item: tuple[int, np.ndarray], stop: threading.Event) -> bool:
    """Put `item` on `q` (waiting while it is full); False when the run was stopped first."""
    while not stop.is_set():
        try:
            q.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _source(ctx: _Context, inputs: list[np.ndarray], batches: int) -> None:
    for b in range(batches):
        if not _put(ctx.queues[0], (b, inputs[b % len(inputs)]), ctx.stop):
            return


def _sink(ctx: _Context, batches: int) -> None:
    done = 0
    while done < batches:
        item = _get(ctx.queues[-1], ctx.stop)
        if item is None:
            return
        ctx.exit[item[0]] = now()
        done += 1


class _ExecutorError(Exception):
    def __init__(self, executor: int, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.executor, self.exc = executor, exc


def _worker(ctx: _Context, rt: StageRuntime, s: int, lg: EventLog) -> None:
    """One stream of one stage: take a batch, run it, pass it on; stop the run on an exception."""
    q_in, q_out = ctx.queues[rt.index], ctx.queues[rt.index + 1]
    run = _run_data_parallel if rt.spec.data_parallel else _run_single
    while True:
        item = _get(q_in, ctx.stop)
        if item is None:
            return
        b, x = item
        t = now()
        if rt.index == 0:
            ctx.enter[b] = t
        try:
            y = run(rt, s, b, x, lg, ctx.hw_sampled(b))
        except Exception as exc:  # any backend or user-function error stops the run; events are kept
            _record_failure(ctx, rt, s, b, t, lg, exc)
            return
        if not _put(q_out, (b, y), ctx.stop):
            return


def _record_failure(ctx: _Context, rt: StageRuntime, s: int, b: int, t: int, lg: EventLog,
                    exc: BaseException) -> None:
    j = exc.executor if isinstance(exc, _ExecutorError) else 0
    cause = exc.exc if isinstance(exc, _ExecutorError) else exc
    on_host = rt.spec.data_parallel and not isinstance(exc, _ExecutorError)  # partition or merge failed
    track = rt.host_track(s) if on_host else rt.device_tracks[s][j]
    lg.record(schema.ERROR, track.track_id, b, t, now())
    message = first_line(cause, last=True) if str(cause).strip() else ""
    ctx.fail(StageFailure(rt.spec.name, b, s, track.executor, track.device, f"{type(cause).__name__}: {message}"))
    log.debug("stage %s failed on batch %d", rt.spec.name, b, exc_info=cause)


def _run_single(rt: StageRuntime, s: int, b: int, x: np.ndarray, lg: EventLog, profile: bool) -> np.ndarray:
    """One executor: submit, wait, record. `profile`: this batch is one of the hardware-time samples."""
    ex, track = rt.executors[s][0], rt.device_tracks[s][0].track_id
    t0 = now()
    ex.submit(x, profile)
    t1 = now()
    r = ex.wait()
    t2 = now()
    lg.record(schema.INFER, track, b, t0, max(r.done_ns, t1), submit_ns=t1 - t0, wait_ns=t2 - t1, hw_ns=r.hw_ns,
              marshal_ns=r.marshal_ns, rows=x.shape[0] if x.ndim else 1, run_index=r.run_index)
    if r.flush_ns:
        lg.record(schema.PROFILER_FLUSH, track, b, r.done_ns, r.done_ns + r.flush_ns)
    return r.output


def _run_data_parallel(rt: StageRuntime, s: int, b: int, x: np.ndarray, lg: EventLog,
                       profile: bool) -> np.ndarray:
    """Partition on the host, submit to every executor, wait for all, merge (sync + concatenate) on the host."""
    execs, host, axis = rt.executors[s], rt.host_track(s).track_id, rt.axis
    p0 = now()
    parts = partition(x, rt.sizes, axis)
    lg.record(schema.PARTITION, host, b, p0, now(), rows=x.shape[axis])
    starts, submits = [], []
    for j, ex in enumerate(execs):
        starts.append(now())
        try:
            ex.submit(parts[j], profile)
        except Exception as exc:  # name the executor that failed
            raise _ExecutorError(j, exc) from exc
        submits.append(now() - starts[j])
    results = []
    for j, ex in enumerate(execs):
        w = now()
        try:
            results.append((ex.wait(), now() - w))
        except Exception as exc:  # name the executor that failed
            raise _ExecutorError(j, exc) from exc
    for j, (r, waited) in enumerate(results):
        track = rt.device_tracks[s][j].track_id
        lg.record(schema.INFER, track, b, starts[j], max(r.done_ns, starts[j] + submits[j]), submit_ns=submits[j],
                  wait_ns=waited, hw_ns=r.hw_ns, marshal_ns=r.marshal_ns, rows=rt.sizes[j], run_index=r.run_index)
        if r.flush_ns:
            lg.record(schema.PROFILER_FLUSH, track, b, r.done_ns, r.done_ns + r.flush_ns)
    m0 = max(r.done_ns for r, _ in results)
    y = merge([r.output for r, _ in results], axis, stage=rt.spec.name)
    lg.record(schema.MERGE, host, b, m0, now(), rows=y.shape[axis])
    return y
