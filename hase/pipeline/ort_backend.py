"""ONNX Runtime executor of a pipeline stage, with hardware time from ORT's own profiler, sampled.

ORT's profiler records every node of every run (about 10 us per node on a CPU), too costly to leave on, and
the Python API cannot switch it on for single runs. So with `hw_sample_every` > 1 an executor holds two
sessions of the same model with the same options: a plain one and a profiled one. The runner submits the
sampled batches (`PipelineSpec.hw_sampled`) with `profile=True`; only those run on the profiled session and
(past a block's warm-up) get a hardware time; every other run is on the plain session and has none (NaN:
nothing is estimated per run). With `hw_sample_every` = 1 there is only the profiled session (every run
measured); with hardware profiling off, only the plain one. The price of two sessions is a second copy of the
weights: memory, and cache misses each time the executor switches session. Hence sampling in blocks of
consecutive batches, and the first `hw_sample_warmup` runs of each block are not kept: on the development
machine the profiled copy needed 6-8 runs to reach its steady kernel times again (the first run 1.7-3.3x
slower).

After the run, `finish()` streams the profile through `hase.runtime.profile` and gives each profiled run the sum
of its node kernel times (GPU `Kernel` events where the CUDA EP records them). ORT keeps profile events in memory
(about 2 KB each), so profiling stops after `hw_profile_events` events per executor: the executor ends
the profile right after that run (a `profiler_flush` event marks the pause) and later runs have no
hardware time (reported as coverage).
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx

from hase.errors import HaseError, first_line
from hase.pipeline.backends import register_backend
from hase.pipeline.devices import ORT, Device
from hase.pipeline.executors import BlockingAsync, ExecutorOptions, ExecutorRequest, InferResult, SampleWarmup
from hase.runtime import profile, sessions
from hase.runtime.types import EPConfig

log = logging.getLogger(__name__)

ORT_DTYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}
MARSHAL_OPS = frozenset({*profile.MEMCPY_OPS, "ReorderInput", "ReorderOutput"})  # data movement, not compute


class _BoundSession:
    """One ORT session with IOBinding: bind an input, run, return a copy of the first output."""

    def __init__(self, model: Path, ep: EPConfig, profile_prefix: str | None) -> None:
        self.session = sessions.make_session(model, ep, profile_prefix=profile_prefix)
        self._ep = ep
        inputs = self.session.get_inputs()
        if len(inputs) != 1:
            raise HaseError(f"{model.name} has {len(inputs)} inputs; a pipeline stage model takes exactly one "
                            f"(the previous stage's output)")
        self.input = inputs[0]
        if self.input.type not in ORT_DTYPES:
            raise HaseError(f"{model.name}: input type {self.input.type} is not supported by the pipeline runner")
        shape = [d if isinstance(d, int) else 1 for d in self.input.shape]
        zeros: np.ndarray = np.zeros(shape, ORT_DTYPES[self.input.type])
        self._runner = sessions.BoundRunner(self.session, {self.input.name: zeros}, ep)
        self._device_input = None

    def run(self, x: np.ndarray) -> np.ndarray:
        """Bind `x` (copied to the GPU for CUDA), run, and return a copy of the first output."""
        binding = self._runner.binding
        if self._ep.device_type == "cpu":
            binding.bind_cpu_input(self.input.name, np.ascontiguousarray(x))
        else:
            val = sessions.ort().OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x), "cuda", self._ep.device_id)
            self._device_input = val  # must outlive the run
            binding.bind_ortvalue_input(self.input.name, val)
            binding.synchronize_inputs()  # a new input every batch (BoundRunner synchronizes only its first)
        self._runner.run()
        # ORT reuses the output buffer on the next run: copy before handing it downstream.
        return np.array(binding.get_outputs()[0].numpy(), copy=True)


class OrtExecutor:
    """One model on one ORT device: submit/wait over IOBinding, hardware time of the sampled runs after the run.

    `hw_sampled` is True when the executor has a plain and a profiled session (`hw_sample_every` > 1).
    """

    def __init__(self, model: Path, device: Device, threads: int, options: ExecutorOptions) -> None:
        self.device = device.name
        ep = device.ep_config(threads)
        self._profile_runs = options.hw_profile_events // (_node_count(model) + 2) if options.hardware else 0
        profiled = self._profile_runs > 0
        self.hw_sampled = profiled and options.hw_sample_every > 1
        variants = (False, True) if self.hw_sampled else (profiled,)  # session kinds: plain, profiled
        self._sessions = {p: _BoundSession(model, ep, options.profile_prefix if p else None) for p in variants}
        first = self._sessions[variants[0]]
        self.input_shape = tuple(d if isinstance(d, int) else None for d in first.input.shape)
        self.input_dtype = np.dtype(ORT_DTYPES[first.input.type])
        self._profiling = profiled
        self._profile_file: str | None = None
        # per run in the profile (at most _profile_runs): its run_index, or -1 for a warm-up run not kept
        self._profiled_runs: list[int] = []
        self._warmup = SampleWarmup(options.hw_sample_warmup if self.hw_sampled else 0)
        self._runs = 0
        self._async = BlockingAsync(self._run, options.threaded, f"hase-ort-{self.device}")

    def _session_for(self, profile: bool) -> _BoundSession:
        """The only session, or of two the profiled one for a sampled run while profiling is on."""
        if len(self._sessions) == 1:
            return next(iter(self._sessions.values()))
        return self._sessions[profile and self._profiling]

    def _run(self, x: np.ndarray, profile: bool) -> InferResult:
        session = self._session_for(profile)
        out = session.run(x)
        done = time.perf_counter_ns()
        idx, self._runs = self._runs, self._runs + 1
        flush = 0
        profiled = session is self._sessions.get(True) and self._profiling
        keep = self._warmup.measured(profiled)
        if profiled:
            self._profiled_runs.append(idx if keep else -1)
            if len(self._profiled_runs) >= self._profile_runs:
                self._end_profile()
                flush = time.perf_counter_ns() - done
        return InferResult(out, done, idx, flush_ns=flush)

    def _end_profile(self) -> None:
        self._profile_file = self._sessions[True].session.end_profiling()
        self._profiling = False

    def submit(self, x: np.ndarray, profile: bool = True) -> None:
        """Start one run (on this executor's thread in a data-parallel stage, else inline in `wait`)."""
        self._async.submit(x, profile)

    def wait(self) -> InferResult:
        """The submitted run's output and end time; its hardware time comes from `finish`."""
        return self._async.wait()

    def finish(self) -> tuple[np.ndarray, np.ndarray] | None:
        """End profiling (if still on) and return (hw_ns, marshal_ns) indexed by run_index, NaN for runs
        that were not profiled; None without a profile."""
        if self._profiling:
            self._end_profile()
        if not self._profile_file:
            return None
        if not os.path.exists(self._profile_file):
            log.warning("ORT profile %s was not written: no hardware times for %s", self._profile_file, self.device)
            return None
        hw, marshal = run_times_from_profile(self._profile_file)
        with contextlib.suppress(OSError):  # best effort; the work directory is removed anyway
            os.remove(self._profile_file)
        self._profile_file = None
        return by_run_index(hw, marshal, self._profiled_runs, self._runs, self.device)

    def close(self) -> None:
        """Stop the worker thread and end the profile if it is still on."""
        self._async.close()
        if self._profiling:
            self._end_profile()


@register_backend(ORT)
def open_ort(request: ExecutorRequest) -> OrtExecutor:
    """An ONNX Runtime executor (`cpu`, `cuda:N`) for the request's model."""
    return OrtExecutor(request.require_model(), request.device, request.threads, request.options)


def by_run_index(hw: np.ndarray, marshal: np.ndarray, profiled_runs: list[int], runs: int,
                 device: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Spread the profile's per-run times (in profile order) onto run indices; NaN where a run was not profiled
    or was a warm-up run (-1 in `profiled_runs`).

    Example: hw [4, 5, 7], profiled_runs [-1, 0, 3], runs 5 -> [5, nan, nan, 7, nan].
    """
    n = min(len(hw), len(profiled_runs))
    if len(hw) != len(profiled_runs):
        log.warning("ORT profile of %s has %d runs but %d were profiled: the first %d are attributed in order",
                    device, len(hw), len(profiled_runs), n)
    idx = np.asarray(profiled_runs[:n], dtype=np.int64)
    keep = idx >= 0
    full_hw, full_marshal = np.full(runs, np.nan), np.full(runs, np.nan)
    full_hw[idx[keep]], full_marshal[idx[keep]] = hw[:n][keep], marshal[:n][keep]
    return full_hw, full_marshal


def _node_count(model: Path) -> int:
    try:
        return max(1, len(onnx.load(str(model), load_external_data=False).graph.node))
    except Exception as exc:  # onnx raises DecodeError, OSError, ...: all mean "not a loadable model"
        raise HaseError(f"cannot load {model}: {first_line(exc)}; check the path and that it is an ONNX file"
                        ) from exc


def run_times_from_profile(path: str | os.PathLike[str]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-run hardware and marshalling time (ns) from an ORT profile, runs in the order they ran.

    A run is a `model_run` event; its node `*_kernel_time` events (or, where present, GPU `Kernel` events)
    are the ones that start inside its [ts, ts + dur] window (`hase.runtime.profile.run_ids`). The file is
    streamed one line at a time (`hase.runtime.profile.stream_trace`), so a cut-off last line is skipped.
    """
    run_ts: list[float] = []
    run_dur: list[float] = []
    kernels: list[tuple[float, float, bool, bool]] = []  # (ts_us, dur_us, GPU kernel event, marshalling op)
    for ev in profile.profile_events(profile.stream_trace(path), source=str(path)):
        if ev.kind == profile.MODEL_RUN:
            run_ts.append(ev.ts_us)
            run_dur.append(ev.dur_us)
        elif ev.kind in (profile.KERNEL_TIME, profile.GPU_KERNEL):
            kernels.append((ev.ts_us, ev.dur_us, ev.kind == profile.GPU_KERNEL, ev.op_type in MARSHAL_OPS))
    return _attribute(run_ts, run_dur, kernels)


def _attribute(run_ts: list[float], run_dur: list[float], kernels: list[tuple[float, float, bool, bool]]
               ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Kernel and marshalling time per run in ns; GPU kernel events, where there are any, replace node events
    (on the CUDA EP, node events time only the launch)."""
    hw, marshal = np.zeros(len(run_ts)), np.zeros(len(run_ts))
    if not kernels or not run_ts:
        return hw, marshal
    k = np.array(kernels, dtype=np.float64)
    gpu = k[:, 2] > 0
    if gpu.any():
        k = k[gpu]
    run = profile.run_ids(run_ts, run_dur, k[:, 0])
    inside = run >= 0
    np.add.at(hw, run[inside], k[inside, 1])
    m = inside & (k[:, 3] > 0)
    np.add.at(marshal, run[m], k[m, 1])
    return hw * 1e3, marshal * 1e3
