"""Bad input is a clear HaseError before the run; a stage that raises mid-run stops cleanly and keeps events."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import onnx
import pytest

from hase.cli import main
from hase.errors import HaseError
from hase.pipeline import (
    DummyModel,
    ExecutorSpec,
    PipelineFailedError,
    PipelineSpec,
    StageSpec,
    data_parallel_stage,
    pipeline_trace,
    run_pipeline,
    schema,
    single_stage,
    write_chrome_trace,
    write_matmul_chain,
)
from hase.pipeline.partition import split_sizes


def _spec(*stages, batch=8, features=64) -> PipelineSpec:
    return PipelineSpec(name="bad", batch=batch, features=features, stages=stages)


def _before_run(spec, match):
    """The error must come from validation (HaseError, not a mid-run PipelineFailedError)."""
    with pytest.raises(HaseError, match=match) as info:
        run_pipeline(spec, 4)
    assert not isinstance(info.value, PipelineFailedError)
    return info.value


def test_model_that_fails_to_load(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not an onnx model")
    _before_run(_spec(single_stage("a", "cpu", model=junk)), r"stage 'a'.*cannot load .*junk\.onnx")
    _before_run(_spec(single_stage("a", "ov:CPU", model=tmp_path / "missing.onnx")), r"cannot load .*missing\.onnx")


def test_model_with_an_unknown_operator(tmp_path):
    m = onnx.load(write_matmul_chain(tmp_path / "m.onnx", 8, 64, 64, 1))
    m.graph.node[1].op_type = "NoSuchOp"
    onnx.save(m, tmp_path / "bad_op.onnx")
    _before_run(_spec(single_stage("a", "cpu", model=tmp_path / "bad_op.onnx")),
                r"stage 'a'.*ONNX Runtime cannot load the model")
    _before_run(_spec(single_stage("a", "ov:CPU", model=tmp_path / "bad_op.onnx")),
                r"stage 'a'.*OpenVINO cannot load bad_op\.onnx on CPU")


def test_mismatched_shapes_between_stages(tmp_path):
    wants_32 = write_matmul_chain(tmp_path / "b.onnx", 8, 32, 16, 1)
    spec = _spec(single_stage("a", "cpu", dummy=DummyModel(64, 1)), single_stage("b", "ov:CPU", model=wants_32))
    _before_run(spec, r"stage 'b'.*expects input \[8, 32\].*stage 'a' produces \[8, 64\]")
    spec = _spec(single_stage("a", "cpu", dummy=DummyModel(64, 1)), single_stage("b", "cpu", model=wants_32))
    _before_run(spec, r"stage 'b'.*expects input \[8, 32\]")


def test_first_stage_input_mismatch(tmp_path):
    model = write_matmul_chain(tmp_path / "a.onnx", 4, 64, 16, 1)
    _before_run(_spec(single_stage("a", "cpu", model=model), batch=8), r"expects input \[4, 64\].*pipeline input")


def test_partition_ratio_that_does_not_divide_the_batch():
    dp = data_parallel_stage("dp", [ExecutorSpec("cpu", dummy=DummyModel(8, 1)),
                                    ExecutorSpec("cpu", dummy=DummyModel(8, 1))], ratios=[0.25, 0.75])
    _before_run(_spec(single_stage("a", "cpu", dummy=DummyModel(16, 1)), dp, batch=6),
                r"stage 'dp': partition ratios \[0.25, 0.75\] do not divide 6 rows")
    with pytest.raises(HaseError, match="do not divide 5 rows"):
        split_sizes(5, (0.5, 0.5))
    assert split_sizes(8, (0.25, 0.75)) == (2, 6)


def test_fixed_batch_executor_model_that_does_not_fit_its_partition(tmp_path):
    fixed4 = write_matmul_chain(tmp_path / "e.onnx", 4, 64, 8, 1)
    dp = data_parallel_stage("dp", [ExecutorSpec("cpu", model=fixed4), ExecutorSpec("ov:CPU", model=fixed4)])
    _before_run(_spec(single_stage("a", "cpu", dummy=DummyModel(64, 1)), dp, batch=6),
                r"stage 'dp' executor 0.*expects input \[4, 64\].*partition is \[3, 64\]")


def test_devices_that_are_not_present():
    _before_run(_spec(single_stage("a", "ov:GPU", dummy=DummyModel(8, 1))),
                r"OpenVINO device GPU is not present \(available: CPU")
    _before_run(_spec(single_stage("a", "ov:NPU", dummy=DummyModel(8, 1))), r"NPU is not present")
    _before_run(_spec(single_stage("a", "cuda:0", dummy=DummyModel(8, 1))),
                r"CUDAExecutionProvider is not available")
    _before_run(_spec(single_stage("a", "tpu", dummy=DummyModel(8, 1))), r"unknown device 'tpu'")


def test_bad_specs_fail_on_construction():
    with pytest.raises(HaseError, match="exactly one of model, dummy or function"):
        ExecutorSpec("cpu")
    with pytest.raises(HaseError, match="ratios must sum to 1"):
        data_parallel_stage("d", [ExecutorSpec("cpu", dummy=DummyModel()), ExecutorSpec("cpu", dummy=DummyModel())],
                            ratios=[0.5, 0.6])
    with pytest.raises(HaseError, match="2 partition ratios for 3 executors"):
        data_parallel_stage("d", [ExecutorSpec("cpu", dummy=DummyModel())] * 3, ratios=[0.5, 0.5])
    with pytest.raises(HaseError, match="unique"):
        _spec(single_stage("a", dummy=DummyModel()), single_stage("a", dummy=DummyModel()))
    with pytest.raises(HaseError, match="device 'host'"):
        ExecutorSpec("cpu", fn=lambda x: x)
    with pytest.raises(HaseError, match="streams must be >= 1"):
        StageSpec("a", (ExecutorSpec(dummy=DummyModel()),), streams=0)


def _failing_after(calls: int):
    """A host stage that raises on its `calls`-th call (warm-up calls included)."""
    state = {"n": 0}

    def post(x):
        state["n"] += 1
        if state["n"] == calls:
            raise ValueError("corrupt graph batch")
        return x * 2

    return post


def test_stage_raising_mid_run_stops_cleanly_and_keeps_events(tmp_path):
    spec = _spec(single_stage("a", "cpu", dummy=DummyModel(64, 1)),
                 single_stage("post", "host", fn=_failing_after(2 + 4)),  # 2 warm-up calls, then batches 0..3
                 single_stage("c", "ov:CPU", dummy=DummyModel(8, 1)))
    failed = r"stage 'post' failed on batch 3 .*ValueError: corrupt graph batch"
    with pytest.raises(PipelineFailedError, match=failed) as info:
        run_pipeline(spec, 50, warmup=2)
    run = info.value.run
    assert run.failure.stage == "post" and run.failure.batch_id == 3
    ev = run.events
    post = ev[ev[schema.STAGE] == "post"]
    assert sorted(post.loc[post[schema.KIND] == schema.INFER, schema.BATCH]) == [0, 1, 2]
    assert list(post.loc[post[schema.KIND] == schema.ERROR, schema.BATCH]) == [3]
    assert run.completed < 50
    assert not [t for t in threading.enumerate() if t.name.startswith("hase-") and t.is_alive()]
    trace = json.loads(write_chrome_trace(pipeline_trace(run), tmp_path / "t.json").read_text())
    assert {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"} >= {schema.INFER, schema.ERROR}
    assert trace["otherData"]["failure"]["stage"] == "post"


def test_data_parallel_executor_raising_names_the_executor():
    dp = data_parallel_stage("dp", [ExecutorSpec("cpu", dummy=DummyModel(16, 1)),
                                    ExecutorSpec("host", fn=_failing_after(2 + 3))])
    with pytest.raises(PipelineFailedError) as info:
        run_pipeline(_spec(single_stage("a", "cpu", dummy=DummyModel(16, 1)), dp), 20)
    f = info.value.run.failure
    assert (f.stage, f.batch_id, f.executor, f.device) == ("dp", 2, 1, "host")


def test_cli_mid_run_failure_still_writes_trace(tmp_path, monkeypatch, capsys):
    (tmp_path / "hase_test_failing_stage.py").write_text(
        "from hase.pipeline import stage_function\n"
        "calls = {'n': 0}\n"
        "@stage_function\n"
        "def post(x):\n"
        "    calls['n'] += 1\n"
        "    if calls['n'] == 5:\n"
        "        raise RuntimeError('boom')\n"
        "    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = tmp_path / "p.toml"
    cfg.write_text('[pipeline]\nbatch = 4\nfeatures = 16\nwarmup = 1\n'
                   '[[stages]]\nname = "a"\ndevice = "cpu"\ndummy = { width = 16, layers = 1 }\n'
                   '[[stages]]\nname = "post"\nfunction = "hase_test_failing_stage:post"\n')
    trace, csv = tmp_path / "t.json", tmp_path / "e.csv"
    code = main(["pipeline", "run", str(cfg), "--batches", "30", "--trace", str(trace), "--csv", str(csv)])
    assert code == 2
    assert "stage 'post' failed on batch 3" in capsys.readouterr().err
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat") == schema.ERROR for e in events)
    assert csv.read_text().count("\n") > 4


def test_cli_rejects_trace_without_events(tmp_path, capsys):
    code = main(["pipeline", "simulate", "--batches", "2", "--no-trace-events", "--trace", str(tmp_path / "t.json")])
    assert code == 2 and "--no-trace-events" in capsys.readouterr().err
    assert not Path(tmp_path / "t.json").exists()


def test_failure_on_the_first_batch_still_summarizes(tmp_path):
    from hase.pipeline import summarize, summary_text

    spec = _spec(single_stage("a", "host", fn=_failing_after(1 + 1)))  # 1 warm-up call, then batch 0 fails
    with pytest.raises(PipelineFailedError, match="failed on batch 0") as info:
        run_pipeline(spec, 5, warmup=1)
    run = info.value.run
    assert run.completed == 0 and list(run.events[schema.KIND]) == [schema.ERROR]
    text = summary_text(summarize(run))
    assert "0/5 batches" in text and "run stopped" in text
    assert json.loads(write_chrome_trace(pipeline_trace(run), tmp_path / "t.json").read_text())["traceEvents"]
