"""Sampled hardware time (ORT profiler / OpenVINO PERF_COUNT on every k-th batch, or blocks of batches): real runs
on the CPU, no timing assertions."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hase.cli import main
from hase.errors import HaseError
from hase.pipeline import (
    DummyModel,
    ExecutorSpec,
    PipelineSpec,
    analysis,
    data_parallel_stage,
    pipeline_from_dict,
    run_pipeline,
    schema,
    single_stage,
    summarize,
    summary_dict,
    write_matmul_chain,
)
from hase.pipeline.devices import parse_device
from hase.pipeline.executors import ExecutorOptions
from hase.pipeline.ort_backend import OrtExecutor, by_run_index

K, BATCHES = 3, 9


def sampled_spec() -> PipelineSpec:
    """prep (ORT) -> embed (data-parallel: ORT + OpenVINO) -> classify (ORT), hardware time every 3rd batch."""
    stages = (
        single_stage("prep", "cpu", dummy=DummyModel(32, 2)),
        data_parallel_stage("embed", [ExecutorSpec("cpu", dummy=DummyModel(32, 2, seed=1)),
                                      ExecutorSpec("ov:CPU", dummy=DummyModel(32, 2, seed=2))]),
        single_stage("classify", "cpu", dummy=DummyModel(8, 1, seed=3)),
    )
    return PipelineSpec(name="sampled", batch=8, features=32, hw_sample_every=K, hw_sample_block=1,
                        hw_sample_warmup=0, stages=stages)


@pytest.fixture(scope="module")
def run():
    return run_pipeline(sampled_spec(), BATCHES)


def _infer(run) -> pd.DataFrame:
    return run.events[run.events[schema.KIND] == schema.INFER]


def test_exactly_the_sampled_batches_have_hardware_time(run):
    ev = _infer(run)
    assert len(ev) == 4 * BATCHES  # prep, embed executors 0 (ORT) and 1 (OpenVINO), classify
    assert set(ev[schema.DEVICE]) == {"cpu", "ov:CPU"}
    for _, track in ev.groupby(schema.TRACK):
        has = track[schema.HW_NS].notna()
        assert sorted(track.loc[has, schema.BATCH]) == [0, 3, 6]
        assert (track.loc[has, schema.HW_NS] > 0).all() and track.loc[has, schema.MARSHAL_NS].notna().all()
        assert track.loc[~has, schema.MARSHAL_NS].isna().all()


def test_coverage_is_reported(run):
    s = summarize(run)
    assert s.hw_coverage == pytest.approx(1 / 3)
    assert s.tracks[schema.HW_COVERAGE].tolist() == pytest.approx([1 / 3] * 4)
    devices = s.devices.set_index(schema.DEVICE)
    assert devices.at["cpu", schema.HW_COVERAGE] == pytest.approx(1 / 3)
    assert devices.at["ov:CPU", schema.HW_COVERAGE] == pytest.approx(1 / 3)
    assert devices.at["host", schema.HW_COVERAGE] == 0  # partition / merge never have hardware time
    assert s.stages.set_index(schema.STAGE).at["prep", schema.HW_COVERAGE] == pytest.approx(1 / 3)
    out = summary_dict(s)
    assert out["hw_coverage"] == pytest.approx(s.hw_coverage)
    assert out["metadata"]["hw_sample_every"] == K and out["metadata"]["hw_profile"] is True


def test_utilization_from_sampled_runs_stays_within_bounds(run):
    s = summarize(run)
    t = s.tracks
    assert (t[schema.HW_UTIL] > 0).all()
    assert (t[schema.HW_UTIL] <= t[schema.WALL_UTIL] + 1e-9).all() and (t[schema.HW_UTIL] <= 1 + 1e-9).all()
    dev = s.devices.set_index(schema.DEVICE)
    assert dev.at["cpu", schema.HW_UTIL] == pytest.approx(t.loc[t[schema.DEVICE] == "cpu", schema.HW_UTIL].sum())
    assert np.isnan(dev.at["host", schema.HW_UTIL])
    # the definition: HW share of the sampled runs applied to all of the track's wall time
    ev = _infer(run)
    prep = ev[ev[schema.STAGE] == "prep"]
    sampled = prep[prep[schema.HW_NS].notna()]
    expected = (sampled[schema.HW_NS].sum() / sampled[schema.DUR_NS].sum() * prep[schema.DUR_NS].sum()
                / analysis.wall_span_ns(run.events))
    assert t.set_index(schema.STAGE).at["prep", schema.HW_UTIL] == pytest.approx(expected)
    # the penalty is over the sampled runs only
    assert t.set_index(schema.STAGE).at["prep", schema.PENALTY_MS] == pytest.approx(
        (sampled[schema.DUR_NS] - sampled[schema.HW_NS]).mean() / 1e6)


def test_the_two_sessions_give_identical_outputs(tmp_path):
    model = write_matmul_chain(tmp_path / "m.onnx", 8, 32, 32, 3)
    opts = ExecutorOptions(hw_sample_every=K, profile_prefix=str(tmp_path / "p"))
    ex = OrtExecutor(model, parse_device("cpu"), 1, opts)
    try:
        assert ex.hw_sampled
        x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
        outs = []
        for profile in (True, False, True, False):
            ex.submit(x, profile)
            outs.append(ex.wait().output)
        assert all(np.array_equal(outs[0], o) for o in outs[1:])
        hw, marshal = ex.finish()
    finally:
        ex.close()
    assert (hw[[0, 2]] > 0).all()  # the profiled session's runs
    assert np.isnan(hw[[1, 3]]).all() and np.isnan(marshal[[1, 3]]).all()  # the plain session's runs


def test_the_two_openvino_variants_give_identical_outputs(tmp_path):
    from hase.pipeline.devices import OpenVinoCore
    from hase.pipeline.ov_backend import OvExecutor

    model = write_matmul_chain(tmp_path / "m.onnx", 8, 32, 32, 3)
    ex = OvExecutor(model, parse_device("ov:CPU"), 1, ExecutorOptions(hw_sample_every=K), OpenVinoCore())
    try:
        assert ex.hw_sampled
        x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
        results = []
        for profile in (True, False, True, False):
            ex.submit(x, profile)
            results.append(ex.wait())
    finally:
        ex.close()
    assert all(np.array_equal(results[0].output, r.output) for r in results[1:])
    assert [r.hw_ns > 0 for r in results[::2]] == [True, True]  # the PERF_COUNT variant
    assert all(np.isnan(r.hw_ns) and np.isnan(r.marshal_ns) for r in results[1::2])


def test_every_run_and_no_profiling_open_one_session(tmp_path):
    model = write_matmul_chain(tmp_path / "m.onnx", 4, 16, 16, 1)
    for opts in (ExecutorOptions(hw_sample_every=1, profile_prefix=str(tmp_path / "p")),
                 ExecutorOptions(hardware=False, hw_sample_every=K)):
        ex = OrtExecutor(model, parse_device("cpu"), 1, opts)
        try:
            assert not ex.hw_sampled
            for profile in (True, False):  # the flag is ignored: one session
                ex.submit(np.ones((4, 16), np.float32), profile)
                ex.wait()
            times = ex.finish()
        finally:
            ex.close()
        if opts.hardware:
            assert (times[0] > 0).all()
        else:
            assert times is None


def test_profile_budget_counts_sampled_runs_only():
    """hw_profile_events still bounds ORT's profile; with sampling it lasts k times as many batches."""
    stage = single_stage("a", "cpu", dummy=DummyModel(16, 2))  # 4 nodes + 2 session events -> 10 profiled runs
    spec = PipelineSpec(name="budget", batch=4, features=16, hw_profile_events=60, hw_sample_every=K,
                        hw_sample_block=1, hw_sample_warmup=0, stages=(stage,))
    run = run_pipeline(spec, 30)
    a = _infer(run)
    # 2 warm-up runs used part of the budget; then batches 0, 3, ..., 21 (8 runs); 24 and 27 have none
    assert sorted(a.loc[a[schema.HW_NS].notna(), schema.BATCH]) == list(range(0, 24, K))
    flush = run.events[run.events[schema.KIND] == schema.PROFILER_FLUSH]
    assert flush[schema.BATCH].tolist() == [21]


def test_sampling_in_blocks_with_warmup():
    """Blocks of 3 batches every 6; the first run of each block on each executor re-warms it and is not kept."""
    stages = (single_stage("a", "cpu", dummy=DummyModel(16, 1)),
              single_stage("b", "ov:CPU", dummy=DummyModel(16, 1, seed=1)))
    spec = PipelineSpec(name="blocks", batch=4, features=16, hw_sample_every=2, hw_sample_block=3,
                        hw_sample_warmup=1, stages=stages)
    assert [b for b in range(12) if spec.hw_sampled(b)] == [0, 1, 2, 6, 7, 8]
    run = run_pipeline(spec, 12)
    for stage in ("a", "b"):  # ORT, OpenVINO
        ev = _infer(run)[_infer(run)[schema.STAGE] == stage]
        assert sorted(ev.loc[ev[schema.HW_NS].notna(), schema.BATCH]) == [1, 2, 7, 8]
    assert summarize(run).hw_coverage == pytest.approx(4 / 12)
    with pytest.raises(HaseError, match="hw_sample_warmup=3 must be >= 0 and below hw_sample_block=3"):
        PipelineSpec(stages=stages, hw_sample_every=2, hw_sample_block=3, hw_sample_warmup=3)
    PipelineSpec(stages=stages, hw_sample_every=1, hw_sample_block=1)  # every run: no blocks, no warm-up


def test_by_run_index_leaves_unprofiled_and_warmup_runs_missing():
    hw, marshal = by_run_index(np.array([4.0, 5.0, 7.0]), np.array([9.0, 1.0, 0.0]), [-1, 0, 3], 5)
    assert np.array_equal(hw, [5.0, np.nan, np.nan, 7.0, np.nan], equal_nan=True)
    assert np.array_equal(marshal, [1.0, np.nan, np.nan, 0.0, np.nan], equal_nan=True)


def test_config_key_and_cli_flag(capsys):
    cfg = pipeline_from_dict({"pipeline": {"hw_sample_every": 4, "hw_sample_block": 2, "hw_sample_warmup": 1},
                              "stages": [{"name": "a", "dummy": {}}]})
    assert (cfg.spec.hw_sample_every, cfg.spec.hw_sample_block, cfg.spec.hw_sample_warmup) == (4, 2, 1)
    with pytest.raises(HaseError, match="hw_sample_every and hw_sample_block must be >= 1"):
        pipeline_from_dict({"pipeline": {"hw_sample_every": 0}, "stages": [{"name": "a", "dummy": {}}]})
    assert main(["pipeline", "simulate", "--batches", "10", "--batch", "4", "--width", "16", "--layers", "1",
                 "--hw-sample-every", "2", "--hw-sample-block", "1", "--hw-sample-warmup", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metadata"]["hw_sample_every"] == 2 and out["metadata"]["hw_sample_block"] == 1
    assert out["hw_coverage"] == pytest.approx(0.5)  # every stage on ORT cpu: batches 0, 2, 4, 6, 8
    assert main(["pipeline", "simulate", "--batches", "4", "--batch", "4", "--width", "16", "--layers", "1",
                 "--hw-sample-every", "1"]) == 0
    assert "hardware time for 100% of backend inferences (every run)" in capsys.readouterr().out
    assert main(["pipeline", "simulate", "--batches", "2", "--hw-sample-every", "0"]) == 2
    assert "hw_sample_every and hw_sample_block must be >= 1" in capsys.readouterr().err
