"""hase.runtime.profile: the one ORT-profile reader (loading, classifier, run attribution) on real profiles.

The golden counts come from the ORT 1.32 CPU profiles in tests/data/profiles (see its README).
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hase.errors import HaseError
from hase.pipeline.ort_backend import run_times_from_profile
from hase.profiling import decompose
from hase.runtime import profile

DATA = Path(__file__).parents[1] / "data" / "profiles"
REAL = {name: DATA / f"ort132_cpu_{name}.json" for name in ("tiny_cnn", "if_subgraph", "bert_tiny")}


def _ev(cat: str, name: str, ts: float, dur: float, args: dict[str, object] | None = None) -> dict[str, object]:
    return {"cat": cat, "pid": 7, "tid": 7, "dur": dur, "ts": ts, "ph": "X", "name": name, "args": args or {}}


def _kinds_by_run(path: Path) -> Counter[tuple[str, int]]:
    evs = list(profile.profile_events(profile.read_trace(path)))
    runs = [e for e in evs if e.kind == profile.MODEL_RUN]
    ids = profile.run_ids([r.ts_us for r in runs], [r.dur_us for r in runs], [e.ts_us for e in evs])
    return Counter(zip((e.kind for e in evs), ids.tolist(), strict=True))


# ---------------------------------------------------------------- loading


@pytest.mark.parametrize("name, n_events", [("tiny_cnn", 34), ("if_subgraph", 20), ("bert_tiny", 158)])
def test_stream_and_whole_file_read_the_same_events(name, n_events):
    """ORT's one-event-a-line layout: streaming it line by line gives exactly what json.loads gives."""
    whole = profile.read_trace(REAL[name])
    assert len(whole) == n_events
    assert list(profile.stream_trace(REAL[name])) == whole == json.loads(REAL[name].read_text())


def test_stream_skips_a_line_cut_off_mid_write(tmp_path):
    lines = REAL["tiny_cnn"].read_text().splitlines()
    cut = tmp_path / "cut.json"
    cut.write_text("\n".join(lines[:11]) + "\n" + lines[11][:40])  # '[' + 10 events + half an event
    streamed = list(profile.stream_trace(cut))
    assert streamed == json.loads(REAL["tiny_cnn"].read_text())[:10]
    with pytest.raises(HaseError, match="not valid JSON"):
        profile.read_trace(cut)


def test_missing_file_is_a_hase_error_for_both_readers(tmp_path):
    with pytest.raises(HaseError, match="profile file not found"):
        profile.read_trace(tmp_path / "nope.json")
    with pytest.raises(HaseError, match="profile file not found"):
        next(profile.stream_trace(tmp_path / "nope.json"))


# ---------------------------------------------------------------- classifying


@pytest.mark.parametrize("cat, name, expected", [
    ("Node", "conv1_kernel_time", ("conv1", profile.KERNEL_TIME)),
    ("Node", "/enc/MatMul_fence_before", ("/enc/MatMul", profile.FENCE_BEFORE)),
    ("Node", "a_kernel_time_fence_after", ("a_kernel_time", profile.FENCE_AFTER)),
    ("Node", "conv1", ("", profile.OTHER)),
    ("Session", "model_run", ("", profile.MODEL_RUN)),
    ("Session", "SequentialExecutor::Execute", ("", profile.EXECUTE)),
    ("Session", "ParallelExecutor::Execute", ("", profile.EXECUTE)),
    ("Session", "session_initialization", ("", profile.SESSION)),
    ("Kernel", "sgemm_128x64", ("", profile.GPU_KERNEL)),
    ("Api", "cudaLaunchKernel", ("", profile.OTHER)),
])
def test_classify(cat, name, expected):
    assert profile.classify(cat, name) == expected


def test_real_profile_events_are_classified():
    evs = list(profile.profile_events(profile.read_trace(REAL["tiny_cnn"])))
    assert Counter(e.kind for e in evs) == {profile.KERNEL_TIME: 24, profile.EXECUTE: 4, profile.MODEL_RUN: 4,
                                            profile.SESSION: 2}
    conv = next(e for e in evs if e.kind == profile.KERNEL_TIME)
    assert (conv.node_name, conv.op_type, conv.provider) == ("conv1", "FusedConv", profile.CPU_PROVIDER)
    assert (conv.ts_us, conv.dur_us, conv.pid, conv.tid) == (3540.0, 135.0, 5317, 5317)
    assert conv.node_index >= 0 and conv.args[profile.OUTPUT_TYPE_SHAPE] == [{"float": [1, 8, 32, 32]}]
    first_run = [e.node_name for e in evs if e.kind == profile.KERNEL_TIME][:6]
    assert first_run == ["conv1", "pool1", "conv2", "gap", "flatten", "fc"]


def test_metadata_and_hase_events_are_skipped_and_bad_records_rejected():
    records = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}},
               {**_ev("Node", "a_kernel_time", 5.0, 1.0), "cat": profile.HASE_CAT},
               _ev("Node", "b_kernel_time", 7.0, 2.0, {"op_name": "Relu", "node_index": "3"})]
    (only,) = profile.profile_events(records)
    assert (only.node_name, only.op_type, only.node_index, only.provider) == ("b", "Relu", 3, "")
    with pytest.raises(HaseError, match="event #1 is not a JSON object"):
        list(profile.profile_events([records[2], [1, 2]]))
    with pytest.raises(HaseError, match=r"event #0 \('x_kernel_time'\) has no numeric ts"):
        list(profile.profile_events([{"cat": "Node", "name": "x_kernel_time", "ts": "soon"}]))


# ---------------------------------------------------------------- run attribution


def test_run_ids_example_and_edges():
    assert profile.run_ids([0.0, 100.0], [50.0, 50.0], [10.0, 60.0, 100.0, 150.0, 151.0, -1.0]).tolist() == [
        0, -1, 1, 1, -1, -1]
    assert profile.run_ids([100.0, 0.0], [50.0, 50.0], [10.0, 120.0]).tolist() == [0, 1]  # indices in start order
    assert profile.run_ids([], [], [1.0, 2.0]).tolist() == [-1, -1]


def test_overlapping_runs_are_reported(caplog):
    with caplog.at_level(logging.WARNING, logger="hase.runtime.profile"):
        assert profile.run_ids([0.0, 10.0], [50.0, 50.0], [20.0]).tolist() == [1]
    assert "overlap" in caplog.text


@pytest.mark.parametrize("name, per_run", [("tiny_cnn", 6), ("if_subgraph", 6), ("bert_tiny", 76)])
def test_real_kernel_events_fall_in_their_runs(name, per_run):
    by_run = _kinds_by_run(REAL[name])
    n_runs = sum(n for (kind, _), n in by_run.items() if kind == profile.MODEL_RUN)
    assert all(by_run[(profile.KERNEL_TIME, r)] == per_run for r in range(n_runs))
    assert all(by_run[(profile.MODEL_RUN, r)] == 1 for r in range(n_runs))
    assert by_run[(profile.SESSION, -1)] == 2 and not any(r == -1 for kind, r in by_run if kind != profile.SESSION)
    if name == "if_subgraph":  # the If's subgraph runs a nested Execute inside the same run
        assert by_run[(profile.EXECUTE, 0)] == by_run[(profile.EXECUTE, 1)] == 2


@pytest.mark.parametrize("name", ["tiny_cnn", "bert_tiny"])
def test_pipeline_run_times_agree_with_the_decomposition(name):
    """The two users of run attribution (pipeline hardware time, profile decomposition) read the same numbers."""
    hw, marshal = run_times_from_profile(REAL[name])
    d = decompose.decompose(profile.load_profile(REAL[name]))
    assert np.array_equal(hw, d[decompose.KERNEL_TIME_SUM_US].to_numpy() * 1e3) and (marshal == 0).all()
