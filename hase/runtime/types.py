"""Records of ONNX Runtime itself that every stage shares: device configurations, the metadata every figure
carries, stop rules and timing summaries.

They import only numpy and the standard library (never onnxruntime), so the CLI, profiling, the pipeline and
the predictor can name a device configuration without loading ONNX Runtime.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from hase.errors import HaseError

OPT_LEVELS = ("disabled", "basic", "extended", "all")
EP_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


@dataclass(frozen=True)
class EPConfig:
    """A device configuration: which execution provider runs, with which threads and graph optimizations."""

    name: str = "cpu"
    ep: str = "cpu"
    intra_op_threads: int = 1
    inter_op_threads: int = 1
    opt_level: str = "all"  # ONNX Runtime's default level
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
        """ONNX Runtime's name of the execution provider, e.g. `CPUExecutionProvider`."""
        return EP_PROVIDERS[self.ep]

    @property
    def device_type(self) -> str:
        """Where IOBinding buffers live for this provider (`cpu` or `cuda`)."""
        return "cuda" if self.ep == "cuda" else "cpu"


@dataclass(frozen=True)
class DeviceMeta:
    """The settings every measurement row carries beside its figure, so a figure never loses its context."""

    device: str
    cpu_model: str
    gpu_name: str
    gpu_driver: str
    ort_version: str
    execution_provider: str
    intra_op_threads: int
    inter_op_threads: int
    opt_level: str
    hase_version: str


#: The device-metadata columns of every measurement table, in store order.
DEVICE_META_COLS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(DeviceMeta))
HOST = "host"  # the measuring machine's name, on every measurement row beside DEVICE_META_COLS (not a setting)
HOST_FP = "host_fp"  # the measuring machine's fingerprint digest (`hase.runtime.host`), beside HOST


@dataclass(frozen=True)
class TimingPolicy:
    """Stop rule of a timing loop: warm-up runs, then runs until both `min_runs` and `min_time_s` are met
    or `max_runs` / `max_time_s` is hit (`hase.measure.config` checks a config's values against their ranges).

    `rel_ci` > 0 also stops the loop once `min_runs` are met and the median's 95 % confidence interval
    (`hase.runtime.sessions.median_ci`) is within ± `rel_ci` of the median, before `min_time_s`: a quiet, tight
    kernel is not repeated for the time floor's sake. 0 (the default) keeps the time floor."""

    warmup: int = 5
    min_runs: int = 10
    max_runs: int = 200
    min_time_s: float = 0.05
    max_time_s: float = 1.0
    rel_ci: float = 0.0


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
        """Summarize per-run durations given in seconds; no samples is a ValueError."""
        a = np.asarray(samples_s, dtype=float) * 1e3
        if a.size == 0:
            raise ValueError("no timing samples")
        p10, med, p90 = np.percentile(a, [10, 50, 90])
        return cls(float(med), float(p10), float(p90), float(a.mean()), float(a.min()), int(a.size),
                   float(a.sum() / 1e3))
