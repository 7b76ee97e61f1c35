"""OpenVINO executor of a pipeline stage: start_async / wait on one infer request, PERF_COUNT profiling.

With tracing on, the model is compiled with `PERF_COUNT` (cheap, so every run is measured: no sampling);
after each inference the request's `profiling_info` gives per-layer real time: their sum is the hardware
time, and the sum over input/reorder/convert layers is the data-marshalling estimate. A completion callback
timestamps the end of the inference, so a data-parallel stage that waits on its executors in order still
gets each one's end.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from hase.errors import HaseError
from hase.pipeline.devices import Device, OpenVinoCore, openvino
from hase.pipeline.executors import ExecutorOptions, InferResult

log = logging.getLogger(__name__)

MARSHAL_LAYER_TYPES = frozenset({"input", "parameter", "reorder", "convert"})
_US = dt.timedelta(microseconds=1)


class OvExecutor:
    """One compiled model + one infer request on an OpenVINO device (one inference in flight)."""

    hw_sampled = False  # PERF_COUNT costs 0-2 %: every run gets its hardware time

    def __init__(self, model: Path, device: Device, threads: int, options: ExecutorOptions,
                 core: OpenVinoCore) -> None:
        ov = openvino()
        self.device = device.name
        self._hardware = options.hardware
        config: dict[str, Any] = {"PERF_COUNT": "YES" if options.hardware else "NO", "NUM_STREAMS": "1",
                                  "PERFORMANCE_HINT": "LATENCY"}
        if device.ov_device == "CPU":
            config["INFERENCE_NUM_THREADS"] = str(threads)
        try:
            compiled = core.get().compile_model(str(model), device.ov_device, config)
        except Exception as exc:  # OpenVINO raises RuntimeError for every load/compile failure
            raise HaseError(f"OpenVINO cannot load {model.name} on {device.ov_device}: {first_line(exc)}") from exc
        if len(compiled.inputs) != 1:
            raise HaseError(f"{model.name} has {len(compiled.inputs)} inputs; a pipeline stage model takes "
                            f"exactly one (the previous stage's output)")
        port = compiled.inputs[0]
        shape = port.get_partial_shape()
        self.input_shape = tuple(d.get_length() if d.is_static else None for d in shape)
        self.input_dtype = np.dtype(port.get_element_type().to_dtype())
        self._executed = ov.ProfilingInfo.Status.EXECUTED
        self._request = compiled.create_infer_request()
        self._done_ns = 0
        self._done = threading.Event()
        self._request.set_callback(self._on_done, None)
        self._inflight = False
        self._runs = 0

    def _on_done(self, _userdata: Any) -> None:
        self._done_ns = time.perf_counter_ns()
        self._done.set()

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        self._done.clear()
        self._request.start_async({0: x})
        self._inflight = True

    def wait(self) -> InferResult:
        self._inflight = False
        self._request.wait()
        if not self._done.wait(timeout=60):  # the callback runs right after completion; wait() may return first
            self._done_ns = time.perf_counter_ns()
        out = np.array(self._request.get_output_tensor(0).data, copy=True)
        hw = marshal = np.nan
        if self._hardware:
            hw, marshal = layer_times_ns(self._request.profiling_info, self._executed)
        idx, self._runs = self._runs, self._runs + 1
        return InferResult(out, self._done_ns, idx, hw_ns=hw, marshal_ns=marshal)

    def finish(self) -> None:
        return None

    def close(self) -> None:
        """Release the request; one still in flight (the run stopped elsewhere) is waited for first."""
        if self._request is not None and self._inflight:
            try:
                self._request.wait()
            except Exception:  # noqa: BLE001 - its error is not the one being reported; closing must finish
                log.debug("in-flight OpenVINO request failed while closing", exc_info=True)
        self._request = None


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


def first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else type(exc).__name__
