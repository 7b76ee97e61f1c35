"""The canary: a small fixed kernel timed between collect jobs, so a job measured on a busy host is known.

On a shared VM another tenant can slow everything down by up to 2x for minutes, and nothing inside the guest
shows it. Before every full-model job, and before every `every_kernels`-th kernel job, collect times the
canary (a MatMul of two `size` x `size` float matrices, both inputs, pre-bound; the mean of a short block
after a warm-up) and compares it with the run's reference: the quickest check of the run so far. Interference
only adds time, so the quickest check is the quietest host seen; the first check, at collect start, is the
first reference. A check more than `busy_ratio` slower than the reference waits `wait_s` and tries again,
at most `retries` times; if the host stays slow, the job is measured anyway and its rows carry
`host_busy = 1` with the ratio, so training can drop or down-weight them and reports can count them. While the
host stays busy, later checks try once without waiting (the waiting is bounded per busy stretch, not per job).

    >>> canary = Canary(canary_timer(ep, policy), policy)
    >>> canary.check().columns()
    {'canary_ms': 0.61, 'canary_ratio': 1.02, 'host_busy': 0}
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from hase.measure.robust import BlockPolicy, time_blocks
from hase.measure.types import CanaryPolicy, EPConfig, TimingPolicy

__all__ = ["Canary", "CanaryCheck", "canary_model", "canary_timer"]


@dataclass(frozen=True)
class CanaryCheck:
    """One check: the canary's mean run (ms), the reference it is compared with, how many tries and waits."""

    canary_ms: float
    reference_ms: float
    tries: int
    waited_s: float
    busy_ratio: float

    @property
    def ratio(self) -> float:
        """How much slower the canary ran than the quietest check of the run (1.0: as quiet)."""
        return self.canary_ms / self.reference_ms if self.reference_ms > 0 else 1.0

    @property
    def busy(self) -> bool:
        """The host stayed slower than the bound through every try: the job's figures carry its load."""
        return self.ratio > self.busy_ratio

    def columns(self) -> dict[str, Any]:
        """The store's canary columns (`hase.measure.schema.CANARY_COLS`) of the rows of the job it precedes."""
        return {"canary_ms": self.canary_ms, "canary_ratio": self.ratio, "host_busy": int(self.busy)}


class Canary:
    """The canary checks of one collect run on one device config: the reference, the decision, their cost.

    `time_ms` times the canary once and returns its mean run in ms (`canary_timer`; a fixed sequence in tests).
    `spent_s` is the time spent timing the canary, `waited_s` the time spent waiting for a busy host.
    """

    def __init__(self, time_ms: Callable[[], float], policy: CanaryPolicy, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.perf_counter) -> None:
        self.time_ms = time_ms
        self.policy = policy
        self.sleep = sleep
        self.clock = clock
        self.reference_ms: float | None = None
        self.checks = 0
        self.spent_s = 0.0
        self.waited_s = 0.0
        self.last: CanaryCheck | None = None

    def check(self) -> CanaryCheck:
        """Time the canary; while it is over the bound, wait and retry (not while the host stays busy)."""
        retries = 0 if self.last is not None and self.last.busy else self.policy.retries
        waited = 0.0
        for attempt in range(retries + 1):
            t0 = self.clock()
            ms = self.time_ms()
            self.spent_s += self.clock() - t0
            self.checks += 1
            if self.reference_ms is None or ms < self.reference_ms:
                self.reference_ms = ms
            result = CanaryCheck(ms, self.reference_ms, attempt + 1, waited, self.policy.busy_ratio)
            if not result.busy or attempt == retries:
                break
            self.sleep(self.policy.wait_s)
            waited += self.policy.wait_s
            self.waited_s += self.policy.wait_s
        self.last = result
        return result


def canary_model(size: int) -> onnx.ModelProto:
    """MatMul of two [size, size] float inputs (no constant weights: nothing is pre-packed or cached)."""
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [size, size])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="canary")], "canary", [a, b], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="hase")
    m.ir_version = 8
    return m


def canary_timer(ep: EPConfig, policy: CanaryPolicy) -> Callable[[], float]:
    """A function timing the canary on `ep` once: `policy.warmup` runs, then the mean of `policy.runs` (ms).

    The mean, not the median: the canary asks how much of the machine Hase gets, and a busy neighbour that
    takes whole time slices shows in the block's total time but can leave most single runs untouched.
    """
    from hase.measure import runtime

    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((policy.size, policy.size)).astype(np.float32) for n in ("a", "b")}
    session = runtime.make_session(canary_model(policy.size).SerializeToString(), ep, opt_level="disabled")
    runner = runtime.BoundRunner(session, feeds, ep)
    runner.run()
    block = TimingPolicy(warmup=0, min_runs=policy.runs, max_runs=policy.runs, min_time_s=0.0, max_time_s=60.0)
    blocks = BlockPolicy(warmup=policy.warmup, blocks=1, block=block, noise_bound=policy.busy_ratio - 1)
    return lambda: time_blocks(runner.run, blocks).total_s * 1e3 / policy.runs
