"""What a pipeline prediction leaves out, and the bounds that follow: the predicted cycle is a lower bound and
the predicted throughput an upper bound (never the other way round), on constructed summaries and a real run."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from hase.cli import main
from hase.pipeline import (
    DummyModel,
    ExecutorSpec,
    PipelineSpec,
    compare,
    data_parallel_stage,
    predict_pipeline,
    prepare,
    schema,
    single_stage,
    write_matmul_chain,
)
from hase.pipeline.forecast import bound_notes
from hase.pipeline.summary import PipelineSummary


def _measured(stage_ms: dict[str, float], cycle_ms: float, throughput: float) -> PipelineSummary:
    stages = pd.DataFrame({schema.STAGE: list(stage_ms), schema.STAGE_MS: list(stage_ms.values())})
    return PipelineSummary("p", 10, 10, True, 25.0, throughput, 3200.0, 3, 3, 3, cycle_ms, cycle_ms, cycle_ms, "a",
                           1.0, stages, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame())


def test_an_unpredicted_stage_makes_the_cycle_a_lower_and_the_throughput_an_upper_bound(tmp_path):
    model = write_matmul_chain(tmp_path / "m.onnx", 8, 16, 16, 1)
    spec = PipelineSpec(stages=(single_stage("a", "cpu", model=model), single_stage("h", "host", fn=lambda x: x)))
    pred = predict_pipeline(spec, {"cpu": lambda p: 2.0, "host": lambda p: math.nan})
    assert pred.left_out == ("stage h",) and not pred.complete
    assert pred.cycle_ms == 2.0 and pred.throughput_per_s == 500.0
    table = compare(pred, _measured({"a": 2.5, "h": 4.0}, 4.0, 250.0)).set_index("figure")
    # the left-out stage is the slower one: the measured cycle is longer, the measured throughput lower
    assert table.at[schema.CYCLE_MS, schema.NOTE] == "lower bound: leaves out stage h"
    assert table.at["throughput_per_s", schema.NOTE] == "upper bound: leaves out stage h"
    assert table.at[schema.CYCLE_MS, "predicted"] < table.at[schema.CYCLE_MS, "measured"]
    assert table.at["throughput_per_s", "predicted"] > table.at["throughput_per_s", "measured"]


def test_a_data_parallel_stage_leaves_out_its_partition_and_merge(tmp_path):
    spec = PipelineSpec(name="p", batch=8, features=16, stages=(
        single_stage("a", "cpu", dummy=DummyModel(16, 1)),
        data_parallel_stage("b", [ExecutorSpec("cpu", dummy=DummyModel(16, 1)),
                                  ExecutorSpec("cpu", dummy=DummyModel(16, 1))], ratios=[0.5, 0.5]),
    ))
    with prepare(spec, tmp_path, warmup=1) as prep:
        pred = predict_pipeline(prep, lambda p: 1.0)
    assert pred.complete and pred.left_out == ("b partition and merge",)
    assert bound_notes(pred) == ("lower bound: leaves out b partition and merge",
                                 "upper bound: leaves out b partition and merge")


def test_a_complete_prediction_claims_no_bound(tmp_path):
    model = write_matmul_chain(tmp_path / "m.onnx", 8, 16, 16, 1)
    pred = predict_pipeline(PipelineSpec(stages=(single_stage("a", "cpu", model=model),)), lambda p: 2.0)
    assert pred.complete and pred.left_out == () and bound_notes(pred) == ("", "")
    table = compare(pred, _measured({"a": 2.5}, 2.5, 400.0)).set_index("figure")
    assert table.at[schema.CYCLE_MS, schema.NOTE] == "" and table.at["throughput_per_s", schema.NOTE] == ""


@pytest.mark.slow
def test_cli_simulate_with_predict_says_upper_bound_for_throughput(tmp_path, capsys):
    """The real command: the OpenVINO classify stage has no predictor, so both bounds are named in --json."""
    pytest.importorskip("openvino")
    rc = main(["pipeline", "simulate", "--batches", "6", "--warmup", "1", "--width", "16", "--layers", "1",
               "--devices", "cpu,ov:CPU", "--predict", "cpu-1t", "--json"])
    assert rc == 0
    rows = {r["figure"]: r for r in json.loads(capsys.readouterr().out)["predicted_vs_measured"]}
    assert rows["cycle_ms"]["note"] == "lower bound: leaves out stage classify, embed partition and merge"
    assert rows["throughput_per_s"]["note"] == "upper bound: leaves out stage classify, embed partition and merge"
    assert "lower bound" not in json.dumps(rows["throughput_per_s"])
