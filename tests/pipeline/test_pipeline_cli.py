"""Config files and the `hase pipeline` command, run in-process through `main([...])`."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hase.cli import main
from hase.errors import HaseError
from hase.pipeline import load_pipeline_config, pipeline_from_dict, read_events_csv, schema, simulation_spec

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "configs" / "pipeline_example.toml"


def test_example_config_parses():
    cfg = load_pipeline_config(EXAMPLE)
    spec = cfg.spec
    assert [s.name for s in spec.stages] == ["prep", "embed", "classify"]
    embed = spec.stage("embed")
    assert embed.data_parallel and embed.partition.ratios == (0.5, 0.5)
    assert [e.device for e in embed.executors] == ["cpu", "ov:CPU"]
    assert cfg.batches == 200 and spec.batch == 16


def test_model_paths_are_relative_to_the_config(tmp_path):
    cfg = pipeline_from_dict({"stages": [{"name": "a", "model": "models/a.onnx"}]}, base_dir=tmp_path)
    assert cfg.spec.stages[0].executors[0].model == tmp_path / "models" / "a.onnx"


@pytest.mark.parametrize("data, match", [
    ({"pipeline": {"batchsize": 4}, "stages": [{"name": "a", "dummy": {}}]}, r"unknown keys \['batchsize'\]"),
    ({"stages": [{"name": "a", "dummy": {"depth": 3}}]}, r"unknown keys \['depth'\] in stage 'a' dummy"),
    ({"stages": [{"name": "a", "device": "cpu", "executors": [{"dummy": {}}]}]}, r"has `executors` and also"),
    ({"stages": []}, "no \\[\\[stages\\]\\]"),
    ({"stages": [{"name": "a", "function": "nope_module_xyz:fn"}]}, "cannot import function"),
    ({"stages": [{"name": "a", "dummy": {}, "partition": {"ratios": [1.0]}}]}, "has one executor"),
])
def test_bad_configs(data, match):
    with pytest.raises(HaseError, match=match):
        pipeline_from_dict(data)


def test_missing_config_file(tmp_path):
    with pytest.raises(HaseError, match="not found"):
        load_pipeline_config(tmp_path / "nope.toml")


@pytest.mark.slow
def test_run_writes_trace_csv_and_json(tmp_path, capsys):
    trace, csv = tmp_path / "t.json", tmp_path / "e.csv"
    code = main(["pipeline", "run", str(EXAMPLE), "--batches", "12", "--warmup", "1", "--trace", str(trace),
                 "--csv", str(csv), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["completed"] == 12 and out["bottleneck"] in {"prep", "embed", "classify"}
    assert {r["stage"] for r in out["stages"]} == {"prep", "embed", "classify"}
    assert out["metadata"]["devices"]["ov:CPU"]["openvino_version"]
    events = read_events_csv(csv)
    assert len(events[events[schema.KIND] == schema.INFER]) == 12 * 4
    assert json.loads(trace.read_text())["traceEvents"]


def test_simulate_prints_tables(capsys):
    code = main(["pipeline", "simulate", "--batches", "10", "--batch", "4", "--width", "32", "--layers", "1",
                 "--dp", "cpu,ov:CPU"])
    assert code == 0
    out = capsys.readouterr().out
    for word in ("throughput", "bottleneck", "stages", "executors", "devices", "data-parallel", "sync+merge"):
        assert word in out


def test_simulate_tracing_off(capsys):
    assert main(["pipeline", "simulate", "--batches", "5", "--batch", "4", "--width", "16", "--no-trace-events",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["traced"] is False and out["completed"] == 5 and out["stages"] == []


def test_bad_device_is_one_line_error(capsys):
    assert main(["pipeline", "simulate", "--batches", "2", "--dp", "cpu,ov:NPU"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hase: error: stage 'embed': OpenVINO device NPU is not present")


def test_help_everywhere(capsys):
    for argv in (["pipeline", "--help"], ["pipeline", "run", "--help"], ["pipeline", "simulate", "--help"]):
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "--no-trace-events" in out
    assert "A config is code, like a Python import" in " ".join(out.split())  # the risk, in `pipeline run --help`


def test_simulation_spec_shape():
    spec = simulation_spec(dp_devices=("cpu", "ov:CPU", "cpu"))
    assert len(spec.stage("embed").executors) == 3
    with pytest.raises(HaseError, match="two or more"):
        simulation_spec(dp_devices=("cpu",))


def test_predicted_vs_measured_with_the_shipped_predictor(capsys):
    code = main(["pipeline", "simulate", "--batches", "8", "--batch", "4", "--width", "64", "--layers", "1",
                 "--dp", "cpu,ov:CPU", "--devices", "cpu,cpu", "--predict", "cpu-1t", "--json"])
    assert code == 0
    rows = {r["figure"]: r for r in json.loads(capsys.readouterr().out)["predicted_vs_measured"]}
    assert rows["prep stage_ms"]["predicted"] > 0 and rows["classify stage_ms"]["predicted"] > 0
    assert rows["prep stage_ms"]["measured"] > 0
    # the data-parallel stage has an OpenVINO executor, which no predictor describes: not predicted
    assert math.isnan(rows["embed stage_ms"]["predicted"]) and "no predictor" in rows["embed stage_ms"]["note"]
    assert rows["cycle_ms"]["predicted"] > 0


def test_predict_with_unknown_predictor_fails_before_running(capsys):
    assert main(["pipeline", "simulate", "--batches", "2", "--predict", "gpu-99"]) == 2
    err = capsys.readouterr().err
    assert "gpu-99" in err and "Traceback" not in err
