"""`profile_pipeline`: the library call behind `hase pipeline run|simulate` (files, sampling, failure, headline)."""
from __future__ import annotations

import json

import pytest

from hase.cli import main
from hase.errors import HaseError
from hase.pipeline import PipelineFailedError, PipelineSpec, simulation_spec, single_stage
from hase.pipeline.session import SessionOptions, profile_pipeline, with_sampling
from hase.pipeline.summary import headline_lines, summary_text


def _small() -> PipelineSpec:
    return simulation_spec(batch=4, width=16, layers=1)


def test_session_writes_files_and_summarizes(tmp_path):
    trace, csv = tmp_path / "t.json", tmp_path / "e.csv"
    session = profile_pipeline(_small(), 6, SessionOptions(warmup=1, trace_path=trace, csv_path=csv))
    assert session.error is None and session.summary.completed == 6
    assert session.files == {"trace": trace, "csv": csv}
    assert json.loads(trace.read_text())["traceEvents"] and csv.read_text().count("\n") > 6
    out = session.to_dict()
    assert out["completed"] == 6 and "predicted_vs_measured" not in out and out["cycles"]


def test_sampling_overrides_keep_the_rest_of_the_spec():
    spec = _small()
    assert with_sampling(spec, SessionOptions()) is spec
    changed = with_sampling(spec, SessionOptions(hw_sample_every=1))
    assert changed.hw_sample_every == 1 and changed.hw_sample_block == spec.hw_sample_block
    assert changed.stages == spec.stages
    with pytest.raises(HaseError, match="hw_sample_every"):
        with_sampling(spec, SessionOptions(hw_sample_every=0))


def test_files_need_trace_events(tmp_path):
    with pytest.raises(HaseError, match="--no-trace-events"):
        profile_pipeline(_small(), 2, SessionOptions(trace=False, csv_path=tmp_path / "e.csv"))
    assert not (tmp_path / "e.csv").exists()


def test_a_mid_run_failure_is_kept_with_the_partial_run(tmp_path):
    calls = []

    def flaky(x):
        calls.append(1)
        if len(calls) > 3:  # 1 warm-up call, then batches 0, 1 pass and batch 2 fails
            raise ValueError("bad batch")
        return x

    spec = PipelineSpec(stages=(single_stage("f", "host", fn=flaky),), batch=4, features=8)
    session = profile_pipeline(spec, 5, SessionOptions(warmup=1, trace_path=tmp_path / "t.json"))
    assert isinstance(session.error, PipelineFailedError) and session.summary.completed == 2
    assert "run stopped" in headline_lines(session.summary)[-1] and (tmp_path / "t.json").is_file()


def test_cli_prints_the_same_headline_as_summary_text(capsys):
    assert main(["pipeline", "simulate", "--batches", "4", "--batch", "4", "--width", "16", "--layers", "1",
                 "--no-trace-events"]) == 0
    out = capsys.readouterr().out
    assert "tracing was off: no per-stage figures" in out and "4/4 batches" in out
    text = summary_text(profile_pipeline(_small(), 4, SessionOptions(trace=False)).summary)
    assert "tracing was off: no per-stage figures" in text
