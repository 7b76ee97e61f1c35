"""hase.measure.canary and its use in collect: the host checked between jobs, busy jobs flagged, robust columns."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from collect_cases import FAST, relu_model

from hase.measure import collect as coll
from hase.measure.canary import Canary, canary_timer
from hase.measure.config import load_collect_config
from hase.measure.store import Store
from hase.measure.types import CanaryPolicy
from hase.predict import dataset
from hase.runtime.types import EPConfig

POLICY = CanaryPolicy(busy_ratio=1.3, retries=2, wait_s=1.5, every_kernels=2)


def fake(times: list[float] | list[tuple[float, float]], policy: CanaryPolicy = POLICY) -> tuple[Canary, list[float]]:
    """A canary whose checks take the given times (ms), in order, and whose sleeps are recorded, not slept."""
    it = iter(times)
    slept: list[float] = []
    return Canary(lambda: next(it), policy, sleep=slept.append), slept


def test_first_check_is_the_reference_and_a_quiet_host_is_not_busy():
    canary, slept = fake([1.0, 1.1, 0.9, 1.15])
    first = canary.check()
    assert (first.reference_ms, first.ratio, first.busy, first.tries) == (1.0, 1.0, False, 1)
    assert canary.check().ratio == pytest.approx(1.1) and not slept
    assert canary.check().ratio == 1.0 and canary.reference_ms == 0.9  # a quicker check is the new reference
    last = canary.check()
    assert last.ratio == pytest.approx(1.15 / 0.9) and last.columns() == {
        "canary_ms": 1.15, "canary_ratio": pytest.approx(1.15 / 0.9), "host_busy": 0}


def test_a_slow_host_is_waited_for_then_the_job_goes_on():
    canary, slept = fake([1.0, 2.0, 1.1])  # busy, then quiet again after one wait
    canary.check()
    check = canary.check()
    assert (check.tries, check.waited_s, check.busy, check.canary_ms) == (2, 1.5, False, 1.1)
    assert slept == [1.5] and canary.checks == 3


def test_a_host_that_stays_slow_flags_the_job_and_the_next_checks_do_not_wait():
    canary, slept = fake([1.0, 2.0, 1.9, 2.1, 1.8, 1.0, 1.6, 1.0])
    canary.check()
    busy = canary.check()  # 1 try + 2 retries, all slow
    assert (busy.tries, busy.busy, busy.columns()["host_busy"]) == (3, True, 1) and slept == [1.5, 1.5]
    still = canary.check()  # the host stayed busy: one try, no wait
    assert (still.tries, still.busy) == (1, True) and slept == [1.5, 1.5]
    assert not canary.check().busy  # quiet again (1.0)
    again = canary.check()  # slow again: retries resume, and a quiet retry clears it
    assert (again.tries, again.busy, again.canary_ms) == (2, False, 1.0) and canary.waited_s == 4.5


def test_waiting_stops_after_max_wait_s_and_checks_only_flag():
    policy = CanaryPolicy(busy_ratio=1.3, retries=2, wait_s=1.5, max_wait_s=3.0)
    canary, slept = fake([1.0, 2.0, 1.0, 2.0, 2.0, 2.0, 1.0, 2.0], policy)
    canary.check()
    assert not canary.check().busy and slept == [1.5]  # quiet after one wait
    assert canary.check().busy and slept == [1.5, 1.5, 1.5]  # busy through 2 retries: 4.5 s waited in all
    assert not canary.check().busy  # quiet again
    late = canary.check()  # busy, but the run has waited max_wait_s: one try, flagged, no wait
    assert (late.busy, late.tries) == (True, 1) and slept == [1.5, 1.5, 1.5] and canary.waited_s == 4.5


def test_the_real_canary_times_a_matmul_and_a_session_run():
    timer = canary_timer(EPConfig(name="cpu-test"), CanaryPolicy(runs=5, warmup=1, size=64))
    times = [timer() for _ in range(3)]
    assert all(len(t) == 2 and 0 < t[0] < 100 and 0 < t[1] < 100 for t in times)


def test_a_slow_session_run_alone_makes_the_host_busy():
    """Stretches where the smallest kernels ran 1.6x slower while the MatMul ran 1.2x slower (seen in a collect
    here): the per-run probe's own ratio decides; canary_ms stays the MatMul's."""
    canary, slept = fake([(1.0, 0.030), (1.2, 0.048), (1.2, 0.047), (1.2, 0.049), (1.0, 0.031)])
    canary.check()
    check = canary.check()
    assert check.busy and check.ratio == pytest.approx(0.049 / 0.030) and check.canary_ms == 1.2 and check.tries == 3
    assert check.columns()["canary_ratio"] == pytest.approx(0.049 / 0.030) and check.columns()["host_busy"] == 1
    assert slept == [1.5, 1.5] and not canary.check().busy and canary.overhead_reference_ms == 0.030


@pytest.fixture()
def models(tmp_path: Path) -> list[coll.ModelSource]:
    paths = []
    for n in (16, 32):
        p = tmp_path / f"relu{n}.onnx"
        onnx.save(relu_model(n), p)
        paths.append(coll.ModelSource(p.stem, "relus", p))
    return paths


def collect_with(tmp_path: Path, models: list[coll.ModelSource], extra: str = ""
                 ) -> tuple[coll.CollectReport, Path]:
    cfg_path = tmp_path / "devices.toml"
    cfg_path.write_text(FAST + extra)
    store_path = tmp_path / "hase.sqlite"
    with Store(store_path) as store:
        report = coll.collect(models, load_collect_config(cfg_path), store)
    return report, store_path


def test_collect_records_robust_and_canary_columns(tmp_path, models):
    report, store_path = collect_with(tmp_path, models, "[robust]\nblocks = 4\n")
    with Store(store_path, readonly=True) as store:
        mm, km = store.table("model_measurements"), store.table("kernel_measurements")
    assert len(mm) == 2 and (mm["n_blocks"] == 4).all()
    first = mm["first_latency_ms"].fillna(mm["latency_ms"])  # the first pass's (later passes may go lower)
    assert (first <= mm["median_ms"] + 1e-9).all() and (first >= mm["min_ms"]).all()
    assert (mm["latency_ms"] <= first).all() and (mm["n_passes"] == 2).all()
    assert ((mm["block_spread"] > 0.10) == (mm["noisy"] == 1)).all()
    for t in (mm, km):
        assert t["canary_ms"].gt(0).all() and t["canary_ratio"].ge(1.0).all()
        assert (t["host_busy"] == (t["canary_ratio"] > 1.3).astype(int)).all()
    # reference + 1 check per model (+ retries on a busy host); timing cost is counted and small per check
    assert report.canary_checks >= 3 and 0 < report.canary_s / report.canary_checks < 1.0
    data = dataset.load_device_data(store_path)
    assert sorted(data.models[dataset.MEASURED_MS]) == sorted(mm["latency_ms"])  # the robust latency is the truth
    assert data.models[dataset.HOST_BUSY].sum() == mm["host_busy"].sum()


def test_collect_flags_jobs_on_a_host_that_stays_busy(tmp_path, models, monkeypatch):
    """The canary's decision inside collect, with given canary times: quiet at the start, slow from the second
    model's check on (its retries too): that model's row and span job are flagged, and the report names it."""
    times: Iterator[float] = iter([1.0, 1.05] + [2.0] * 50)
    monkeypatch.setattr(coll, "canary_timer", lambda ep, policy: lambda: next(times))
    report, store_path = collect_with(tmp_path, models, "[canary]\nwait_s = 0.0\nretries = 2\n")
    with Store(store_path, readonly=True) as store:
        mm = store.table("model_measurements").set_index("model_id")
    assert mm.loc["relu16", "host_busy"] == 0 and mm.loc["relu16", "canary_ratio"] == pytest.approx(1.05)
    assert mm.loc["relu32", "host_busy"] == 1 and mm.loc["relu32", "canary_ratio"] == pytest.approx(2.0)
    # + 1: the check at the end before a second try, still busy: relu32 stays flagged, nothing is measured again
    assert ("model relu32", 2.0) in report.busy_jobs and report.canary_checks == 2 + 3 + 1
    assert report.remeasured == []
    from hase.commands.collect import noise_lines, noise_rows

    assert "host busy (canary slower than its reference) during" in noise_lines(report)[0]
    assert "model relu32 (2.00x)" in noise_lines(report)[0]
    assert dict(noise_rows(report))["jobs measured on a busy host (flagged host_busy)"] == str(len(report.busy_jobs))


def test_collect_measures_a_flagged_job_again_once_the_host_is_quiet(tmp_path, models, monkeypatch):
    """Busy during the second model (its check and retries), quiet again at the end of the run: the flagged model is
    measured once more, its row replaced by a clean one, and the report no longer lists it as busy."""
    times: Iterator[float] = iter([1.0, 1.05, 2.0, 2.0, 2.0] + [1.02] * 50)
    monkeypatch.setattr(coll, "canary_timer", lambda ep, policy: lambda: next(times))
    report, store_path = collect_with(tmp_path, models, "[canary]\nwait_s = 0.0\nretries = 2\n")
    with Store(store_path, readonly=True) as store:
        mm = store.table("model_measurements").set_index("model_id")
        spans = store.table("node_spans")
    assert mm.loc["relu32", "host_busy"] == 0 and mm.loc["relu32", "canary_ratio"] == pytest.approx(1.02)
    assert len(mm) == 2 and (spans["model_id"] == "relu32").sum() == 1  # replaced, not added
    assert report.remeasured == ["model relu32"] and report.busy_jobs == []


def test_disabled_canary_leaves_the_columns_empty(tmp_path, models):
    report, store_path = collect_with(tmp_path, models[:1], "[canary]\nenabled = false\n")
    with Store(store_path, readonly=True) as store:
        mm = store.table("model_measurements")
    assert mm["canary_ratio"].isna().all() and report.canary_checks == 0 and mm["latency_ms"].notna().all()


def _pinnable() -> int | None:
    """A core this process may run on, where pinning is available (Linux)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    return max(os.sched_getaffinity(0))


@pytest.mark.slow
def test_a_busy_loop_on_the_same_core_raises_the_canary_ratio():
    """Real load: a busy-loop process pinned to this process's core takes about half of it, and the canary
    (a mean over its block, so whole time slices taken by the neighbour count) sees it."""
    core = _pinnable()
    if core is None:
        pytest.skip("os.sched_setaffinity is not available on this platform")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        policy = CanaryPolicy(runs=30, retries=0)
        canary = Canary(canary_timer(EPConfig(name="cpu-test"), policy), policy)
        quiet = min(canary.check().canary_ms for _ in range(5))
        busy = subprocess.Popen([sys.executable, "-c",
                                 f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"])
        try:
            time.sleep(0.3)
            loaded = [canary.check() for _ in range(5)]
        finally:
            busy.kill()
            busy.wait()
    finally:
        os.sched_setaffinity(0, before)
    assert canary.reference_ms is not None and canary.reference_ms <= quiet
    # at least one check sees it: a check (~10 ms) can fall inside one scheduler slice of either process, and a
    # host already loaded by something else makes the quiet reference slow too (seen: ratios 1.58, 1.28, 1.29, ...)
    assert any(c.busy for c in loaded), [round(c.ratio, 2) for c in loaded]
