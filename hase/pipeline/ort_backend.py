"""ONNX Runtime executor of a pipeline stage, with hardware time from ORT's own profiler.

Each executor owns one session (made by `runtime.make_session`, inputs bound with `runtime.BoundRunner`).
With tracing on, the session profiles; after the run, `finish()` reads the profile line by line and gives
every run the sum of its node kernel times (GPU `Kernel` events where the CUDA EP records them). ORT keeps
profile events in memory (about 2 KB each), so profiling stops after `hw_profile_events` events per executor:
the executor ends the profile right after that run (a `profiler_flush` event marks the pause) and later
runs have no hardware time (reported as coverage).
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import onnx

from hase import runtime
from hase.errors import HaseError
from hase.pipeline.devices import Device
from hase.pipeline.executors import BlockingAsync, ExecutorOptions, InferResult

log = logging.getLogger(__name__)

ORT_DTYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}
MARSHAL_OPS = frozenset({"MemcpyToHost", "MemcpyFromHost", "ReorderInput", "ReorderOutput"})


class OrtExecutor:
    """One ORT session on one device: submit/wait over IOBinding, per-run hardware time after the run."""

    def __init__(self, model: Path, device: Device, threads: int, options: ExecutorOptions) -> None:
        self.device = device.name
        self._ep = device.ep_config(threads)
        nodes = _node_count(model)
        self._profile_runs = options.hw_profile_events // (nodes + 2) if options.hardware else 0
        prefix = options.profile_prefix if self._profile_runs > 0 else None
        self._session = runtime.make_session(model, self._ep, profile_prefix=prefix)
        self._profiling = prefix is not None
        self._profile_file: str | None = None
        inputs = self._session.get_inputs()
        if len(inputs) != 1:
            raise HaseError(f"{model.name} has {len(inputs)} inputs; a pipeline stage model takes exactly one "
                            f"(the previous stage's output)")
        self._input = inputs[0].name
        self.input_shape = tuple(d if isinstance(d, int) else None for d in inputs[0].shape)
        if inputs[0].type not in ORT_DTYPES:
            raise HaseError(f"{model.name}: input type {inputs[0].type} is not supported by the pipeline runner")
        self.input_dtype = np.dtype(ORT_DTYPES[inputs[0].type])
        zeros = np.zeros([d or 1 for d in self.input_shape], self.input_dtype)
        self._runner = runtime.BoundRunner(self._session, {self._input: zeros}, self._ep)
        self._device_input = None
        self._runs = 0
        self._async = BlockingAsync(self._run, options.threaded, f"hase-ort-{self.device}")

    def _bind(self, x: np.ndarray) -> None:
        binding = self._runner.binding
        if self._ep.device_type == "cpu":
            binding.bind_cpu_input(self._input, np.ascontiguousarray(x))
        else:
            val = runtime.ort().OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x), "cuda", self._ep.device_id)
            self._device_input = val  # must outlive the run
            binding.bind_ortvalue_input(self._input, val)

    def _run(self, x: np.ndarray) -> InferResult:
        self._bind(x)
        self._runner.run()
        # ORT reuses the output buffer on the next run: copy before handing it downstream.
        out = np.array(self._runner.binding.get_outputs()[0].numpy(), copy=True)
        done = time.perf_counter_ns()
        idx, self._runs = self._runs, self._runs + 1
        flush = 0
        if self._profiling and self._runs >= self._profile_runs:
            self._end_profile()
            flush = time.perf_counter_ns() - done
        return InferResult(out, done, idx, flush_ns=flush)

    def _end_profile(self) -> None:
        self._profile_file = self._session.end_profiling()
        self._profiling = False

    def submit(self, x: np.ndarray) -> None:
        self._async.submit(x)

    def wait(self) -> InferResult:
        return self._async.wait()

    def finish(self) -> tuple[np.ndarray, np.ndarray] | None:
        """End profiling (if still on) and return per-run (hw_ns, marshal_ns) arrays; None without a profile."""
        if self._profiling:
            self._end_profile()
        if not self._profile_file:
            return None
        if not os.path.exists(self._profile_file):
            log.warning("ORT profile %s was not written: no hardware times for %s", self._profile_file, self.device)
            return None
        hw, marshal = run_times_from_profile(self._profile_file)
        try:
            os.remove(self._profile_file)
        except OSError:  # pragma: no cover - best effort; the work directory is removed anyway
            pass
        self._profile_file = None
        return hw, marshal

    def close(self) -> None:
        self._async.close()
        if self._profiling:
            self._end_profile()


def _node_count(model: Path) -> int:
    try:
        return max(1, len(onnx.load(str(model), load_external_data=False).graph.node))
    except Exception as exc:  # onnx raises DecodeError, OSError, ...: all mean "not a loadable model"
        raise HaseError(f"cannot load {model}: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"
                        f"; check the path and that it is an ONNX file") from exc


def run_times_from_profile(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Per-run hardware and marshalling time (ns) from an ORT profile, runs in the order they ran.

    A run is a `model_run` event; its node `*_kernel_time` events (or, where present, GPU `Kernel` events)
    are the ones that start inside its [ts, ts + dur] window. The file is read one line at a time.
    """
    runs: list[tuple[int, int]] = []
    kernels: list[tuple[int, int, bool, bool]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            ev = _parse_line(line)
            if ev is None:
                continue
            cat, name = ev.get("cat"), ev.get("name", "")
            if cat == "Session" and name == "model_run":
                runs.append((int(ev["ts"]), int(ev["dur"])))
            elif (cat == "Node" and name.endswith("_kernel_time")) or cat == "Kernel":
                op = (ev.get("args") or {}).get("op_name", "")
                kernels.append((int(ev["ts"]), int(ev["dur"]), cat == "Kernel", op in MARSHAL_OPS))
    return _attribute(runs, kernels)


def _parse_line(line: str) -> dict | None:
    text = line.strip().rstrip(",")
    if not text.startswith("{"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _attribute(runs: list[tuple[int, int]], kernels: list[tuple[int, int, bool, bool]]
               ) -> tuple[np.ndarray, np.ndarray]:
    if not runs:
        return np.empty(0), np.empty(0)
    r = np.array(sorted(runs), dtype=np.int64)
    hw, marshal = np.zeros(len(r)), np.zeros(len(r))
    if kernels:
        k = np.array(kernels, dtype=np.int64)
        gpu = k[:, 2].astype(bool)
        if gpu.any():  # CUDA EP: device kernel events measure the GPU; node events only the launch
            k = k[gpu]
        run = np.searchsorted(r[:, 0], k[:, 0], side="right") - 1
        inside = (run >= 0) & (k[:, 0] <= r[np.clip(run, 0, None), 0] + r[np.clip(run, 0, None), 1])
        np.add.at(hw, run[inside], k[inside, 1])
        m = inside & k[:, 3].astype(bool)
        np.add.at(marshal, run[m], k[m, 1])
    return hw * 1e3, marshal * 1e3
