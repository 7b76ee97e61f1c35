"""ONNX Runtime sessions per execution provider, IOBinding, timing loops and device metadata.

The one place Hase creates `InferenceSession`s, so every figure carries the same settings.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import os
import platform
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hase.errors import HaseError

log = logging.getLogger(__name__)

OPT_LEVELS = ("disabled", "basic", "extended", "all")
EP_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


def ort():
    """Import onnxruntime lazily, with a one-line fix when neither wheel is installed."""
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise HaseError(
            "onnxruntime is not installed: run `make setup` (CPU) or `make setup EP=cuda` "
            "(installs onnxruntime-gpu); never install both wheels"
        ) from exc
    return onnxruntime


@dataclass(frozen=True)
class EPConfig:
    """A device configuration: which execution provider runs, with which threads and graph optimizations."""

    name: str = "cpu"
    ep: str = "cpu"
    intra_op_threads: int = 1
    inter_op_threads: int = 1
    opt_level: str = "extended"
    device_id: int = 0

    def __post_init__(self) -> None:
        if self.ep not in EP_PROVIDERS:
            raise HaseError(f"unknown execution provider {self.ep!r}: use one of {sorted(EP_PROVIDERS)}")
        if self.opt_level not in OPT_LEVELS:
            raise HaseError(f"unknown optimization level {self.opt_level!r}: use one of {list(OPT_LEVELS)}")
        if self.intra_op_threads < 0 or self.inter_op_threads < 0:
            raise HaseError("thread counts must be >= 0 (0 lets ONNX Runtime choose)")

    @property
    def provider(self) -> str:
        return EP_PROVIDERS[self.ep]

    @property
    def device_type(self) -> str:
        """Where IOBinding buffers live for this provider (`cpu` or `cuda`)."""
        return "cuda" if self.ep == "cuda" else "cpu"


def _opt_enum(level: str):
    g = ort().GraphOptimizationLevel
    return {
        "disabled": g.ORT_DISABLE_ALL,
        "basic": g.ORT_ENABLE_BASIC,
        "extended": g.ORT_ENABLE_EXTENDED,
        "all": g.ORT_ENABLE_ALL,
    }[level]


def check_provider(ep: EPConfig) -> None:
    """Fail loudly (never fall back to the CPU) when the provider this config asks for is missing."""
    available = ort().get_available_providers()
    if ep.provider not in available:
        raise HaseError(
            f"{ep.provider} is not available in this onnxruntime build (available: {', '.join(available)}); "
            f"for CUDA run `make setup EP=cuda` on a machine with an NVIDIA GPU"
        )


def session_options(
    ep: EPConfig,
    *,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    opt_level: str | None = None,
    config: Mapping[str, str] | None = None,
):
    """SessionOptions with the config's threads and optimization level (overridable), plus extra
    session config entries (e.g. `session.disable_prepacking`)."""
    so = ort().SessionOptions()
    so.intra_op_num_threads = ep.intra_op_threads
    so.inter_op_num_threads = ep.inter_op_threads
    so.graph_optimization_level = _opt_enum(opt_level or ep.opt_level)
    so.log_severity_level = 3
    if ep.intra_op_threads == 1:
        # With one thread, spinning worker threads only steal the core we are timing on.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    for key, value in (config or {}).items():
        so.add_session_config_entry(key, value)
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if optimized_model_path:
        so.optimized_model_filepath = optimized_model_path
    return so


def make_session(
    model: str | os.PathLike | bytes,
    ep: EPConfig,
    *,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    opt_level: str | None = None,
    config: Mapping[str, str] | None = None,
):
    """Create an InferenceSession on exactly the config's provider; a load failure is a HaseError.

    Args:
        model: path to an .onnx file or serialized model bytes.
        profile_prefix: enable ORT's profiler, writing `<prefix>_<date>.json`.
        optimized_model_path: save the optimized graph there (how Hase gets ORT's fused kernel graph).
        opt_level: override the config's graph optimization level.
        config: extra session config entries.
    """
    check_provider(ep)
    so = session_options(ep, profile_prefix=profile_prefix, optimized_model_path=optimized_model_path,
                         opt_level=opt_level, config=config)
    providers: list[Any] = [ep.provider]
    if ep.ep == "cuda":
        providers = [(ep.provider, {"device_id": ep.device_id}), "CPUExecutionProvider"]
    src = os.fspath(model) if not isinstance(model, bytes) else model
    try:
        sess = ort().InferenceSession(src, so, providers=providers)
    except Exception as exc:  # ORT raises several exception types; all mean "cannot load this model"
        raise HaseError(f"ONNX Runtime cannot load the model: {first_line(exc)}") from exc
    if ep.ep == "cuda" and ep.provider not in sess.get_providers():
        raise HaseError(f"{ep.provider} was requested but the session runs on {sess.get_providers()}")
    return sess


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


# ---------------------------------------------------------------- IOBinding and timing


class BoundRunner:
    """A session with inputs and outputs pre-bound (IOBinding), so a timed run copies nothing.

    On the CUDA EP, inputs are copied to the device once and outputs are bound to device memory;
    `run()` synchronizes the binding before returning so the clock includes GPU execution.
    """

    def __init__(self, session, feeds: Mapping[str, np.ndarray], ep: EPConfig) -> None:
        self.session = session
        self.ep = ep
        self.binding = session.io_binding()
        self._keep = []  # OrtValues must outlive the binding
        for name, arr in feeds.items():
            if ep.device_type == "cpu":
                self.binding.bind_cpu_input(name, np.ascontiguousarray(arr))
            else:
                val = ort().OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr), "cuda", ep.device_id)
                self._keep.append(val)
                self.binding.bind_ortvalue_input(name, val)
        for out in session.get_outputs():
            self.binding.bind_output(out.name, ep.device_type, ep.device_id)
        self.run_options = ort().RunOptions()

    def run(self) -> None:
        """One inference; returns after the device has finished."""
        if self.ep.device_type != "cpu":
            self.binding.synchronize_inputs()
        self.session.run_with_iobinding(self.binding, self.run_options)
        if self.ep.device_type != "cpu":
            self.binding.synchronize_outputs()

    def outputs(self) -> list[np.ndarray]:
        """Copies of the outputs (ORT reuses the bound buffers on the next run)."""
        return [np.array(v.numpy(), copy=True) for v in self.binding.get_outputs()]


@dataclass(frozen=True)
class TimingPolicy:
    """Stop rule of a timing loop: warm-up runs, then runs until both `min_runs` and `min_time_s` are met
    or `max_runs` / `max_time_s` is hit."""

    warmup: int = 5
    min_runs: int = 10
    max_runs: int = 200
    min_time_s: float = 0.05
    max_time_s: float = 1.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TimingPolicy:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise HaseError(f"unknown timing keys {sorted(unknown)}: use {sorted(known)}")
        return cls(**d)


@dataclass(frozen=True)
class Timing:
    """Summary of timed runs in milliseconds: median with p10/p90 spread and the sample count."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    n: int
    total_s: float

    @classmethod
    def from_samples(cls, samples_s: list[float] | np.ndarray) -> Timing:
        a = np.asarray(samples_s, dtype=float) * 1e3
        if a.size == 0:
            raise ValueError("no timing samples")
        p10, med, p90 = np.percentile(a, [10, 50, 90])
        return cls(float(med), float(p10), float(p90), float(a.mean()), float(a.min()), int(a.size),
                   float(a.sum() / 1e3))


def time_loop(fns: list, policy: TimingPolicy) -> Timing:
    """Time callables round-robin (one sample per call) under a stop rule; warm-up is not timed.

    Passing several callables (e.g. sessions of the same kernel with their own weights) rotates
    between them, which is how Hase measures kernels with cold weights.
    """
    for i in range(policy.warmup):
        fns[i % len(fns)]()
    samples: list[float] = []
    start = time.perf_counter()
    clock = time.perf_counter
    i = 0
    while True:
        t0 = clock()
        fns[i % len(fns)]()
        samples.append(clock() - t0)
        i += 1
        elapsed = clock() - start
        n = len(samples)
        if n >= policy.max_runs or elapsed >= policy.max_time_s:
            break
        if n >= policy.min_runs and elapsed >= policy.min_time_s:
            break
    return Timing.from_samples(samples)


# ---------------------------------------------------------------- device metadata


@functools.cache
def cpu_model() -> str:
    """The CPU's marketing name (from /proc/cpuinfo on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def gpu_info() -> tuple[str, str]:
    """(GPU name, driver version) from nvidia-smi, or ('', '') where there is none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return "", ""
    if not out:
        return "", ""
    name, _, driver = out[0].partition(",")
    return name.strip(), driver.strip()


def device_metadata(ep: EPConfig) -> dict[str, Any]:
    """The columns every measurement row carries, so a figure is never separated from its settings."""
    from hase import __version__

    gpu, driver = gpu_info() if ep.ep == "cuda" else ("", "")
    return {
        "device": ep.name,
        "cpu_model": cpu_model(),
        "gpu_name": gpu,
        "gpu_driver": driver,
        "ort_version": ort().__version__,
        "execution_provider": ep.provider,
        "intra_op_threads": ep.intra_op_threads,
        "inter_op_threads": ep.inter_op_threads,
        "opt_level": ep.opt_level,
        "hase_version": __version__,
    }

