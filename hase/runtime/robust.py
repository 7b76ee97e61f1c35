"""Latency measured to survive a noisy host: warm-up, then blocks of timed runs, minimum of the block medians.

On a shared machine another process can slow every run for seconds or minutes at a time (on this project's
VM, the same model moved by up to 2x between passes). Interference only ever adds time, so the quietest
stretch is the best estimate of what the model costs: each block's median rejects single slow runs, and
the minimum over blocks picks the quietest block. The spread is kept beside the statistic (p10/p90 of all
runs, every block median) and a run whose block medians differ by more than `noise_bound` is flagged.

    >>> t = time_blocks(runner.run, BlockPolicy(blocks=5))
    >>> t.latency_ms, t.block_medians_ms, t.noisy
    (61.2, (61.2, 61.9, 75.4, 62.0, 61.5), True)
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hase.errors import HaseError
from hase.runtime.sessions import time_samples

if TYPE_CHECKING:
    from hase.runtime.gate import Gate
from hase.runtime.types import TimingPolicy

STATISTIC = "min of block medians"


@dataclass(frozen=True)
class BlockPolicy:
    """`warmup` untimed runs, then `blocks` blocks timed under the `block` stop rule (its own warm-up is not
    used); block medians more than `noise_bound` (a fraction) apart mark the measurement as noisy."""

    warmup: int = 5
    blocks: int = 5
    block: TimingPolicy = field(default_factory=lambda: TimingPolicy(warmup=0, min_runs=10, max_runs=1000,
                                                                      min_time_s=0.2, max_time_s=3.0))
    noise_bound: float = 0.10

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.blocks < 1 or self.block.min_runs < 1 or self.noise_bound <= 0:
            raise HaseError(f"need warmup >= 0, blocks >= 1, runs per block >= 1 and a noise bound > 0 "
                            f"(got warmup={self.warmup}, blocks={self.blocks}, runs={self.block.min_runs}, "
                            f"noise bound={self.noise_bound})")


@dataclass(frozen=True)
class RobustTiming:
    """Wall time of one run in ms: `latency_ms` = the minimum of the block medians, with the spread.

    `spread` is (largest - smallest block median) / smallest; `noisy` when it is over `noise_bound`.
    """

    latency_ms: float
    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    block_medians_ms: tuple[float, ...]
    runs_per_block: tuple[int, ...]
    n_runs: int
    warmup: int
    spread: float
    noise_bound: float
    total_s: float
    statistic: str = STATISTIC
    gate_waited_s: float = 0.0  # seconds the core gate waited for the cores before the blocks

    @property
    def noisy(self) -> bool:
        """The blocks varied more than the bound: the host was busy, the figure is less certain."""
        return self.spread > self.noise_bound

    @classmethod
    def from_blocks(cls, blocks_s: list[list[float]], warmup: int, noise_bound: float) -> RobustTiming:
        """Summarize per-run durations in seconds, one list per block (none empty)."""
        if not blocks_s or not all(blocks_s):
            raise ValueError("every block needs timing samples")
        medians = [float(np.median(b)) * 1e3 for b in blocks_s]
        runs = np.concatenate([np.asarray(b, dtype=float) for b in blocks_s]) * 1e3
        p10, med, p90 = (float(v) for v in np.percentile(runs, [10, 50, 90]))
        best = min(medians)
        return cls(latency_ms=best, median_ms=med, p10_ms=p10, p90_ms=p90, min_ms=float(runs.min()),
                   block_medians_ms=tuple(medians), runs_per_block=tuple(len(b) for b in blocks_s),
                   n_runs=int(runs.size), warmup=warmup, spread=(max(medians) - best) / best if best > 0 else 0.0,
                   noise_bound=noise_bound, total_s=float(runs.sum()) / 1e3)

    def to_dict(self) -> dict[str, Any]:
        """Every field, plus `noisy`."""
        return {**dataclasses.asdict(self), "noisy": self.noisy}


def time_blocks(fn: Callable[[], object], policy: BlockPolicy, *,
                clock: Callable[[], float] = time.perf_counter, gate: Gate | None = None) -> RobustTiming:
    """Time `fn` the robust way (see the module docstring): warm-up, then `policy.blocks` blocks; with a core `gate`
    (`hase.runtime.gate`), each block starts once the host gives the threads their cores (the seconds waited are
    kept in `gate_waited_s`)."""
    for _ in range(policy.warmup):
        fn()
    block = dataclasses.replace(policy.block, warmup=0)
    blocks, waited = [], 0.0
    for _ in range(policy.blocks):
        if gate is not None:
            waited += gate.wait()
        blocks.append(time_samples([fn], block, clock=clock))
    return dataclasses.replace(RobustTiming.from_blocks(blocks, policy.warmup, policy.noise_bound),
                               gate_waited_s=waited)
