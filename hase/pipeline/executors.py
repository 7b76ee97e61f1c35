"""The executor surface every backend offers: `submit(x)`, `wait() -> InferResult`, `finish()`, `close()`.

OpenVINO is asynchronous by itself (start_async / wait). ONNX Runtime and Python functions run blocking;
`BlockingAsync` gives them the same surface, inline (the run happens inside `wait`, for single-executor
stages) or on the executor's own thread (data-parallel stages, so all executors of a stage run at once).

`submit(x, profile)` says whether this run is one of the sampled ones that should get a hardware time.
Only an executor with `hw_sampled = True` (ORT or OpenVINO with `hw_sample_every` > 1) acts on it: it runs
the batch on its profiled copy of the model, and keeps the hardware time unless the run is one of the first
`hw_sample_warmup` in a row on that copy (they re-warm its caches). The others measure every run
(`hw_sample_every` = 1) or none (profiling off, Python functions).
"""
from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from hase.errors import HaseError
from hase.pipeline.devices import HOST, OPENVINO, ORT, Device, OpenVinoCore


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

    device: str
    input_shape: tuple[int | None, ...] | None
    input_dtype: np.dtype | None
    hw_sampled: bool  # True: only runs submitted with profile=True get a hardware time

    def submit(self, x: np.ndarray, profile: bool = True) -> None: ...

    def wait(self) -> InferResult: ...

    def finish(self) -> tuple[np.ndarray, np.ndarray] | None: ...

    def close(self) -> None: ...


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
        self._future: cf.Future | None = None

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        if self._pool is not None:
            self._future = self._pool.submit(self._run, x, profile)
        else:
            self._pending = (x, profile)

    def wait(self) -> InferResult:
        if self._future is not None:
            fut, self._future = self._future, None
            return fut.result()
        if self._pending is None:
            raise RuntimeError("wait() without submit()")
        (x, profile), self._pending = self._pending, None
        return self._run(x, profile)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class HostExecutor:
    """A Python function as a pipeline executor on the host CPU (e.g. graph preparation in NumPy)."""

    input_shape = None
    input_dtype = None
    hw_sampled = False

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], threaded: bool) -> None:
        self.device = "host"
        self._fn = fn
        self._runs = 0
        self._async = BlockingAsync(self._run, threaded, "hase-host")

    def _run(self, x: np.ndarray, profile: bool) -> InferResult:
        out = np.asarray(self._fn(x))
        idx, self._runs = self._runs, self._runs + 1
        return InferResult(out, time.perf_counter_ns(), idx)

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        self._async.submit(x, profile)

    def wait(self) -> InferResult:
        return self._async.wait()

    def finish(self) -> None:
        return None

    def close(self) -> None:
        self._async.close()


def open_executor(device: Device, *, model: Path | None, fn: Callable[[np.ndarray], np.ndarray] | None,
                  threads: int, options: ExecutorOptions, core: OpenVinoCore) -> Executor:
    """Open one executor on `device`; a model that fails to load is a HaseError naming the file."""
    if device.backend == HOST:
        if fn is None:
            raise HaseError("device 'host' runs a Python function; give `function`")
        return HostExecutor(fn, options.threaded)
    if model is None:
        raise HaseError(f"device {device.name} needs a model (`model` or `dummy`)")
    if device.backend == ORT:
        from hase.pipeline.ort_backend import OrtExecutor

        return OrtExecutor(model, device, threads, options)
    if device.backend == OPENVINO:
        from hase.pipeline.ov_backend import OvExecutor

        return OvExecutor(model, device, threads, options, core)
    raise HaseError(f"unknown backend {device.backend!r}")  # pragma: no cover - parse_device guards this
