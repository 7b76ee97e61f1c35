"""The canary: a small fixed kernel timed between collect jobs, so a job measured on a busy host is known.

On a shared VM another tenant can slow everything down by up to 2x for minutes, and nothing inside the guest
shows it. Before every full-model job, and before every `every_kernels`-th kernel job, collect times the
canary and compares it with the run's reference: the quickest check of the run so far. The canary is two
probes, each the mean of a short block after a warm-up: a MatMul of two `size` x `size` float matrices (both
inputs, pre-bound: compute) and a one-Add session on 16 floats (what every `session.run` costs around its
kernels). They slow down apart: in a collect on this project's VM, stretches of minutes ran the smallest
kernels 1.6x slower (the run's fixed cost) while the MatMul ran 1.2x slower, under the bound; the check's
ratio is the larger of the two probes' ratios, each against its own quickest check. Interference
only adds time, so the quickest check is the quietest host seen; the first check, at collect start, is the
first reference. A check more than `busy_ratio` slower than the reference waits `wait_s` and tries again,
at most `retries` times; if the host stays slow, the job is measured anyway and its rows carry
`host_busy = 1` with the ratio, so training can drop or down-weight them and reports can count them. While the
host stays busy, later checks try once without waiting (the waiting is bounded per busy stretch, not per job),
and once the run has waited `max_wait_s` in all, checks only flag.

Both probes run on the device config's own execution provider, through the IOBinding of timed runs. On a CPU
config they watch the cores. On a CUDA config the MatMul runs on the GPU (inputs and output in device memory),
and `configs/devices_gpu.toml` sizes it at 2048 x 2048 (17 GFLOP: a few hundred µs on an H100 by its data
sheet, not yet measured, against the tens of µs a run costs around it): it watches the GPU (another
process's kernels, clocks lowered for power or heat). The one-Add run does almost no GPU work: its time is the
launching CPU thread's (ORT's run, the kernel launch, the synchronize), so it watches that thread's core.
Neither is a CPU MatMul on a CUDA config.

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

from hase.measure.types import CanaryPolicy
from hase.runtime import sessions
from hase.runtime.robust import BlockPolicy, time_blocks
from hase.runtime.types import EPConfig, TimingPolicy

__all__ = ["Canary", "CanaryCheck", "canary_model", "canary_timer", "overhead_model"]


@dataclass(frozen=True)
class CanaryCheck:
    """One check: the canary's mean run (ms), the reference it is compared with, how many tries and waits."""

    canary_ms: float
    reference_ms: float
    tries: int
    waited_s: float
    busy_ratio: float
    overhead_ratio: float = 1.0  # the per-run probe against its quickest check (1.0 without that probe)

    @property
    def ratio(self) -> float:
        """How much slower the canary ran than the quietest check of the run (1.0: as quiet): the slower of its
        MatMul (`canary_ms` against `reference_ms`) and its per-run probe."""
        compute = self.canary_ms / self.reference_ms if self.reference_ms > 0 else 1.0
        return max(compute, self.overhead_ratio)

    @property
    def busy(self) -> bool:
        """The host stayed slower than the bound through every try: the job's figures carry its load."""
        return self.ratio > self.busy_ratio

    def columns(self) -> dict[str, Any]:
        """The store's canary columns (`hase.measure.schema.CANARY_COLS`) of the rows of the job it precedes."""
        return {"canary_ms": self.canary_ms, "canary_ratio": self.ratio, "host_busy": int(self.busy)}


class Canary:
    """The canary checks of one collect run on one device config: the reference, the decision, their cost.

    `time_ms` times the canary once and returns its MatMul's mean run in ms, or that and the per-run probe's
    (`canary_timer`; a fixed sequence in tests). `spent_s` is the time spent timing the canary, `waited_s` the
    time spent waiting for a busy host.
    """

    def __init__(self, time_ms: Callable[[], float | tuple[float, float]], policy: CanaryPolicy, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.perf_counter) -> None:
        self.time_ms = time_ms
        self.policy = policy
        self.sleep = sleep
        self.clock = clock
        self.reference_ms: float | None = None
        self.overhead_reference_ms: float | None = None
        self.checks = 0
        self.spent_s = 0.0
        self.waited_s = 0.0
        self.last: CanaryCheck | None = None

    def check(self) -> CanaryCheck:
        """Time the canary; while it is over the bound, wait and retry (not while the host stays busy)."""
        stay_busy = self.last is not None and self.last.busy
        retries = 0 if stay_busy or self.waited_s >= self.policy.max_wait_s else self.policy.retries
        waited = 0.0
        for attempt in range(retries + 1):
            t0 = self.clock()
            timed = self.time_ms()
            self.spent_s += self.clock() - t0
            self.checks += 1
            ms, overhead = timed if isinstance(timed, tuple) else (timed, None)
            if self.reference_ms is None or ms < self.reference_ms:
                self.reference_ms = ms
            overhead_ratio = 1.0
            if overhead is not None:
                if self.overhead_reference_ms is None or overhead < self.overhead_reference_ms:
                    self.overhead_reference_ms = overhead
                overhead_ratio = overhead / self.overhead_reference_ms if self.overhead_reference_ms > 0 else 1.0
            result = CanaryCheck(ms, self.reference_ms, attempt + 1, waited, self.policy.busy_ratio, overhead_ratio)
            if not result.busy or attempt == retries:
                break
            self.sleep(self.policy.wait_s)
            waited += self.policy.wait_s
            self.waited_s += self.policy.wait_s
        self.last = result
        return result


def _binary_model(op: str, shape: list[int], name: str) -> onnx.ModelProto:
    """One `op` of two float inputs of `shape` (no constant weights: nothing is pre-packed or cached)."""
    a, b, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("a", "b", "y"))
    g = helper.make_graph([helper.make_node(op, ["a", "b"], ["y"], name=name)], name, [a, b], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="hase")
    m.ir_version = 8
    return m


def canary_model(size: int) -> onnx.ModelProto:
    """MatMul of two [size, size] float inputs: the compute probe."""
    return _binary_model("MatMul", [size, size], "canary")


def overhead_model() -> onnx.ModelProto:
    """One Add of two [1, 16] float inputs: a session run that is almost all of `session.run`'s own cost."""
    return _binary_model("Add", [1, 16], "canary_overhead")


#: runs of the per-run probe for each MatMul run: ~30 us each, so its block lasts about as long as the MatMul's
OVERHEAD_RUNS_PER_RUN = 10


def canary_timer(ep: EPConfig, policy: CanaryPolicy) -> Callable[[], tuple[float, float]]:
    """A function timing the canary's two probes on `ep` once: the MatMul's mean run over `policy.runs` and the
    per-run probe's over `policy.runs * OVERHEAD_RUNS_PER_RUN`, each after `policy.warmup` runs (ms, ms).

    The mean, not the median: the canary asks how much of the machine Hase gets, and a busy neighbour that
    takes whole time slices shows in the block's total time but can leave most single runs untouched. Both
    probes are sessions on `ep` itself: on CUDA the MatMul watches the GPU and the per-run probe the launching
    CPU thread (module docstring).
    """
    def timer(model: onnx.ModelProto, shape: tuple[int, int], runs: int) -> Callable[[], float]:
        rng = np.random.default_rng(0)
        feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in ("a", "b")}
        session = sessions.make_session(model.SerializeToString(), ep, opt_level="disabled")
        runner = sessions.BoundRunner(session, feeds, ep)
        runner.run()
        block = TimingPolicy(warmup=0, min_runs=runs, max_runs=runs, min_time_s=0.0, max_time_s=60.0)
        blocks = BlockPolicy(warmup=policy.warmup, blocks=1, block=block, noise_bound=policy.busy_ratio - 1)
        return lambda: time_blocks(runner.run, blocks).total_s * 1e3 / runs

    matmul = timer(canary_model(policy.size), (policy.size, policy.size), policy.runs)
    overhead = timer(overhead_model(), (1, 16), policy.runs * OVERHEAD_RUNS_PER_RUN)
    return lambda: (matmul(), overhead())
