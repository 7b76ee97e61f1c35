"""Real streaming runs on the CPU: ONNX Runtime and OpenVINO stages, a data-parallel stage over two executors."""
from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest

from hase.pipeline import (
    DummyModel,
    ExecutorSpec,
    PipelineSpec,
    analysis,
    data_parallel_stage,
    pipeline_trace,
    run_pipeline,
    schema,
    single_stage,
    summarize,
    write_chrome_trace,
)
from hase.pipeline.chrome import HOST_PROCESS
from hase.pipeline.spec import DEFAULT_HW_SAMPLE_EVERY

BATCHES = 40


def three_stage_spec(**kw) -> PipelineSpec:
    """prep (ORT cpu) -> embed (data-parallel: ORT cpu + OpenVINO CPU) -> classify (OpenVINO CPU)."""
    return PipelineSpec(name="t3", batch=8, features=64, stages=(
        single_stage("prep", "cpu", dummy=DummyModel(64, 2)),
        data_parallel_stage("embed", [ExecutorSpec("cpu", dummy=DummyModel(64, 3)),
                                      ExecutorSpec("ov:CPU", dummy=DummyModel(64, 3, seed=1))]),
        single_stage("classify", "ov:CPU", dummy=DummyModel(16, 1, seed=2)),
    ), **kw)


@pytest.fixture(scope="module")
def run():
    return run_pipeline(three_stage_spec(), BATCHES)


def _infer(run, stage):
    ev = run.events
    return ev[(ev[schema.KIND] == schema.INFER) & (ev[schema.STAGE] == stage)]


def test_every_batch_passes_every_stage_exactly_once(run):
    batches = set(range(BATCHES))
    assert run.completed == BATCHES
    for stage in ("prep", "classify"):
        counts = _infer(run, stage)[schema.BATCH].value_counts()
        assert set(counts.index) == batches and (counts == 1).all()
    embed = _infer(run, "embed")
    per_exec = embed.groupby([schema.BATCH, schema.EXECUTOR]).size()
    assert len(per_exec) == 2 * BATCHES and (per_exec == 1).all()
    for kind in (schema.PARTITION, schema.MERGE):
        counts = run.events[run.events[schema.KIND] == kind][schema.BATCH].value_counts()
        assert set(counts.index) == batches and (counts == 1).all()


def test_stages_overlap_in_time(run):
    ev = run.events[run.events[schema.KIND] == schema.INFER].sort_values(schema.TS_NS)
    ts, end, stage = ev[schema.TS_NS].to_numpy(), ev[schema.END_NS].to_numpy(), ev[schema.STAGE].to_numpy()
    overlaps = sum(1 for i in range(len(ev)) for j in range(i + 1, len(ev))
                   if ts[j] < end[i] and stage[i] != stage[j])
    assert overlaps > 0, "no two stages ever ran at the same time: the pipeline is not streaming"


def test_data_parallel_executors_run_concurrently(run):
    embed = _infer(run, "embed").pivot(index=schema.BATCH, columns=schema.EXECUTOR,
                                       values=[schema.TS_NS, schema.END_NS])
    both = (embed[(schema.TS_NS, 1)] < embed[(schema.END_NS, 0)]) & (embed[(schema.TS_NS, 0)] < embed[(schema.END_NS,
                                                                                                       1)])
    assert both.mean() > 0.5


def test_utilization_never_exceeds_one(run):
    summary = summarize(run)
    assert (summary.tracks[schema.WALL_UTIL] <= 1 + 1e-9).all()
    assert (summary.tracks[schema.HW_UTIL] <= 1 + 1e-9).all()
    assert (summary.devices[schema.WALL_UTIL] <= 1 + 1e-9).all()
    assert (summary.tracks[schema.WALL_UTIL] > 0).all()


def test_cycle_latency_is_the_max_stage_time_per_cycle(run):
    summary = summarize(run)
    cycles = summary.cycles
    assert len(cycles) == BATCHES
    stages = ["prep", "embed", "classify"]
    assert np.allclose(cycles[schema.CYCLE_MS], cycles[stages].max(axis=1))
    assert (cycles[schema.BOTTLENECK] == cycles[stages].idxmax(axis=1)).all()
    # each stage column is what the events say: inference wall, or partition + max(device) + merge
    prep = _infer(run, "prep").set_index(schema.BATCH)[schema.DUR_NS] / 1e6
    assert np.allclose(cycles.set_index(schema.BATCH)["prep"], prep.sort_index())
    ev = run.events
    part = ev[ev[schema.KIND] == schema.PARTITION].set_index(schema.BATCH)[schema.DUR_NS]
    merge = ev[ev[schema.KIND] == schema.MERGE].set_index(schema.BATCH)[schema.DUR_NS]
    dev = _infer(run, "embed").groupby(schema.BATCH)[schema.DUR_NS].max()
    assert np.allclose(cycles.set_index(schema.BATCH)["embed"], ((part + dev + merge) / 1e6).sort_index())
    assert summary.bottleneck in stages
    assert summary.cycle_mean_ms == pytest.approx(cycles[schema.CYCLE_MS].mean())


def test_backends_report_hardware_time(run):
    """Default sampling: ORT kernel time and OpenVINO real time on the sampled batches only, past each block's
    warm-up (one stream per stage, so an executor's streak is the batch's position in its block)."""
    ev = run.events[run.events[schema.KIND] == schema.INFER]
    spec = run.spec
    assert spec.hw_sample_every == DEFAULT_HW_SAMPLE_EVERY > 1
    sampled = {b for b in range(BATCHES) if spec.hw_sampled(b) and b % spec.hw_sample_block >= spec.hw_sample_warmup}
    assert 0 < len(sampled) < BATCHES
    for device in ("cpu", "ov:CPU"):
        dev = ev[ev[schema.DEVICE] == device]
        has = dev[schema.HW_NS].notna()
        assert len(dev) == 2 * BATCHES and set(dev.loc[has, schema.BATCH]) == sampled
        assert (dev.loc[has, schema.HW_NS] > 0).all() and dev.loc[has, schema.MARSHAL_NS].notna().all()
    assert (ev[schema.SUBMIT_NS] >= 0).all() and (ev[schema.WAIT_NS] >= 0).all()
    meta = run.metadata["devices"]
    assert meta["cpu"]["execution_provider"] == "CPUExecutionProvider"
    assert "openvino_version" in meta["ov:CPU"]


def test_summary_throughput_and_latency(run):
    s = summarize(run)
    assert s.throughput_per_s > 0 and s.rows_per_s == pytest.approx(8 * s.throughput_per_s)
    assert s.latency_p50_ms > 0 and s.latency_p95_ms >= s.latency_p50_ms
    dp = s.data_parallel
    assert list(dp["part"]) == ["partition", "executor 0", "executor 1", "sync+merge", "total"]
    assert set(s.stages[schema.STAGE]) == {"prep", "embed", "classify"}


def test_trace_file_is_valid_json_with_documented_tracks(run, tmp_path):
    path = write_chrome_trace(pipeline_trace(run), tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert HOST_PROCESS in procs.values()
    assert any(n.startswith("cpu ") for n in procs.values()) and any(n.startswith("ov:CPU") for n in procs.values())
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert set(threads.values()) == set(run.tracks[schema.TRACK])
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(run.events)
    assert all((e["pid"], e["tid"]) in threads for e in slices)
    host_pid = next(pid for pid, name in procs.items() if name == HOST_PROCESS)
    assert {e["cat"] for e in slices if e["pid"] == host_pid} == {schema.PARTITION, schema.MERGE}
    flows = [e for e in events if e["ph"] in "stf"]
    assert {e["id"] for e in flows if e["ph"] == "s" and "." not in e["id"]} == {f"b{b}" for b in range(BATCHES)}
    phases = pd.DataFrame(flows).groupby("id")["ph"].apply("".join)
    assert phases.str.fullmatch("st*f").all()  # every arrow starts once, ends once
    assert len(phases) == BATCHES * 3  # the batch chain + partition -> each of the 2 executors
    assert trace["otherData"]["completed"] == BATCHES


def test_tracing_off_records_no_events_but_measures_throughput():
    run = run_pipeline(three_stage_spec(), 20, trace=False)
    assert run.events.empty and not run.traced
    assert run.completed == 20 and run.throughput_per_s > 0
    s = summarize(run)
    assert s.stages.empty and s.latency_p50_ms > 0


def test_streams_and_partition_along_features():
    """Two streams on one stage, a data-parallel split along axis 1 (features), and its merged width."""
    spec = PipelineSpec(name="ax1", batch=4, features=32, stages=(
        single_stage("a", "cpu", dummy=DummyModel(32, 1), streams=2),
        data_parallel_stage("b", [ExecutorSpec("cpu", dummy=DummyModel(8, 1)),
                                  ExecutorSpec("cpu", dummy=DummyModel(8, 1, seed=3))], axis=1, ratios=[0.25, 0.75]),
        single_stage("c", "cpu", dummy=DummyModel(4, 1)),
    ))
    run = run_pipeline(spec, 12)
    ev = run.events
    assert (ev[ev[schema.KIND] == schema.INFER].groupby([schema.STAGE,
                                                         schema.EXECUTOR])[schema.BATCH].nunique() == 12).all()
    b = ev[(ev[schema.STAGE] == "b") & (ev[schema.KIND] == schema.INFER)]
    assert sorted(b.groupby(schema.EXECUTOR)[schema.ROWS].first()) == [8, 24]
    assert set(run.tracks.loc[run.tracks[schema.STAGE] == "a", schema.TRACK]) == {"a · cpu · s0", "a · cpu · s1"}


def test_event_budget_caps_kept_events():
    """max_events caps the events kept in memory; the rest are counted as dropped, never silently lost."""
    spec = PipelineSpec(name="small", batch=4, features=16, max_events=25, stages=(
        single_stage("a", "cpu", dummy=DummyModel(16, 1)),
        single_stage("b", "cpu", dummy=DummyModel(16, 1)),
    ))
    run = run_pipeline(spec, 30)
    assert len(run.events) == 25 and run.dropped_events == 30 * 2 - 25
    assert run.completed == 30
    assert summarize(run).dropped_events == 35


def test_ort_profile_budget_stops_profiling_and_reports_coverage():
    """hw_profile_events bounds ORT's in-memory profile: profiling stops (a flush event marks it), later runs
    have no hardware time, and the coverage says so."""
    spec = PipelineSpec(name="small", batch=4, features=16, hw_profile_events=60, hw_sample_every=1, stages=(
        single_stage("a", "cpu", dummy=DummyModel(16, 2)),  # 4 nodes + 2 session events -> 10 profiled runs
    ))
    run = run_pipeline(spec, 20)
    a = run.events[run.events[schema.KIND] == schema.INFER]
    assert a[schema.HW_NS].notna().sum() == 10 - 2  # the 2 warm-up runs used part of the budget
    assert a.loc[a[schema.RUN_INDEX] < 10, schema.HW_NS].notna().all()
    flush = run.events[run.events[schema.KIND] == schema.PROFILER_FLUSH]
    assert len(flush) == 1 and int(flush[schema.BATCH].iat[0]) == 7
    assert analysis.track_table(run.events).at[0, schema.HW_COVERAGE] == pytest.approx(8 / 20)


def test_no_threads_left_behind():
    before = {t.name for t in threading.enumerate()}
    run_pipeline(three_stage_spec(), 5)
    left = {t.name for t in threading.enumerate() if t.name.startswith("hase-")} - before
    assert not left


def test_events_frame_columns(run):
    assert list(run.events.columns) == list(schema.EVENT_COLUMNS)
    assert pd.api.types.is_integer_dtype(run.events[schema.TS_NS])
    assert (run.events[schema.TS_NS] >= 0).all()


def test_events_without_hardware_profiling():
    run = run_pipeline(three_stage_spec(), 10, hardware=False)
    infer = run.events[run.events[schema.KIND] == schema.INFER]
    assert len(infer) == 10 * 4 and infer[schema.HW_NS].isna().all()
    assert (summarize(run).tracks[schema.HW_COVERAGE] == 0).all()


def test_a_prepared_pipeline_streams_once(tmp_path):
    from hase.errors import HaseError
    from hase.pipeline import prepare, stream

    with prepare(three_stage_spec(), tmp_path, warmup=1) as prep:
        assert stream(prep, 3).completed == 3
        with pytest.raises(HaseError, match="already run"):
            stream(prep, 3)
