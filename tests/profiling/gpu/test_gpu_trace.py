"""GPU tracks and launch->work flow arrows in the Perfetto export, and the GPU table / JSON of `hase profile`,
on the CONSTRUCTED CUDA profile and CUPTI records of cupti_cases.py (known figures and a GPU-bound case);
test_gpu_captured.py builds the trace from a real H200 capture."""
from __future__ import annotations

import io
import json

import pytest
from cupti_cases import CLOCK, cuda_profile
from rich.console import Console

from hase.cli import main
from hase.commands import profile as profile_command
from hase.profiling.gpu import attribute
from hase.profiling.gpu.records import GpuRecording, records_frame
from hase.profiling.perfetto import GPU_PID, to_chrome_trace
from hase.profiling.run import analyze
from hase.runtime import profile
from hase.runtime.profile import parse_events


def _analysis(kernel_us: float = 50.0):
    events, recs = cuda_profile(kernel_us)
    ev = parse_events(events)
    return ev, analyze(ev, skip_runs=0, gpu=GpuRecording(records_frame(recs), CLOCK))


def test_trace_has_api_and_stream_tracks_and_one_flow_per_launch():
    ev, a = _analysis()
    trace = to_chrome_trace(ev, gpu=a.gpu)["traceEvents"]
    gpu = [e for e in trace if e.get("pid") == GPU_PID]
    names = {e["args"]["name"] for e in gpu if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"CUDA API (thread 7)", "GPU 0 stream 13"}
    work = [e for e in gpu if e["ph"] == "X" and e["args"].get("kind") in ("kernel", "memcpy")]
    starts = [e for e in gpu if e["ph"] == "s"]
    ends = {e["id"]: e for e in gpu if e["ph"] == "f"}
    assert len(work) == 8 and len(starts) == 8 and set(ends) == {s["id"] for s in starts}
    for s in starts:  # each arrow leaves a launch slice and lands where a GPU slice starts
        f = ends[s["id"]]
        assert f["bp"] == "e" and f["ts"] >= s["ts"]
        assert any(w["tid"] == f["tid"] and w["ts"] == f["ts"] for w in work)
        assert any(x["ph"] == "X" and x["tid"] == s["tid"] and x["ts"] == s["ts"] for x in gpu)
    conv = next(e for e in work if e["name"] == "conv_a")
    assert conv["args"]["node_name"] == "conv" and conv["dur"] == pytest.approx(50.0)


def test_trace_read_back_ignores_the_gpu_events(tmp_path):
    ev, a = _analysis()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(to_chrome_trace(ev, gpu=a.gpu)))
    back = profile.load_profile(path)
    assert len(back) == len(ev) and set(back[profile.CAT]) == set(ev[profile.CAT])


def test_profile_output_shows_the_gpu_table_and_verdict():
    _, a = _analysis(280.0)
    out = io.StringIO()
    profile_command._print(Console(file=out, width=200), a, None, None, None,
                           {"model": "m.onnx", "metadata": {"execution_provider": "CUDAExecutionProvider",
                                                            "intra_op_threads": 1, "opt_level": "all"}})
    text = out.getvalue()
    assert "nodes by GPU time (CUPTI" in text and "gpu-bound" in text and "conv" in text
    assert any("CUPTI: gpu-bound" in f for f in a.findings)
    report = profile_command._report(a, None, None, None, {})
    assert report["gpu"]["verdict"]["label"] == attribute.GPU_BOUND
    assert {n["node_name"] for n in report["gpu"]["nodes"]} == {"conv", "gemm"}
    json.dumps(report, allow_nan=False)


def test_cupti_on_needs_cuda(tmp_path, capsys):
    assert main(["profile", str(tmp_path / "m.onnx"), "--cupti", "on"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--ep cuda" in err[0]
