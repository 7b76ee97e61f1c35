"""ONNX Runtime sessions per execution provider, IOBinding, timing loops and device metadata.

The one place Hase creates `InferenceSession`s, so every figure carries the same settings.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import platform
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hase.errors import HaseError, first_line
from hase.runtime.host import host_fingerprint
from hase.runtime.types import HOST, HOST_FP, DeviceMeta, EPConfig, Timing, TimingPolicy
from hase.version import __version__


def ort() -> Any:
    """Import onnxruntime lazily (the module, untyped), with a one-line fix when neither wheel is installed."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise HaseError(
            'onnxruntime is not installed: `pip install "hase[cpu]"`, or `pip install "hase[gpu]"` for CUDA '
            "(onnxruntime-gpu); never both wheels (in a checkout: `make setup`, or `make setup EP=cuda`)"
        ) from exc
    return onnxruntime


def _opt_enum(level: str) -> Any:
    """ORT's GraphOptimizationLevel value of one of OPT_LEVELS."""
    g = ort().GraphOptimizationLevel
    return {
        "disabled": g.ORT_DISABLE_ALL,
        "basic": g.ORT_ENABLE_BASIC,
        "extended": g.ORT_ENABLE_EXTENDED,
        "all": g.ORT_ENABLE_ALL,
    }[level]


def check_provider(ep: EPConfig) -> None:
    """Fail loudly (never fall back to the CPU) when this onnxruntime build lacks the config's provider.

    Necessary, not sufficient: onnxruntime-gpu lists CUDAExecutionProvider even on a machine with no GPU
    or without the CUDA libraries; `check_session_provider` checks what a session really runs on.
    """
    available = ort().get_available_providers()
    if ep.provider not in available:
        raise HaseError(
            f"{ep.provider} is not available in this onnxruntime build (available: {', '.join(available)}); "
            f'for CUDA install the gpu extra in place of the cpu one (`pip install "hase[gpu]"`; in a checkout '
            f"`make setup EP=cuda`) on a machine with an NVIDIA GPU"
        )


def provider_available(ep: EPConfig) -> bool:
    """Whether this onnxruntime build lists the config's provider (a GPU build may list CUDA with no GPU)."""
    return ep.provider in ort().get_available_providers()


def check_session_provider(providers: Sequence[str], ep: EPConfig) -> None:
    """Fail when a session does not run on the config's provider first (`session.get_providers()`).

    ONNX Runtime drops the CUDA provider silently (it logs "Require cuDNN 9.* and CUDA 13.*" and runs on the
    CPU) when the CUDA libraries cannot be loaded or there is no GPU: only the session's own list tells.
    """
    if not providers or providers[0] != ep.provider:
        raise HaseError(
            f"{ep.provider} was requested but the session runs on {', '.join(providers) or 'no provider'}: "
            f"install onnxruntime-gpu with its CUDA/cuDNN libraries (`pip install hase[gpu]`) on a machine "
            f"with an NVIDIA GPU, and check `nvidia-smi`"
        )


def preload_cuda(ep: EPConfig) -> None:
    """Load the CUDA/cuDNN libraries of the nvidia-* wheels before a CUDA session (onnxruntime >= 1.21 has
    `preload_dlls`; older builds find them on the library path themselves)."""
    if ep.ep != "cuda":
        return
    preload = getattr(ort(), "preload_dlls", None)
    if preload is not None:
        preload()


def session_options(
    ep: EPConfig,
    *,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    opt_level: str | None = None,
    config: Mapping[str, str] | None = None,
    log_severity: int = 3,
) -> Any:
    """SessionOptions with the config's threads and optimization level (overridable), plus extra
    session config entries (e.g. `session.disable_prepacking`); ORT logs at `log_severity` and above (3: errors,
    4: fatal only)."""
    so = ort().SessionOptions()
    so.intra_op_num_threads = ep.intra_op_threads
    so.inter_op_num_threads = ep.inter_op_threads
    so.graph_optimization_level = _opt_enum(opt_level or ep.opt_level)
    so.log_severity_level = log_severity
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
    model: str | os.PathLike[str] | bytes,
    ep: EPConfig,
    *,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    opt_level: str | None = None,
    config: Mapping[str, str] | None = None,
    log_severity: int = 3,
) -> Any:
    """Create an InferenceSession on exactly the config's provider; a load failure is a HaseError.

    Args:
        model: path to an .onnx file or serialized model bytes.
        profile_prefix: enable ORT's profiler, writing `<prefix>_<date>.json`.
        optimized_model_path: save the optimized graph there (how Hase gets ORT's fused kernel graph).
        opt_level: override the config's graph optimization level.
        config: extra session config entries.
        log_severity: ORT's own log level (4 silences its error lines when Hase reports the error itself).
    """
    check_provider(ep)
    preload_cuda(ep)
    so = session_options(ep, profile_prefix=profile_prefix, optimized_model_path=optimized_model_path,
                         opt_level=opt_level, config=config, log_severity=log_severity)
    providers: list[Any] = [ep.provider]
    if ep.ep == "cuda":
        providers = [(ep.provider, {"device_id": ep.device_id}), "CPUExecutionProvider"]
    src = os.fspath(model) if not isinstance(model, bytes) else model
    try:
        sess = ort().InferenceSession(src, so, providers=providers)
    except Exception as exc:  # ORT raises several exception types; all mean "cannot load this model"
        raise HaseError(f"ONNX Runtime cannot load the model: {first_line(exc)}") from exc
    if ep.ep != "cpu":
        check_session_provider(list(sess.get_providers()), ep)
    return sess


# ---------------------------------------------------------------- IOBinding and timing


class BoundRunner:
    """A session with inputs and outputs pre-bound (IOBinding), so a timed run copies nothing.

    On the CUDA EP, inputs are copied to the device once (here, synchronized once) and outputs are bound to
    device memory; `run()` synchronizes the outputs before returning, so the clock includes the GPU's work and
    no host copy.
    """

    def __init__(self, session: Any, feeds: Mapping[str, np.ndarray], ep: EPConfig) -> None:
        self.session = session
        self.ep = ep
        self.binding = session.io_binding()
        self._keep: list[Any] = []  # OrtValues must outlive the binding
        for name, arr in feeds.items():
            if ep.device_type == "cpu":
                self.binding.bind_cpu_input(name, np.ascontiguousarray(arr))
            else:
                val = ort().OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr), "cuda", ep.device_id)
                self._keep.append(val)
                self.binding.bind_ortvalue_input(name, val)
        for out in session.get_outputs():
            self.binding.bind_output(out.name, ep.device_type, ep.device_id)
        if ep.device_type != "cpu":
            self.binding.synchronize_inputs()  # once: the inputs never change between runs
        self.run_options = ort().RunOptions()

    def run(self) -> None:
        """One inference; returns after the device has finished."""
        self.session.run_with_iobinding(self.binding, self.run_options)
        if self.ep.device_type != "cpu":
            self.binding.synchronize_outputs()

    def outputs(self) -> list[np.ndarray]:
        """Copies of the outputs (ORT reuses the bound buffers on the next run)."""
        return [np.array(v.numpy(), copy=True) for v in self.binding.get_outputs()]


def time_loop(fns: Sequence[Callable[[], object]], policy: TimingPolicy, *,
              clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Time callables round-robin (one sample per call) under a stop rule; warm-up is not timed.

    Passing several callables (e.g. sessions of the same kernel with their own weights) rotates
    between them, which is how Hase measures kernels with cold weights. `clock` returns seconds.
    """
    return Timing.from_samples(time_samples(fns, policy, clock=clock))


def time_samples(fns: Sequence[Callable[[], object]], policy: TimingPolicy, *,
                 clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """`time_loop`'s per-run durations in seconds, in order (for statistics over several loops)."""
    for i in range(policy.warmup):
        fns[i % len(fns)]()
    samples: list[float] = []
    start = clock()
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
        if n >= policy.min_runs and (elapsed >= policy.min_time_s or _tight(samples, policy.rel_ci, policy.min_runs)):
            break
    return samples


#: z of a two-sided 95 % interval
Z95 = 1.959964


def median_ci(samples: Sequence[float] | np.ndarray, z: float = Z95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median (95 % by default): the order statistics of ranks
    n/2 ∓ z·√n/2 (binomial, normal approximation; the sample's range below about 10 samples).

        >>> median_ci([1.0, 1.1, 1.0, 1.2, 1.05, 1.0, 1.3, 1.02, 1.01, 1.0, 1.0, 1.04])
        (1.0, 1.2)
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n == 0:
        raise ValueError("no samples")
    half = z * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - half), 1)
    hi = min(math.ceil(n / 2 + 1 + half), n)
    return float(x[lo - 1]), float(x[hi - 1])


def _tight(samples: list[float], rel_ci: float, min_runs: int) -> bool:
    """Whether the median's 95 % interval is within ± rel_ci of it (checked at min_runs, then every 5th run)."""
    n = len(samples)
    if rel_ci <= 0 or (n - min_runs) % 5:
        return False
    lo, hi = median_ci(samples)
    med = float(np.median(samples))
    return med > 0 and (hi - lo) / 2 <= rel_ci * med


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
def gpu_info(device_id: int = 0) -> tuple[str, str]:
    """(GPU name, driver version) of CUDA device `device_id` from `nvidia-smi -i ID`, or ('', '') where there
    is none. nvidia-smi numbers GPUs in PCI bus order and CUDA fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID;
    on machines with one kind of GPU the two agree on what matters here, the name."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "-i", str(device_id), "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return "", ""
    if not out:
        return "", ""
    name, _, driver = out[0].partition(",")
    return name.strip(), driver.strip()


def host_name() -> str:
    """This machine's network name: measurement rows carry it (a fleet's rows say which worker measured them)."""
    return socket.gethostname()


def row_metadata(ep: EPConfig) -> dict[str, Any]:
    """What a measurement row carries beside its figure: `device_metadata`, the measuring host (`host`) and its
    fingerprint's digest (`host_fp`, `hase.runtime.host`)."""
    return {**device_metadata(ep), HOST: host_name(), HOST_FP: host_fingerprint().digest}


def device_metadata(ep: EPConfig) -> dict[str, Any]:
    """The DEVICE_META_COLS every measurement row carries, so a figure is never separated from its settings."""

    gpu, driver = gpu_info(ep.device_id) if ep.ep == "cuda" else ("", "")
    meta = DeviceMeta(device=ep.name, cpu_model=cpu_model(), gpu_name=gpu, gpu_driver=driver,
                      ort_version=ort().__version__, execution_provider=ep.provider,
                      intra_op_threads=ep.intra_op_threads, inter_op_threads=ep.inter_op_threads,
                      opt_level=ep.opt_level, hase_version=__version__)
    return dataclasses.asdict(meta)

