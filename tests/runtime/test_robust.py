"""hase.runtime.robust: blocks of timed runs, the minimum of the block medians, the spread, the noise flag."""
from __future__ import annotations

import itertools

import onnx
import pytest
from conftest import conv_bn_relu_model

from hase.errors import HaseError
from hase.measure.model import measure_latency
from hase.runtime.robust import STATISTIC, BlockPolicy, RobustTiming, time_blocks
from hase.runtime.types import EPConfig, TimingPolicy


class FakeClock:
    """A clock that advances by the next duration of a script each time a timed call runs."""

    def __init__(self, durations_s: list[float]) -> None:
        self.now = 0.0
        self.durations = iter(durations_s)

    def __call__(self) -> float:
        return self.now

    def run(self) -> None:
        self.now += next(self.durations)


def policy(blocks: int, runs: int, warmup: int = 2, bound: float = 0.10) -> BlockPolicy:
    return BlockPolicy(warmup=warmup, blocks=blocks, noise_bound=bound,
                       block=TimingPolicy(warmup=99, min_runs=runs, max_runs=runs, min_time_s=0, max_time_s=1e9))


def test_minimum_of_block_medians_with_the_spread():
    # warm-up (not timed), then 3 blocks of 3 runs; the second block ran on a busy host
    warmup, quiet, busy, quiet_again = [9.0, 9.0], [0.010, 0.011, 0.050], [0.020, 0.021, 0.019], [0.012, 0.010, 0.011]
    clock = FakeClock([*warmup, *quiet, *busy, *quiet_again])
    t = time_blocks(clock.run, policy(3, 3), clock=clock)
    assert t.block_medians_ms == pytest.approx((11.0, 20.0, 11.0))
    assert t.latency_ms == pytest.approx(11.0) and t.statistic == STATISTIC
    assert t.n_runs == 9 and t.runs_per_block == (3, 3, 3) and t.warmup == 2  # the block's own warm-up unused
    assert t.min_ms == pytest.approx(10.0) and t.median_ms == pytest.approx(12.0)
    assert t.spread == pytest.approx(9 / 11) and t.noisy
    d = t.to_dict()
    assert d["noisy"] is True and d["latency_ms"] == t.latency_ms and d["block_medians_ms"] == t.block_medians_ms


def test_quiet_blocks_are_not_noisy():
    clock = FakeClock(list(itertools.repeat(0.005, 2 + 4 * 5)))
    t = time_blocks(clock.run, policy(4, 5), clock=clock)
    assert t.latency_ms == pytest.approx(5.0) and t.spread == pytest.approx(0) and not t.noisy
    assert t.p10_ms == pytest.approx(5.0) and t.p90_ms == pytest.approx(5.0)


def test_bad_policies_and_empty_blocks_are_refused():
    for kwargs in ({"blocks": 0}, {"warmup": -1}, {"noise_bound": 0}):
        with pytest.raises(HaseError, match="need warmup >= 0, blocks >= 1"):
            BlockPolicy(**kwargs)
    with pytest.raises(ValueError, match="every block needs timing samples"):
        RobustTiming.from_blocks([[0.001], []], 0, 0.1)


def test_measure_latency_runs_the_real_model(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(c=8, hw=16), p)
    t = measure_latency(p, EPConfig(), policy=BlockPolicy(warmup=1, blocks=2, block=TimingPolicy(
        warmup=0, min_runs=3, max_runs=5, min_time_s=0, max_time_s=1)))
    assert len(t.block_medians_ms) == 2 and 6 <= t.n_runs <= 10
    assert 0 < t.min_ms <= t.latency_ms <= max(t.block_medians_ms) and t.p10_ms <= t.median_ms <= t.p90_ms


class CountingGate:
    """A core gate that counts its waits (composition only: the real gate is in test_gate.py)."""

    def __init__(self) -> None:
        self.waits = 0

    def wait(self) -> float:
        self.waits += 1
        return 0.5

    def ready(self) -> bool:
        return True


def test_each_block_waits_for_the_gate_and_the_wait_is_kept():
    warmup, quick1, quick2 = [9.0, 9.0], [0.010, 0.010], [0.011, 0.011]
    clock = FakeClock([*warmup, *quick1, *quick2])
    gate = CountingGate()
    t = time_blocks(clock.run, policy(2, 2), clock=clock, gate=gate)
    assert t.block_medians_ms == pytest.approx((10.0, 11.0))
    assert (gate.waits, t.gate_waited_s) == (2, 1.0)
    assert time_blocks(FakeClock([0.01] * 4).run, policy(2, 2, warmup=0)).gate_waited_s == 0.0
