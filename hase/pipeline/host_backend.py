"""The `host` backend: a Python function as a pipeline executor on the calling CPU (e.g. NumPy preprocessing)."""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from hase.errors import HaseError
from hase.pipeline.backends import register_backend
from hase.pipeline.devices import HOST
from hase.pipeline.executors import BlockingAsync, ExecutorRequest, InferResult


class HostExecutor:
    """A Python function run inline, or on its own thread in a data-parallel stage; it has no hardware time."""

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
        """Call the function on `x` (now on the worker thread, or inline in `wait`)."""
        self._async.submit(x, profile)

    def wait(self) -> InferResult:
        """The function's output for the submitted batch."""
        return self._async.wait()

    def finish(self) -> None:
        """Nothing to read after the run: a Python function reports no hardware time."""
        return None

    def close(self) -> None:
        """Stop the worker thread, if any."""
        self._async.close()


@register_backend(HOST)
def open_host(request: ExecutorRequest) -> HostExecutor:
    """A `host` executor; the stage must give a Python function."""
    if request.fn is None:
        raise HaseError("device 'host' runs a Python function; give `function`")
    return HostExecutor(request.fn, request.options.threaded)
