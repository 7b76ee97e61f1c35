"""Composition logic on constructed events (deterministic): unions, bubbles, stage/cycle tables, profile parsing,
OpenVINO layer sums, and the prediction hook with a fake predictor."""
from __future__ import annotations

import json
from collections import namedtuple
from datetime import timedelta
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest

from hase.errors import HaseError
from hase.pipeline import (
    DummyModel,
    ExecutorSpec,
    PipelineSpec,
    compare,
    cycle_table,
    data_parallel_batches,
    data_parallel_stage,
    predict_pipeline,
    prepare,
    schema,
    single_stage,
    stage_times,
    track_table,
    union_ns,
    write_matmul_chain,
)
from hase.pipeline.forecast import PipelinePrediction
from hase.pipeline.ort_backend import run_times_from_profile
from hase.pipeline.ov_backend import layer_times_ns
from hase.pipeline.summary import PipelineSummary


def _events(rows: list[tuple]) -> pd.DataFrame:
    """rows: (kind, stage, stage_index, executor, track_id, batch, ts_ns, dur_ns, hw_ns)."""
    recs = []
    for kind, stage, si, ex, tid, b, ts, dur, hw in rows:
        recs.append({schema.KIND: kind, schema.STAGE: stage, schema.STAGE_INDEX: si, schema.EXECUTOR: ex,
                     schema.STREAM: 0,
                     schema.DEVICE: "host" if ex < 0 else "cpu", schema.TRACK: f"{stage}-{ex}", schema.TRACK_ID: tid,
                     schema.BATCH: b, schema.TS_NS: ts, schema.DUR_NS: dur, schema.END_NS: ts + dur,
                     schema.SUBMIT_NS: 0, schema.WAIT_NS: 0,
                     schema.HW_NS: hw, schema.MARSHAL_NS: np.nan, schema.ROWS: 4, schema.RUN_INDEX: b})
    return pd.DataFrame(recs, columns=list(schema.EVENT_COLUMNS))


def test_union_counts_overlap_once():
    assert union_ns(np.array([0, 5, 30]), np.array([10, 20, 40])) == 30
    assert union_ns(np.array([0, 1, 2]), np.array([100, 3, 4])) == 100
    assert union_ns(np.array([]), np.array([])) == 0


def test_track_table_bubbles_and_utilization():
    ev = _events([(schema.INFER, "a", 0, 0, 0, 0, 0, 10, 5.0), (schema.INFER, "a", 0, 0, 0, 1, 15, 5, 5.0),
                  (schema.INFER, "a", 0, 0, 0, 2, 30, 10, np.nan)])
    t = track_table(ev).iloc[0]
    assert t[schema.BUSY_MS] == pytest.approx(25e-6) and t[schema.WALL_UTIL] == pytest.approx(25 / 40)
    assert t[schema.BUBBLE_MEAN_MS] == pytest.approx(7.5e-6) and t[schema.BUBBLE_P50_MS] == pytest.approx(7.5e-6)
    # HW share of the runs with HW time (10 / 15) x the track's busy time (25) / span (40)
    assert t[schema.HW_UTIL] == pytest.approx(10 / 15 * 25 / 40) and t[schema.HW_COVERAGE] == pytest.approx(2 / 3)
    assert t[schema.PENALTY_MS] == pytest.approx(2.5e-6)  # (10-5 + 5-5) / 2: runs without HW time skipped


def _dp_events() -> pd.DataFrame:
    """Two batches: prep (stage 0) then a data-parallel stage 1 with partition, two executors, merge."""
    rows = []
    for b, off in ((0, 0), (1, 1000)):
        rows += [(schema.INFER, "prep", 0, 0, 0, b, off, 100, 80.0),
                 (schema.PARTITION, "dp", 1, -1, 1, b, off + 100, 10, np.nan),
                 (schema.INFER, "dp", 1, 0, 2, b, off + 110, 200 + 300 * b, 150.0),
                 (schema.INFER, "dp", 1, 1, 3, b, off + 112, 250, 200.0),
                 (schema.MERGE, "dp", 1, -1, 1, b, off + 110 + 250 + 300 * b, 20, np.nan)]
    return _events(rows)


def test_data_parallel_stage_total_is_partition_plus_slowest_device_plus_merge():
    dp = data_parallel_batches(_dp_events())
    assert list(dp[schema.BATCH]) == [0, 1]
    assert dp[schema.TOTAL_MS].tolist() == pytest.approx([(10 + 250 + 20) / 1e6, (10 + 500 + 20) / 1e6])


def test_cycle_is_max_stage_and_names_the_bottleneck():
    times = stage_times(_dp_events())
    cycles = cycle_table(times, ["prep", "dp"])
    assert cycles[schema.CYCLE_MS].tolist() == pytest.approx([280e-6, 530e-6])
    assert cycles[schema.BOTTLENECK].tolist() == ["dp", "dp"]


def test_incomplete_data_parallel_pass_is_not_a_stage_time():
    ev = _dp_events()
    ev = ev[~((ev[schema.BATCH] == 1) & (ev[schema.EXECUTOR] == 1))]  # batch 1 lost one executor (a failed run)
    assert data_parallel_batches(ev)[schema.BATCH].tolist() == [0]
    assert cycle_table(stage_times(ev), ["prep", "dp"])[schema.BATCH].tolist() == [0]


def test_required_columns_are_checked():
    with pytest.raises(HaseError, match="lacks columns"):
        track_table(pd.DataFrame({"x": [1]}))


def test_ort_profile_attribution_on_a_real_profile(tmp_path):
    model = write_matmul_chain(tmp_path / "m.onnx", 4, 32, 32, 3)
    so = ort.SessionOptions()
    so.enable_profiling, so.profile_file_prefix = True, str(tmp_path / "p")
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    x = np.ones((4, 32), np.float32)
    for _ in range(5):
        sess.run(None, {"x": x})
    path = sess.end_profiling()
    hw, marshal = run_times_from_profile(path)
    runs = [e for e in json.loads(Path(path).read_text()) if e["name"] == "model_run"]
    assert len(hw) == len(runs) == 5
    assert (hw > 0).all() and (hw <= np.array([r["dur"] for r in runs]) * 1e3).all()
    assert (marshal == 0).all()


def test_cuda_format_profile_prefers_gpu_kernel_events(tmp_path):
    lines = ['[',
             '{"cat":"Node","name":"mm_kernel_time","ts":10,"dur":5,"args":{"op_name":"MatMul"}},',
             '{"cat":"Kernel","name":"sgemm","ts":11,"dur":40,"args":{"op_name":"MatMul"}},',
             '{"cat":"Node","name":"cp_kernel_time","ts":16,"dur":3,"args":{"op_name":"MemcpyToHost"}},',
             '{"cat":"Kernel","name":"memcpy","ts":17,"dur":7,"args":{"op_name":"MemcpyToHost"}},',
             '{"cat":"Session","name":"model_run","ts":9,"dur":60,"args":{}},',
             '{"cat":"Session","name":"model_run","ts":100,"dur":10,"args":{}}',
             ']']
    (tmp_path / "p.json").write_text("\n".join(lines))
    hw, marshal = run_times_from_profile(tmp_path / "p.json")
    assert hw.tolist() == [47_000.0, 0.0] and marshal.tolist() == [7_000.0, 0.0]


def test_openvino_layer_sums():
    Info = namedtuple("Info", "status real_time node_type exec_type")
    done, skipped = "EXECUTED", "NOT_RUN"
    infos = [Info(done, timedelta(microseconds=3), "Reorder", "ref_any"),
             Info(done, timedelta(microseconds=20), "Subgraph", "jit_avx512"),
             Info(done, timedelta(microseconds=2), "Convert", "unknown"),
             Info(skipped, timedelta(0), "Parameter", "unknown")]
    assert layer_times_ns(infos, done) == (25_000.0, 5_000.0)


def _fake_predictor(ms_per_row: float):
    """Deterministic latency: ms_per_row x rows of the model's input (composition test only)."""
    import onnx

    def predict(path: Path) -> float:
        rows = onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim[0].dim_value
        return ms_per_row * rows

    return predict


def test_predicted_stage_times_cycle_and_throughput(tmp_path):
    spec = PipelineSpec(name="p", batch=8, features=16, stages=(
        single_stage("a", "cpu", dummy=DummyModel(16, 1)),
        data_parallel_stage("b", [ExecutorSpec("cpu", dummy=DummyModel(16, 1)),
                                  ExecutorSpec("cpu", dummy=DummyModel(16, 1))], ratios=[0.25, 0.75]),
        single_stage("c", "cpu", dummy=DummyModel(16, 1), streams=2),
    ))
    with prepare(spec, tmp_path, warmup=1) as prep:
        pred = predict_pipeline(prep, _fake_predictor(0.5))
    t = pred.stages.set_index(schema.STAGE)
    assert t[schema.PREDICTED_MS].tolist() == [4.0, 3.0, 4.0]  # b: max(0.5*2, 0.5*6)
    assert t.at["c", schema.PER_STREAM_MS] == 2.0 and "partition and merge" in t.at["b", schema.NOTE]
    assert pred.cycle_ms == 4.0 and pred.bottleneck == "a" and pred.complete
    assert pred.throughput_per_s == pytest.approx(250.0)  # a: 1 stream / 4 ms


def test_prediction_per_device_and_unpredictable_stages(tmp_path):
    model = write_matmul_chain(tmp_path / "m.onnx", 8, 16, 16, 1)
    spec = PipelineSpec(stages=(single_stage("a", "cpu", model=model), single_stage("h", "host", fn=lambda x: x)))
    pred = predict_pipeline(spec, {"cpu": lambda p: 2.0, "host": lambda p: 99.0})
    assert pred.cycle_ms == 2.0 and not pred.complete
    assert np.isnan(pred.stages.set_index(schema.STAGE).at["h", schema.PREDICTED_MS])
    with pytest.raises(HaseError, match="no latency predictor for device 'cpu'"):
        predict_pipeline(spec, {"ov:CPU": lambda p: 1.0})
    with pytest.raises(HaseError, match="prepare it first"):
        predict_pipeline(PipelineSpec(stages=(single_stage("d", dummy=DummyModel()),)), lambda p: 1.0)


def test_predicted_vs_measured_table():
    pred = PipelinePrediction(pd.DataFrame({schema.STAGE: ["a"], schema.STREAMS: [1], schema.PREDICTED_MS: [2.0],
                                            schema.PER_STREAM_MS: [2.0], schema.NOTE: [""]}), 2.0, 500.0, "a", True)
    stages = pd.DataFrame({schema.STAGE: ["a"], schema.STAGE_MS: [2.5]})
    measured = PipelineSummary("p", 10, 10, True, 25.0, 400.0, 3200.0, 3, 3, 3, 2.5, 2.5, 2.5, "a", 1.0,
                               stages, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    table = compare(pred, measured).set_index("figure")
    assert table.at["a stage_ms", "measured"] == 2.5 and table.at["a stage_ms", schema.ERROR_PCT] == pytest.approx(-20)
    assert table.at["throughput_per_s", schema.ERROR_PCT] == pytest.approx(25)
    assert table.at[schema.CYCLE_MS, "predicted"] == 2.0
