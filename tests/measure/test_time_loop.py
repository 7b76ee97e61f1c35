"""hase.runtime.sessions.time_loop: warm-up, round-robin, the stop rule and the summary, on real ORT sessions.

The stop rule and the summary are checked with a fake clock that moves only when a (real) run says how
long it took, so the expected sample count and statistics are exact; no test asserts a timing's magnitude.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from hase.runtime import sessions
from hase.runtime.types import DEVICE_META_COLS, EPConfig, Timing, TimingPolicy

EP = EPConfig()


def add_one_session() -> tuple[Any, dict[str, np.ndarray]]:
    """A real ORT session of y = x + 1 on a (4, 4) float tensor, with its feeds."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    g = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "add_one",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], initializer=[one])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return sessions.make_session(m.SerializeToString(), EP), {"x": np.arange(16, dtype=np.float32).reshape(4, 4)}


class Clock:
    """A fake clock (seconds) that moves only when a timed callable says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Counted:
    """Runs a real bound ORT session, records in `log` which runner ran, and advances `clock` by the next duration."""

    def __init__(self, runner: sessions.BoundRunner, tag: int, log: list[int], clock: Clock | None,
                 durations_s: Iterator[float] | None) -> None:
        self.runner, self.tag, self.log, self.clock, self.durations_s = runner, tag, log, clock, durations_s

    def __call__(self) -> None:
        self.runner.run()
        self.log.append(self.tag)
        if self.clock is not None and self.durations_s is not None:
            self.clock.now += next(self.durations_s)


def runners(n: int, log: list[int], clock: Clock | None = None,
            durations_s: Iterator[float] | None = None) -> list[Counted]:
    """n independent sessions of the same model, each wrapped in a Counted sharing `log`, `clock` and durations."""
    out = []
    for tag in range(n):
        sess, feeds = add_one_session()
        out.append(Counted(sessions.BoundRunner(sess, feeds, EP), tag, log, clock, durations_s))
    return out


def test_bound_runner_computes_the_model():
    sess, feeds = add_one_session()
    r = sessions.BoundRunner(sess, feeds, EP)
    r.run()
    np.testing.assert_array_equal(r.outputs()[0], feeds["x"] + 1)


def test_min_runs_with_no_time_floor_stops_at_min_runs_after_untimed_warmup():
    log: list[int] = []
    policy = TimingPolicy(warmup=3, min_runs=7, max_runs=100, min_time_s=0.0, max_time_s=60.0)
    t = sessions.time_loop(runners(1, log), policy)
    assert t.n == 7 and len(log) == 3 + 7


def test_max_runs_caps_the_loop_when_min_time_is_not_reached():
    log: list[int] = []
    policy = TimingPolicy(warmup=0, min_runs=1, max_runs=12, min_time_s=3600.0, max_time_s=3600.0)
    t = sessions.time_loop(runners(1, log), policy)
    assert t.n == 12 and len(log) == 12


def test_several_callables_rotate_round_robin_from_the_warmup_on():
    log: list[int] = []
    policy = TimingPolicy(warmup=4, min_runs=9, max_runs=9, min_time_s=0.0, max_time_s=60.0)
    t = sessions.time_loop(runners(3, log), policy)
    assert log == [0, 1, 2, 0] + [i % 3 for i in range(9)]  # the timed loop restarts at the first callable
    assert t.n == 9


def test_time_budget_stops_the_loop_before_max_runs():
    log: list[int] = []
    clock = Clock()
    fns = runners(1, log, clock, itertools.repeat(1 / 64))  # every run "takes" 1/64 s (exact in binary)
    policy = TimingPolicy(warmup=2, min_runs=1000, max_runs=1000, min_time_s=0.0, max_time_s=8 / 64)
    t = sessions.time_loop(fns, policy, clock=clock)
    assert t.n == 8 and len(log) == 2 + 8  # the 8th timed run reaches the budget (warm-up runs do not count)
    assert t.median_ms == pytest.approx(1e3 / 64) and t.total_s == pytest.approx(8 / 64)


def test_min_time_keeps_running_past_min_runs():
    log: list[int] = []
    clock = Clock()
    fns = runners(1, log, clock, itertools.repeat(1 / 1024))
    policy = TimingPolicy(warmup=0, min_runs=2, max_runs=1000, min_time_s=48 / 1024, max_time_s=10.0)
    t = sessions.time_loop(fns, policy, clock=clock)
    assert t.n == 48 and len(log) == 48  # 2 runs were enough by count; 48 runs meet the time floor


def test_summary_matches_the_samples():
    durations_ms = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0]
    log: list[int] = []
    clock = Clock()
    warmup_ms = [100.0]  # a slow first run, never part of the summary
    fns = runners(2, log, clock, iter([d / 1e3 for d in warmup_ms + durations_ms]))
    n = len(durations_ms)
    t = sessions.time_loop(fns, TimingPolicy(warmup=1, min_runs=n, max_runs=n, min_time_s=0.0), clock=clock)
    p10, med, p90 = np.percentile(durations_ms, [10, 50, 90])
    assert t.n == n
    assert (t.median_ms, t.p10_ms, t.p90_ms) == pytest.approx((med, p10, p90))
    assert t.min_ms == pytest.approx(1.0) and t.mean_ms == pytest.approx(np.mean(durations_ms))
    assert t.total_s == pytest.approx(sum(durations_ms) / 1e3)


def test_real_clock_timing_is_consistent():
    log: list[int] = []
    t = sessions.time_loop(runners(2, log), TimingPolicy(warmup=2, min_runs=20, max_runs=50, min_time_s=0.0))
    assert 20 <= t.n <= 50 and len(log) == 2 + t.n
    assert 0 < t.min_ms <= t.p10_ms <= t.median_ms <= t.p90_ms
    assert t.total_s == pytest.approx(t.mean_ms * t.n / 1e3)


def test_timing_from_samples_rejects_no_samples():
    with pytest.raises(ValueError, match="no timing samples"):
        Timing.from_samples([])


def test_device_metadata_has_the_store_columns():
    meta = sessions.device_metadata(EPConfig(name="cpu-x", intra_op_threads=2))
    assert tuple(meta) == DEVICE_META_COLS
    assert meta["device"] == "cpu-x" and meta["intra_op_threads"] == 2
    assert meta["execution_provider"] == "CPUExecutionProvider" and meta["gpu_name"] == ""


def test_median_ci_is_the_order_statistics_around_the_median():
    samples = [float(v) for v in range(1, 16)]  # 15 samples: ranks 7.5 -/+ 1.96 * sqrt(15) / 2 -> 3 and 13
    assert sessions.median_ci(samples) == (3.0, 13.0)
    assert sessions.median_ci(samples[::-1]) == (3.0, 13.0)  # order does not matter
    assert sessions.median_ci([5.0, 1.0, 9.0]) == (1.0, 9.0)  # a few samples: their range
    with pytest.raises(ValueError, match="no samples"):
        sessions.median_ci([])


def test_a_tight_median_stops_the_loop_before_the_time_floor():
    log: list[int] = []
    clock = Clock()
    fns = runners(1, log, clock, itertools.repeat(1 / 1024))  # every run the same: the interval is one point
    policy = TimingPolicy(warmup=0, min_runs=10, max_runs=1000, min_time_s=1.0, max_time_s=10.0, rel_ci=0.02)
    t = sessions.time_loop(fns, policy, clock=clock)
    assert t.n == 10  # without rel_ci: 1024 runs to reach min_time_s


def test_a_wide_median_runs_on_to_the_time_floor():
    log: list[int] = []
    clock = Clock()
    fns = runners(1, log, clock, itertools.cycle([1 / 1024, 2 / 1024]))  # half the runs twice as slow
    policy = TimingPolicy(warmup=0, min_runs=10, max_runs=1000, min_time_s=30 / 1024, max_time_s=10.0, rel_ci=0.02)
    t = sessions.time_loop(fns, policy, clock=clock)
    assert t.n == 20  # the interval spans 1 to 2 ms: only the time floor (30 ms) stops it, at 20 runs


def test_the_interval_is_checked_at_min_runs_then_every_fifth_run():
    log: list[int] = []
    clock = Clock()
    # 10 scattered runs, then identical ones: the interval narrows as the identical ones outnumber the others
    durations = itertools.chain([k / 1024 for k in (1, 9, 2, 8, 3, 7, 4, 6, 5, 10)], itertools.repeat(5 / 1024))
    policy = TimingPolicy(warmup=0, min_runs=10, max_runs=1000, min_time_s=10.0, max_time_s=10.0, rel_ci=0.05)
    t = sessions.time_loop(runners(1, log, clock, durations), policy, clock=clock)
    assert t.n > 10 and (t.n - 10) % 5 == 0
    lo, hi = sessions.median_ci([d * 1e-3 for d in [1, 9, 2, 8, 3, 7, 4, 6, 5, 10] + [5] * (t.n - 10)])
    assert (hi - lo) / 2 <= 0.05 * 5e-3
