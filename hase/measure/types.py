"""Records of the measure stage: the canary's policy, how hard to measure, and the model files to collect.

Device configurations and timing summaries are ONNX Runtime's own records (`hase.runtime.types`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hase.runtime.types import TimingPolicy


@dataclass(frozen=True)
class CanaryPolicy:
    """When and how the canary (a fixed MatMul and a one-Add session run) checks that the host is as quiet as it was.

    Each check times the MatMul `runs` times and the session run 10 x `runs` times (each after `warmup`) and takes
    the means; a check with either slower than the
    run's reference (its quickest check so far) by more than `busy_ratio` waits `wait_s` and tries again, at
    most `retries` times, before the job is measured anyway and flagged `host_busy`; once a run has waited
    `max_wait_s` in all, it stops waiting and only flags (the collect budget holds on a busy host). Checks run
    before every full-model job and before every `every_kernels`-th kernel job; `enabled = False` turns them off.
    """

    enabled: bool = True
    size: int = 256
    warmup: int = 3
    runs: int = 30
    busy_ratio: float = 1.3
    retries: int = 3
    wait_s: float = 2.0
    every_kernels: int = 50
    max_wait_s: float = 60.0


@dataclass(frozen=True)
class MeasureSettings:
    """How hard to measure: stop rules for kernels and models, profiled runs, cold-weight rotation.

    A full model is timed in `model_blocks` blocks, each under the `model` stop rule (its warm-up runs once,
    before the first block); its latency is the minimum of the block medians (`hase.runtime.robust`), and
    block medians more than `noise_bound` apart flag it noisy. `canary` checks the host between jobs. The full
    models users run (not the sampled one-kernel blocks) are timed again at the end of the run, up to `model_passes`
    passes in all, and keep the minimum (`hase.measure.retime`). The model is then profiled: `profile_warmup` runs,
    then `profile_runs` runs, or as few as `profile_min_runs` once their median's 95 % interval is within
    ± `profile_rel_ci` (`hase.profiling.run.profile_model`).
    """

    kernel: TimingPolicy = field(default_factory=TimingPolicy)
    model: TimingPolicy = field(default_factory=lambda: TimingPolicy(warmup=5, min_runs=10, max_runs=300,
                                                                      min_time_s=0.1, max_time_s=1.0))
    model_blocks: int = 3
    noise_bound: float = 0.10
    model_passes: int = 2
    canary: CanaryPolicy = field(default_factory=CanaryPolicy)
    profile_warmup: int = 3
    profile_runs: int = 10  # the most profiled runs: fewer once the runs' median is tight (`profile_min_runs`, ...)
    profile_min_runs: int | None = None  # None: all `profile_runs`
    profile_rel_ci: float = 0.0
    cold_sessions: int = 8
    cold_max_bytes: int = 256 << 20


@dataclass(frozen=True)
class ModelSource:
    """A model file to collect, with its label and the family reports group it by.

    A model is identified by the sha256 of its file, not by `name`: the store's `model_id` is `name`, or
    `name-<first 8 hex of the hash>` when another model already holds that name (`Store.register_model`).
    """

    name: str
    family: str
    path: Path


@dataclass(frozen=True)
class BandwidthLevel:
    """Memory bandwidth an element-wise kernel reached with its working set in one level of the memory hierarchy:
    `capacity_bytes` is the level's size (0 for DRAM: no bound), `working_set_bytes` what the probe touched."""

    name: str
    capacity_bytes: int
    working_set_bytes: int
    bytes_per_s: float


@dataclass(frozen=True)
class HostPeaks:
    """What a device config's host reaches, measured by real ONNX Runtime kernels (`hase.measure.peaks`): a large
    fp32 MatMul's FLOP/s, an Add's bandwidth per memory level (smallest first) and a tiny op's session.run time.

    A kernel's roofline time is max(flops / gemm_flops_per_s, bytes / bandwidth at its working set's level) plus
    `call_overhead_ms` (standalone runs), or `node_overhead_ms` (a node inside a model: spans;
    `hase.predict.roofline`).
    """

    device: str
    gemm_flops_per_s: float
    levels: tuple[BandwidthLevel, ...]
    call_overhead_ms: float
    measured_at: float = 0.0
    node_overhead_ms: float = 0.0  # what one more node of a graph costs (a chain of tiny Adds): in-model spans

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (what a trained predictor keeps)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostPeaks:
        """The peaks `to_dict` gave; a missing or non-positive figure is a ValueError naming it."""
        try:
            levels = tuple(BandwidthLevel(str(v["name"]), int(v["capacity_bytes"]), int(v["working_set_bytes"]),
                                          float(v["bytes_per_s"])) for v in d["levels"])
            peaks = cls(str(d["device"]), float(d["gemm_flops_per_s"]), levels, float(d["call_overhead_ms"]),
                        float(d.get("measured_at", 0.0)), float(d.get("node_overhead_ms", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"host peaks are incomplete or mistyped ({exc!r})") from None
        if not levels or peaks.gemm_flops_per_s <= 0 or min(peaks.call_overhead_ms, peaks.node_overhead_ms) < 0 \
                or any(v.bytes_per_s <= 0 for v in levels):
            raise ValueError("host peaks need a positive FLOP/s, one or more positive bandwidths and an overhead >= 0")
        return peaks
