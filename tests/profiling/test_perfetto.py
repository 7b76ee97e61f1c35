"""hase.profiling.perfetto: Chrome-trace / Perfetto export of real and constructed ORT profiles."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from test_profile import CUDA, REAL, _ev, cuda_launch_wait_trace

from hase.errors import HaseError
from hase.profiling import decompose
from hase.profiling.perfetto import (
    GAPS_TID,
    HASE_PID,
    ORT_PID,
    REGIONS_TID,
    SPANS_TID,
    to_chrome_trace,
    write_chrome_trace,
)
from hase.runtime import profile


def _tracks(trace: dict) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def _assert_loadable(trace: dict) -> None:
    """What Perfetto's JSON importer needs: numeric X events on named tracks, properly nested per track."""
    assert trace["displayTimeUnit"] == "ms"
    tracks = _tracks(trace)
    processes = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    per_track = defaultdict(list)
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M")
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and isinstance(e["dur"], float) and e["dur"] >= 0
            assert (e["pid"], e["tid"]) in tracks and e["pid"] in processes
            per_track[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in per_track.values():
        stack: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], "events on one track overlap without nesting"
            stack.append(end)
    json.loads(json.dumps(trace, allow_nan=False))


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_profile_trace(name):
    events = profile.load_profile(REAL[name])
    trace = to_chrome_trace(events)
    _assert_loadable(trace)
    tracks = set(_tracks(trace).values())
    assert "Nodes: CPUExecutionProvider" in tracks and "Session (model_run, Execute)" in tracks
    ort = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == ORT_PID]
    hase = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == HASE_PID]
    assert len(ort) == len(events)
    spans = [e for e in hase if e["tid"] == SPANS_TID]
    assert len(spans) == len(decompose.node_spans(events))
    regions = [e for e in hase if e["tid"] == REGIONS_TID]
    assert len(regions) == 2 * (events[profile.EVENT_KIND] == profile.MODEL_RUN).sum()
    assert len([e for e in hase if e["tid"] == GAPS_TID]) == len(decompose.node_gaps(events))


def test_cuda_trace_has_one_track_per_provider_and_keeps_args():
    events = profile.parse_events(cuda_launch_wait_trace(2))
    trace = to_chrome_trace(events)
    _assert_loadable(trace)
    tracks = set(_tracks(trace).values())
    assert {"Nodes: CUDAExecutionProvider", "Nodes: CPUExecutionProvider"} <= tracks
    conv = next(e for e in trace["traceEvents"] if e["name"] == "conv0_kernel_time")
    assert conv["args"]["provider"] == CUDA and conv["args"]["op_name"] == "FusedConv"
    fence = next(e for e in trace["traceEvents"] if e["name"] == "conv0_fence_before")
    assert _tracks(trace)[(fence["pid"], fence["tid"])] == "Nodes: CUDAExecutionProvider"


def test_threads_of_one_provider_get_their_own_tracks():
    ev = [_ev("Session", "model_run", 0.0, 300.0),
          _ev("Node", "a_kernel_time", 10.0, 100.0, {"op_name": "MatMul", "provider": profile.CPU_PROVIDER}, tid=1),
          _ev("Node", "b_kernel_time", 60.0, 100.0, {"op_name": "MatMul", "provider": profile.CPU_PROVIDER}, tid=2)]
    trace = to_chrome_trace(profile.parse_events(ev), derived=False)
    assert {"Nodes: CPUExecutionProvider (thread 1)", "Nodes: CPUExecutionProvider (thread 2)"} <= set(
        _tracks(trace).values())
    assert all(e.get("cat") != profile.HASE_CAT for e in trace["traceEvents"])


def test_write_is_atomic_and_reloads(tmp_path):
    events = profile.load_profile(REAL["tiny_cnn"])
    path = write_chrome_trace(to_chrome_trace(events), tmp_path / "sub" / "t.json")
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.json"]  # no temp file left behind
    reloaded = profile.load_profile(path)
    assert decompose.decompose(reloaded).equals(decompose.decompose(events))


def test_write_failure_is_a_hase_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(HaseError, match="cannot write the trace"):
        write_chrome_trace({"traceEvents": []}, Path(blocker) / "t.json")
