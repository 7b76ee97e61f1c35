"""The executor surface every backend offers: `submit(x)`, `wait() -> InferResult`, `finish()`, `close()`.

OpenVINO is asynchronous by itself (start_async / wait). ONNX Runtime and Python functions run blocking;
`BlockingAsync` gives them the same surface, inline (the run happens inside `wait`, for single-executor
stages) or on the executor's own thread (data-parallel stages, so all executors of a stage run at once).

`submit(x, profile)` says whether this run is one of the sampled ones that should get a hardware time.
Only an executor with `hw_sampled = True` (ORT or OpenVINO with `hw_sample_every` > 1) acts on it: it runs
the batch on its profiled copy of the model, and keeps the hardware time unless the run is one of the first
`hw_sample_warmup` in a row on that copy (they re-warm its caches). The others measure every run
(`hw_sample_every` = 1) or none (profiling off, Python functions).

This module holds only the types every backend shares; it imports no backend. The backends
(`host_backend`, `ort_backend`, `ov_backend`) register an opener in `hase.pipeline.backends`.
"""
from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hase.errors import HaseError
from hase.pipeline.devices import Device, OpenVinoCore


@dataclass(frozen=True)
class InferResult:
    """One finished inference: its output, when the backend finished, and what the backend reported.

    `hw_ns`/`marshal_ns` are NaN when the backend reports them only after the run (ORT profiles, filled
    by `run_index`). `flush_ns` > 0 when the ORT profiler was stopped right after this run.
    """

    output: np.ndarray
    done_ns: int
    run_index: int
    hw_ns: float = np.nan
    marshal_ns: float = np.nan
    flush_ns: int = 0


class Executor(Protocol):
    """What the pipeline runner needs from a backend executor (one request in flight at a time)."""

    @property
    def device(self) -> str: ...

    @property
    def input_shape(self) -> tuple[int | None, ...] | None: ...

    @property
    def input_dtype(self) -> np.dtype[Any] | None: ...

    @property
    def hw_sampled(self) -> bool: ...  # True: only runs submitted with profile=True get a hardware time

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        """Start one inference on `x`; `profile`: this run is one of the hardware-time samples."""

    def wait(self) -> InferResult:
        """Wait for the inference submitted last and return it."""

    def finish(self) -> tuple[np.ndarray, np.ndarray] | None:
        """After the run: (hw_ns, marshal_ns) per run index for backends that report them late, else None."""

    def close(self) -> None:
        """Release sessions, requests and threads."""


@dataclass(frozen=True)
class ExecutorOptions:
    """How executors are opened for one run: backend profiling on/off, threading, ORT profile location/budget
    and sampling (`hw_sample_every` > 1: only the runs submitted with `profile=True` are profiled)."""

    hardware: bool = True  # backend profiling: ORT profiler / OpenVINO PERF_COUNT (hardware time per sampled run)
    threaded: bool = False
    profile_prefix: str | None = None
    hw_profile_events: int = 20_000
    hw_sample_every: int = 1
    hw_sample_warmup: int = 0


class SampleWarmup:
    """Counts consecutive runs on an executor's profiled copy; the first `warmup` of each streak are not kept."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self._streak = 0

    def measured(self, profiled: bool) -> bool:
        """Record one run; True when its hardware time is kept (a profiled run past the warm-up)."""
        self._streak = self._streak + 1 if profiled else 0
        return profiled and self._streak > self.warmup


class BlockingAsync:
    """submit/wait over a blocking `run(x, profile) -> InferResult`: inline, or on one dedicated worker thread."""

    def __init__(self, run: Callable[[np.ndarray, bool], InferResult], threaded: bool, name: str) -> None:
        self._run = run
        self._pool = cf.ThreadPoolExecutor(1, thread_name_prefix=name) if threaded else None
        self._pending: tuple[np.ndarray, bool] | None = None
        self._future: cf.Future[InferResult] | None = None

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        """Start the run on the worker thread, or keep `x` until `wait` runs it inline."""
        if self._pool is not None:
            self._future = self._pool.submit(self._run, x, profile)
        else:
            self._pending = (x, profile)

    def wait(self) -> InferResult:
        """The submitted run's result (running it now when inline)."""
        if self._future is not None:
            fut, self._future = self._future, None
            return fut.result()
        if self._pending is None:
            raise RuntimeError("wait() without submit()")
        (x, profile), self._pending = self._pending, None
        return self._run(x, profile)

    def close(self) -> None:
        """Stop the worker thread after the run in flight."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)


@dataclass(frozen=True)
class ExecutorRequest:
    """What a backend's opener gets: device, model file or Python function, threads, options, OpenVINO core."""

    device: Device
    model: Path | None
    fn: Callable[[np.ndarray], np.ndarray] | None
    threads: int
    options: ExecutorOptions
    core: OpenVinoCore

    def require_model(self) -> Path:
        """The model file; a backend device without one is a HaseError."""
        if self.model is None:
            raise HaseError(f"device {self.device.name} needs a model (`model` or `dummy`)")
        return self.model
