"""OpenVINO executor of a pipeline stage: start_async / wait on an infer request, PERF_COUNT profiling, sampled.

With hardware profiling on, a model compiled with `PERF_COUNT` gives, after each inference, the request's
`profiling_info`: per-layer real time, whose sum is the hardware time, and whose sum over
input/reorder/convert layers is the data-marshalling estimate. PERF_COUNT is not free (on small kernels it
measured ~20 us per inference plus ~15 us to read `profiling_info` from Python), and it is fixed at compile
time. So, like the ORT executor, with `hw_sample_every` > 1 the executor compiles the model twice (without
and with PERF_COUNT) and runs only the sampled batches (`profile=True`) on the PERF_COUNT request; the
other runs, and the first `hw_sample_warmup` runs of each block of sampled batches (the second copy of
the weights is cold), have no hardware time (NaN). With `hw_sample_every` = 1 every run is measured.
A completion callback timestamps the end of the inference, so a data-parallel stage that waits on its
executors in order still gets each one's end.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from hase.errors import HaseError, first_line
from hase.pipeline.backends import register_backend
from hase.pipeline.devices import OPENVINO, Device, OpenVinoCore, openvino
from hase.pipeline.executors import ExecutorOptions, ExecutorRequest, InferResult, SampleWarmup

log = logging.getLogger(__name__)

MARSHAL_LAYER_TYPES = frozenset({"input", "parameter", "reorder", "convert"})
_US = dt.timedelta(microseconds=1)


class OvExecutor:
    """A model compiled on an OpenVINO device, one infer request per compiled variant (one inference in flight).

    `hw_sampled` is True when there is a plain and a PERF_COUNT variant (`hw_sample_every` > 1).
    """

    def __init__(self, model: Path, device: Device, threads: int, options: ExecutorOptions,
                 core: OpenVinoCore) -> None:
        self.device = device.name
        self.hw_sampled = options.hardware and options.hw_sample_every > 1
        variants = (False, True) if self.hw_sampled else (options.hardware,)
        compiled = {perf: _compile(model, device, threads, perf, core) for perf in variants}
        first = compiled[variants[0]]
        if len(first.inputs) != 1:
            raise HaseError(f"{model.name} has {len(first.inputs)} inputs; a pipeline stage model takes "
                            f"exactly one (the previous stage's output)")
        port = first.inputs[0]
        self.input_shape = tuple(d.get_length() if d.is_static else None for d in port.get_partial_shape())
        self.input_dtype = np.dtype(port.get_element_type().to_dtype())
        self._executed = openvino().ProfilingInfo.Status.EXECUTED
        self._requests = {perf: c.create_infer_request() for perf, c in compiled.items()}
        for request in self._requests.values():
            request.set_callback(self._on_done, None)
        self._active: tuple[Any, bool] | None = None  # (request in flight, compiled with PERF_COUNT)
        self._warmup = SampleWarmup(options.hw_sample_warmup if self.hw_sampled else 0)
        self._done_ns = 0
        self._done = threading.Event()
        self._runs = 0

    def _on_done(self, _userdata: Any) -> None:
        self._done_ns = time.perf_counter_ns()
        self._done.set()

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        """Start the inference asynchronously (on the PERF_COUNT request when `profile` and sampling)."""
        perf = profile if self.hw_sampled else next(iter(self._requests))
        request = self._requests[perf]
        self._done.clear()
        request.start_async({0: x})
        self._active = (request, perf)

    def wait(self) -> InferResult:
        """Wait for the inference; a measured run gets its layers' hardware and marshalling time."""
        if self._active is None:
            raise RuntimeError("wait() without submit()")
        (request, perf), self._active = self._active, None
        request.wait()
        if not self._done.wait(timeout=60):  # the callback runs right after completion; wait() may return first
            self._done_ns = time.perf_counter_ns()
        out = np.array(request.get_output_tensor(0).data, copy=True)
        hw = marshal = np.nan
        if self._warmup.measured(perf):
            hw, marshal = layer_times_ns(request.profiling_info, self._executed)
        idx, self._runs = self._runs, self._runs + 1
        return InferResult(out, self._done_ns, idx, hw_ns=hw, marshal_ns=marshal)

    def finish(self) -> None:
        """Nothing to read after the run: every measured run got its hardware time in `wait`."""
        return None

    def close(self) -> None:
        """Release the requests; one still in flight (the run stopped elsewhere) is waited for first."""
        if self._active is not None:
            try:
                self._active[0].wait()
            except Exception:
                log.debug("in-flight OpenVINO request failed while closing", exc_info=True)
            self._active = None
        self._requests = {}


@register_backend(OPENVINO)
def open_openvino(request: ExecutorRequest) -> OvExecutor:
    """An OpenVINO executor (`ov:CPU`, `ov:GPU`, `ov:NPU`); OpenVINO is imported only now."""
    return OvExecutor(request.require_model(), request.device, request.threads, request.options, request.core)


def _compile(model: Path, device: Device, threads: int, perf_count: bool, core: OpenVinoCore) -> Any:
    config: dict[str, Any] = {"PERF_COUNT": "YES" if perf_count else "NO", "NUM_STREAMS": "1",
                              "PERFORMANCE_HINT": "LATENCY"}
    if device.ov_device == "CPU":
        config["INFERENCE_NUM_THREADS"] = str(threads)
    try:
        return core.get().compile_model(str(model), device.ov_device, config)
    except Exception as exc:  # OpenVINO raises RuntimeError for every load/compile failure
        raise HaseError(f"OpenVINO cannot load {model.name} on {device.ov_device}: {first_line(exc, last=True)}"
                        ) from exc


def layer_times_ns(profiling_info: Any, executed: Any) -> tuple[float, float]:
    """(sum of executed layers' real time, sum over input/reorder/convert layers) in nanoseconds."""
    hw = marshal = 0.0
    for p in profiling_info:
        if p.status != executed:
            continue
        t = p.real_time / _US * 1e3
        hw += t
        if p.node_type.lower() in MARSHAL_LAYER_TYPES or p.exec_type.lower().startswith("reorder"):
            marshal += t
    return hw, marshal
