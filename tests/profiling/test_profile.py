"""hase.runtime.profile.load_profile -> hase.profiling.decompose, hase.profiling.run and `hase profile`.

Golden checks use real ORT 1.32 CPU profiles under tests/data/profiles; CUDA-EP and older-ORT (fenced)
formats are built by `fenced_run`, since no GPU made them.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from onnx import TensorProto, helper

from hase.cli import main
from hase.commands import profile as profile_command
from hase.errors import HaseError
from hase.profiling import decompose
from hase.profiling import run as run_module
from hase.profiling.findings import diagnose
from hase.profiling.run import analyze, profile_folder, profile_model
from hase.runtime import profile
from hase.runtime.types import EPConfig

DATA = Path(__file__).parents[1] / "data" / "profiles"
REAL = {name: DATA / f"ort132_cpu_{name}.json" for name in ("tiny_cnn", "if_subgraph", "bert_tiny")}
CUDA = "CUDAExecutionProvider"


# ---------------------------------------------------------------- constructed traces


def _ev(cat: str, name: str, ts: float, dur: float, args: dict | None = None, tid: int = 7) -> dict:
    return {"cat": cat, "pid": 7, "tid": tid, "dur": dur, "ts": ts, "ph": "X", "name": name, "args": args or {}}


def fenced_run(t0: float, nodes: list[tuple[str, str, str, float]], *, before: float = 10.0, after: float = 10.0,
               gap: float = 3.0, fence_before: float = 2.0, fence_after: float = 1.0, inner: float = 1.0,
               fences: bool = True) -> tuple[list[dict], float]:
    """Events of one model_run as older/CUDA ORT builds write them, and the run's end time.

    Each node (name, op, provider, kernel_us) is fence_before, `inner` µs, kernel_time, `inner` µs,
    fence_after; nodes are `gap` µs apart; Execute has 1 µs before the first and after the last node.
    Fence events carry only op_name, as in ORT.
    """
    ev, ex0 = [], t0 + before
    t = ex0 + 1.0
    for i, (name, op, provider, kernel) in enumerate(nodes):
        if fences:
            ev.append(_ev("Node", f"{name}_fence_before", t, fence_before, {"op_name": op}))
            t += fence_before + inner
        ev.append(_ev("Node", f"{name}_kernel_time", t, kernel,
                      {"op_name": op, "provider": provider, "node_index": str(i)}))
        t += kernel
        if fences:
            ev.append(_ev("Node", f"{name}_fence_after", t + inner, fence_after, {"op_name": op}))
            t += inner + fence_after
        t += gap
    ex_end = t - gap + 1.0
    ev.append(_ev("Session", "SequentialExecutor::Execute", ex0, ex_end - ex0))
    ev.append(_ev("Session", "model_run", t0, ex_end + after - t0))
    return ev, ex_end + after


def cuda_launch_wait_trace(n_runs: int = 3) -> list[dict]:
    """ResNet-like CUDA run as in seed 000: µs of launch, 40 ms before Execute, 229 ms waiting after it."""
    nodes = [("MemcpyFromHost_0", "MemcpyFromHost", CUDA, 20.0)]
    nodes += [(f"conv{i}", "FusedConv", CUDA, 5.0) for i in range(20)]
    nodes += [("nms", "NonMaxSuppression", profile.CPU_PROVIDER, 30.0), ("topk", "TopK", profile.CPU_PROVIDER, 8.0)]
    nodes += [("MemcpyToHost_0", "MemcpyToHost", CUDA, 15.0)]
    events = [_ev("Session", "session_initialization", 0.0, 900.0)]
    t = 1000.0
    for _ in range(n_runs):
        run, t = fenced_run(t, nodes, before=40_000.0, after=229_000.0)
        events += run
        t += 100.0
    return events


# ---------------------------------------------------------------- loading


def test_load_real_profile_columns_and_runs():
    ev = profile.load_profile(REAL["tiny_cnn"])
    assert tuple(ev.columns) == profile.EVENT_COLUMNS
    assert set(ev[profile.EVENT_KIND]) == {profile.SESSION, profile.MODEL_RUN, profile.EXECUTE, profile.KERNEL_TIME}
    assert sorted(ev.loc[ev[profile.EVENT_KIND] == profile.MODEL_RUN, decompose.RUN_ID]) == [0, 1, 2, 3]
    assert (ev.loc[ev[profile.EVENT_KIND] == profile.SESSION,
                   decompose.RUN_ID] == -1).all()  # session init is outside runs
    kt = ev[ev[profile.EVENT_KIND] == profile.KERNEL_TIME]
    assert (kt[decompose.RUN_ID] >= 0).all() and (kt[decompose.PROVIDER] == profile.CPU_PROVIDER).all()
    conv = kt[kt[decompose.NODE_NAME] == "conv1"].iloc[0]
    assert conv[decompose.OP_TYPE] == "FusedConv" and conv[decompose.NODE_INDEX] >= 0
    assert json.loads(conv[profile.OUTPUT_TYPE_SHAPE]) == [{"float": [1, 8, 32, 32]}]


def test_trace_events_object_and_fence_provider_fill(tmp_path):
    run, _ = fenced_run(0.0, [("a", "Conv", CUDA, 5.0)])
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"traceEvents": run}))
    ev = profile.load_profile(path)
    fences = ev[ev[profile.EVENT_KIND].isin([profile.FENCE_BEFORE, profile.FENCE_AFTER])]
    assert len(fences) == 2 and (fences[decompose.PROVIDER] == CUDA).all() and (fences[decompose.NODE_INDEX] == 0).all()


def test_other_executor_names_count_as_execute():
    run, _ = fenced_run(0.0, [("a", "Conv", CUDA, 5.0)])
    for e in run:
        if e["name"] == "SequentialExecutor::Execute":
            e["name"] = "ParallelExecutor::Execute"
    ev = profile.parse_events(run)
    assert (ev[profile.EVENT_KIND] == profile.EXECUTE).sum() == 1
    assert decompose.decompose(ev)[decompose.EXECUTE_US].notna().all()


@pytest.mark.parametrize("content, match", [
    ('{"cat": "Session", "name": "model_run", "ts": 1', "not valid JSON"),  # truncated
    ("not json at all", "not valid JSON"),
    ('{"foo": 1}', "no trace events"),
    ("[]", "no complete"),
    ('[{"cat": "Node", "name": "a_kernel_time"}]', "no numeric ts"),
    ("[1, 2]", "not a JSON object"),
])
def test_bad_profile_files(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(HaseError, match=match):
        profile.load_profile(path)


def test_missing_profile_file(tmp_path):
    with pytest.raises(HaseError, match="not found"):
        profile.load_profile(tmp_path / "nope.json")


def test_wrong_dataframe_and_runless_profile():
    with pytest.raises(HaseError, match="lacks columns"):
        decompose.decompose(pd.DataFrame({"name": ["x"]}))
    ev = profile.parse_events([_ev("Node", "a_kernel_time", 0.0, 5.0, {"op_name": "Relu"})])
    with pytest.raises(HaseError, match="no model_run"):
        decompose.decompose(ev)
    with pytest.raises(HaseError, match="skips all 4"):
        decompose.decompose(profile.load_profile(REAL["tiny_cnn"]), skip_runs=4)


# ---------------------------------------------------------------- golden: real ORT 1.32 CPU profiles


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_profile_identities(name):
    ev = profile.load_profile(REAL[name])
    d = decompose.decompose(ev)
    spans = decompose.node_spans(ev)
    assert (spans[decompose.SPAN_SOURCE] == profile.KERNEL_TIME).all()  # current CPU builds write no fences
    assert np.allclose(d[decompose.MODEL_RUN_US],
                       d[decompose.BEFORE_EXECUTE_US] + d[decompose.EXECUTE_US] + d[decompose.AFTER_EXECUTE_US])
    assert np.allclose(d[decompose.MODEL_RUN_OUTSIDE_EXECUTE_US],
                       d[decompose.BEFORE_EXECUTE_US] + d[decompose.AFTER_EXECUTE_US])
    assert (d[decompose.EXECUTE_US] >= d[decompose.NODE_TIMELINE_SPAN_US]).all()
    assert (d[decompose.BEFORE_EXECUTE_US] >= 0).all() and (d[decompose.AFTER_EXECUTE_US] >= 0).all()
    assert (d[decompose.KERNEL_TIME_SUM_US] <= d[decompose.NODE_SPAN_SUM_US]).all()
    assert (d[decompose.NODE_NON_KERNEL_US] == 0).all() and (d[decompose.NODE_OVERLAP_US] == 0).all()
    assert np.allclose(d[decompose.NODE_TIMELINE_SPAN_US],
                       d[decompose.KERNEL_TIME_SUM_US] + d[decompose.NODE_NON_KERNEL_US]
                       + d[decompose.NODE_GAP_US] - d[decompose.NODE_OVERLAP_US])
    assert (d[decompose.N_FENCED_NODES] == 0).all() and (d[decompose.N_MEMCPY_NODES] == 0).all()


def test_real_profile_matches_raw_json():
    """Recompute run 2 of the tiny CNN straight from the JSON, independently of the DataFrame code."""
    raw = json.loads(REAL["tiny_cnn"].read_text())
    run = sorted((e for e in raw if e["name"] == "model_run"), key=lambda e: e["ts"])[2]
    end = run["ts"] + run["dur"]
    inside = [e for e in raw if run["ts"] <= e["ts"] <= end]
    ex = next(e for e in inside if e["name"] == "SequentialExecutor::Execute")
    kernels = [e for e in inside if e["name"].endswith("_kernel_time")]
    row = decompose.decompose(profile.load_profile(REAL["tiny_cnn"])).set_index(decompose.RUN_ID).loc[2]
    assert row[decompose.MODEL_RUN_US] == run["dur"] and row[decompose.EXECUTE_US] == ex["dur"]
    assert row[decompose.BEFORE_EXECUTE_US] == ex["ts"] - run["ts"]
    assert row[decompose.KERNEL_TIME_SUM_US] == sum(e["dur"] for e in kernels)
    first, last = min(e["ts"] for e in kernels), max(e["ts"] + e["dur"] for e in kernels)
    assert row[decompose.NODE_TIMELINE_SPAN_US] == last - first
    assert row[decompose.N_NODES] == len(kernels) == 6


def test_real_profile_breakdowns():
    ev = profile.load_profile(REAL["tiny_cnn"])
    ops = decompose.op_type_totals(ev, skip_runs=1)
    assert ops.iloc[0][decompose.OP_TYPE] == "FusedConv" and ops.iloc[0][decompose.N_NODES] == 2  # ORT fused Conv+Relu
    assert ops[decompose.KERNEL_TIME_SHARE].sum() == pytest.approx(1.0)
    top = decompose.top_nodes(ev, 2, skip_runs=1)
    assert len(top) == 2 and top.iloc[0][decompose.SPAN_US] >= top.iloc[1][decompose.SPAN_US]
    assert (top[decompose.N_RUNS] == 3).all()
    prov = decompose.provider_counts(ev)
    assert prov.to_dict("records")[0][decompose.PROVIDER] == profile.CPU_PROVIDER
    assert prov.iloc[0][decompose.N_NODES] == 6
    s = decompose.summarize(decompose.decompose(ev, skip_runs=1))
    assert s[decompose.N_RUNS] == 3
    assert s[decompose.MODEL_RUN_US] == decompose.decompose(ev, 1)[decompose.MODEL_RUN_US].median()


def test_real_subgraph_nodes_are_nested_and_counted_once():
    ev = profile.load_profile(REAL["if_subgraph"])
    spans = decompose.node_spans(ev)
    assert set(spans.loc[spans[decompose.NESTED], decompose.NODE_NAME]) == {"then_relu", "then_neg"}
    d = decompose.decompose(ev)
    top = spans[~spans[decompose.NESTED]]
    assert (d[decompose.N_NODES] == 4).all() and (d[decompose.N_NESTED_NODES] == 2).all()
    per_run = top.groupby(decompose.RUN_ID)[decompose.KERNEL_TIME_US].sum()
    assert d[decompose.KERNEL_TIME_SUM_US].tolist() == per_run.tolist()
    outer = ev[ev[profile.EVENT_KIND] == profile.EXECUTE].groupby(decompose.RUN_ID)[decompose.DUR_US].max()
    assert d[decompose.EXECUTE_US].tolist() == outer.tolist()  # the outer Execute, not the If's nested one
    assert any("subgraphs" in f for f in diagnose(decompose.summarize(d), decompose.provider_counts(ev)))


def test_warmup_finding_on_real_first_run():
    ev = profile.load_profile(REAL["tiny_cnn"])
    assert any("--skip-runs 1" in f for f in analyze(ev, skip_runs=0).findings)
    assert not any("--skip-runs" in f for f in analyze(ev, skip_runs=1).findings)


# ---------------------------------------------------------------- constructed: fences, CUDA, overlap


def test_cuda_launch_vs_wait():
    ev = profile.parse_events(cuda_launch_wait_trace())
    spans = decompose.node_spans(ev)
    assert (spans[decompose.SPAN_SOURCE] == "fence").all()
    conv = spans[spans[decompose.NODE_NAME] == "conv3"].iloc[0]
    assert conv[decompose.KERNEL_TIME_US] == 5.0 and conv[decompose.SPAN_US] == 2.0 + 1.0 + 5.0 + 1.0 + 1.0
    d = decompose.decompose(ev)
    n = 24
    assert (d[decompose.N_NODES] == n).all() and (d[decompose.N_MEMCPY_NODES] == 2).all()
    assert (d[decompose.N_FENCED_NODES] == n).all()
    assert (d[decompose.NODE_NON_KERNEL_US] == n * 5.0).all() and (d[decompose.NODE_GAP_US] == (n - 1) * 3.0).all()
    assert (d[decompose.EXECUTE_OUTSIDE_NODES_US] == 2.0).all() and (d[decompose.AFTER_EXECUTE_US] == 229_000.0).all()
    prov = decompose.provider_counts(ev).set_index(decompose.PROVIDER)[decompose.N_NODES].to_dict()
    assert prov == {CUDA: 22, profile.CPU_PROVIDER: 2}
    summary = decompose.summarize(d)
    findings = diagnose(summary, decompose.provider_counts(ev))
    share = summary[decompose.AFTER_EXECUTE_US] / summary[decompose.MODEL_RUN_US]
    assert "CUDA EP: kernel_time is CPU launch time" in findings[0]
    assert f"{share:.0%} of model_run is after Execute, i.e. waiting for the GPU" in findings[0]
    assert any("2 nodes fell back to CPUExecutionProvider" in f for f in findings)
    assert any("2 Memcpy nodes" in f for f in findings)


def test_cuda_without_wait_still_warns_about_launch_time():
    run, _ = fenced_run(0.0, [("a", "Conv", CUDA, 500.0)], after=5.0)
    ev = profile.parse_events(run)
    findings = diagnose(decompose.summarize(decompose.decompose(ev)), decompose.provider_counts(ev))
    assert "kernel_time is CPU launch time" in findings[0] and "waiting for the GPU" not in findings[0]


def test_older_cpu_trace_with_fences():
    nodes = [("conv", "Conv", profile.CPU_PROVIDER, 300.0), ("relu", "Relu", profile.CPU_PROVIDER, 20.0)]
    run0, t = fenced_run(0.0, nodes, fence_before=4.0, fence_after=2.0, gap=6.0)
    run1, _ = fenced_run(t + 50.0, nodes, fence_before=4.0, fence_after=2.0, gap=6.0)
    ev = profile.parse_events(run0 + run1)
    d = decompose.decompose(ev)
    assert (d[decompose.KERNEL_TIME_SUM_US] == 320.0).all() and (d[decompose.NODE_NON_KERNEL_US] == 2 * 8.0).all()
    assert (d[decompose.NODE_SPAN_SUM_US] == 336.0).all() and (d[decompose.NODE_GAP_US] == 6.0).all()
    assert (d[decompose.NODE_TIMELINE_SPAN_US] == 342.0).all()
    summary = decompose.node_summary(ev)
    assert summary.set_index(decompose.NODE_NAME).loc["conv", decompose.SPAN_US] == 308.0
    findings = diagnose(decompose.summarize(d), decompose.provider_counts(ev))
    assert not any("no fence events" in f for f in findings)


def test_overlapping_nodes_use_the_union():
    """Parallel executor: nodes on two threads overlap; gaps are idle time, overlap is subtracted."""
    ev = [_ev("Session", "model_run", 0.0, 300.0), _ev("Session", "SequentialExecutor::Execute", 5.0, 250.0),
          _ev("Node", "a_kernel_time", 10.0, 100.0, {"op_name": "MatMul", "provider": profile.CPU_PROVIDER}, tid=1),
          _ev("Node", "b_kernel_time", 60.0, 100.0, {"op_name": "MatMul", "provider": profile.CPU_PROVIDER}, tid=2),
          _ev("Node", "c_kernel_time", 210.0, 10.0, {"op_name": "Add", "provider": profile.CPU_PROVIDER}, tid=1)]
    d = decompose.decompose(profile.parse_events(ev)).iloc[0]
    assert d[decompose.NODE_TIMELINE_SPAN_US] == 210.0 and d[decompose.N_NODES] == 3
    assert d[decompose.N_NESTED_NODES] == 0
    assert d[decompose.NODE_GAP_US] == 50.0 and d[decompose.NODE_OVERLAP_US] == 50.0
    gaps = decompose.node_gaps(profile.parse_events(ev))
    assert gaps.to_dict("records") == [{decompose.RUN_ID: 0, decompose.TS_US: 160.0, decompose.DUR_US: 50.0,
                                        decompose.AFTER_NODE: "b",
                                        decompose.BEFORE_NODE: "c"}]


def test_repeated_node_in_one_run_is_summed():
    """A Loop body node runs several times per run: `call` numbers them and node_summary sums them."""
    run, _ = fenced_run(0.0, [("body", "Add", profile.CPU_PROVIDER, 10.0)] * 3, fences=False)
    spans = decompose.node_spans(profile.parse_events(run))
    assert spans[decompose.CALL].tolist() == [0, 1, 2]
    assert decompose.node_summary(profile.parse_events(run)).iloc[0][decompose.KERNEL_TIME_US] == 30.0


# ---------------------------------------------------------------- profile_model and the CLI


def _tiny_model(path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], rng.standard_normal(108).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("ReduceMean", ["r"], ["y"], name="mean", keepdims=0)]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_profile_model_skips_warmup(tmp_path):
    result = profile_model(_tiny_model(tmp_path / "m.onnx"), EPConfig(), runs=3, warmup=2,
                           input_shapes={"x": (2, 3, 16, 16)}, workdir=tmp_path / "wd")
    assert result.profile_path.parent == tmp_path / "wd" and result.skip_runs == 2
    assert result.wall.n == 3 and result.wall.median_ms > 0
    d = decompose.decompose(result.events, result.skip_runs)
    assert d[decompose.RUN_ID].tolist() == [2, 3, 4] and (d[decompose.N_NODES] >= 2).all()
    assert result.metadata["execution_provider"] == profile.CPU_PROVIDER


def test_profiled_runs_stop_once_their_median_is_tight(tmp_path):
    model = _tiny_model(tmp_path / "m.onnx")
    shapes = {"x": (2, 3, 16, 16)}
    # two runs' interval is their range: (b - a) / 2 is always within the median (a + b) / 2, so rel_ci=1 stops at 2
    quick = profile_model(model, EPConfig(), runs=10, warmup=1, input_shapes=shapes, min_runs=2, rel_ci=1.0)
    assert quick.runs == 2 and quick.wall.n == 2
    assert decompose.decompose(quick.events, quick.skip_runs)[decompose.RUN_ID].tolist() == [1, 2]
    full = profile_model(model, EPConfig(), runs=5, warmup=1, input_shapes=shapes, min_runs=2)  # rel_ci 0: all runs
    assert full.runs == 5
    assert decompose.decompose(full.events, full.skip_runs)[decompose.RUN_ID].tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(HaseError, match="1 <= min_runs <= runs"):
        profile_model(model, EPConfig(), runs=3, warmup=1, input_shapes=shapes, min_runs=4)


def test_cli_profiles_a_model(tmp_path, capsys):
    model = _tiny_model(tmp_path / "m.onnx")
    rc = main(["profile", str(model), "--runs", "3", "--warmup", "1", "--input-shape", "x=1,3,16,16",
               "--workdir", str(tmp_path / "wd")])
    out = capsys.readouterr().out
    assert rc == 0 and "model_run" in out and "after Execute" in out and "Findings" in out
    traces = list((tmp_path / "wd").glob("*.hase_trace.json"))
    assert len(traces) == 1
    trace = json.loads(traces[0].read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and "name" in e["args"]}
    assert {"ONNX Runtime profile", "Hase derived", "Nodes: CPUExecutionProvider"} <= names


def test_cli_json(tmp_path, capsys):
    model = _tiny_model(tmp_path / "m.onnx")
    out_trace = tmp_path / "t" / "trace.json"
    rc = main(["profile", str(model), "--runs", "2", "--warmup", "1", "--input-shape", "x=1,3,16,16",
               "--workdir", str(tmp_path), "--out-trace", str(out_trace), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and out_trace.is_file() and report["trace"] == str(out_trace)
    assert report["n_runs"] == 2 and report["skip_runs"] == 1 and report["wall_ms"]["n"] == 2
    dec = report["decomposition_us"]
    assert dec[decompose.MODEL_RUN_US] == pytest.approx(
        dec[decompose.BEFORE_EXECUTE_US] + dec[decompose.EXECUTE_US] + dec[decompose.AFTER_EXECUTE_US], abs=1.0)
    assert isinstance(dec[decompose.N_NODES], (int, float)) and len(report["decomposition_per_run"]) == 2
    assert report["providers"][0][decompose.PROVIDER] == profile.CPU_PROVIDER and isinstance(report["findings"], list)


def test_cli_reads_a_profile_and_its_own_trace(tmp_path, capsys):
    out_trace = tmp_path / "cuda.hase_trace.json"
    cuda = tmp_path / "cuda.json"
    cuda.write_text(json.dumps(cuda_launch_wait_trace()))
    assert main(["profile", "--trace", str(cuda), "--skip-runs", "1", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["trace"] == str(out_trace) and "waiting for the GPU" in first["findings"][0]
    assert main(["profile", "--trace", str(out_trace), "--skip-runs", "1", "--json",
                 "--out-trace", str(tmp_path / "again.json")]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["decomposition_us"] == first["decomposition_us"]  # derived events are ignored on reload
    assert main(["profile", "--trace", str(REAL["bert_tiny"]), "--out-trace", str(tmp_path / "b.json")]) == 0
    assert "SkipLayerNormalization" in capsys.readouterr().out


@pytest.mark.parametrize("content", [None, "not json", '[{"cat": "Session", "name": "model_run", "ts": 1'])
def test_cli_bad_profile_is_one_line(tmp_path, capsys, content):
    path = tmp_path / "p.json"
    if content is not None:
        path.write_text(content)
    assert main(["profile", "--trace", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hase: error:") and len(err.splitlines()) == 1 and "Traceback" not in err


def test_cli_needs_exactly_one_source(tmp_path, capsys):
    assert main(["profile"]) == 2
    assert "exactly one" in capsys.readouterr().err
    assert main(["profile", str(tmp_path / "missing.onnx")]) == 2
    assert capsys.readouterr().err.startswith("hase: error:")


# ---------------------------------------------------------------- failures leave nothing behind


def _rejected_model(path: Path) -> Path:
    """A model ONNX accepts and ONNX Runtime rejects (an op no opset has)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], name="n")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_cli_on_a_model_ort_rejects_prints_one_line_and_no_profile(tmp_path, capfd):
    """ORT's own `[E:onnxruntime ... EndProfiling]` line is silenced and its 0-byte profile removed."""
    model = _rejected_model(tmp_path / "bad.onnx")
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / "bad_old.json").write_text("[]")  # an earlier profile of the same stem stays
    capfd.readouterr()
    assert main(["profile", str(model), "--workdir", str(tmp_path / "wd")]) == 2
    out, err = capfd.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("hase: error: ONNX Runtime cannot load the model")
    assert "EndProfiling" not in err + out
    assert [p.name for p in (tmp_path / "wd").iterdir()] == ["bad_old.json"]
    assert main(["profile", str(model), "--workdir", str(tmp_path / "new" / "wd")]) == 2
    assert not (tmp_path / "new").exists()  # folders made for the profile go too


def test_a_failed_run_removes_its_profile_and_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    model = _tiny_model(tmp_path / "m.onnx")

    def fail(session, feeds):
        raise MemoryError("Unable to allocate 9 TiB")

    monkeypatch.setattr(run_module, "_run", fail)
    with pytest.raises(MemoryError):
        profile_model(model, EPConfig(), runs=2, warmup=1, input_shapes={"x": (1, 3, 16, 16)})
    assert not list((tmp_path / "tmp").iterdir())  # the hase_profile_* folder went with its profile
    with pytest.raises(MemoryError):
        profile_model(model, EPConfig(), runs=2, warmup=1, input_shapes={"x": (1, 3, 16, 16)},
                      workdir=tmp_path / "wd")
    assert not (tmp_path / "wd").exists()


def test_profile_folder_keeps_what_was_there(tmp_path):
    (tmp_path / "m_2020.json").write_text("[]")
    with pytest.raises(KeyboardInterrupt), profile_folder(tmp_path, "m") as folder:
        (folder / "m_2026.json").write_text("")
        (folder / "other.json").write_text("")  # not a profile of this model: not Hase's to remove
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m_2020.json", "other.json"]
    with pytest.raises(HaseError, match="is a file, not a directory"), profile_folder(tmp_path / "m_2020.json", "m"):
        pass


def test_cli_checks_output_paths_before_running(tmp_path, capfd, monkeypatch):
    model = _tiny_model(tmp_path / "m.onnx")
    monkeypatch.setattr(profile_command, "profile_model", lambda *a, **k: pytest.fail("ran before checking outputs"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    for flags in (["--keep-profile", str(blocker)], ["--out-trace", str(blocker / "t.json")],
                  ["--out-trace", str(tmp_path)]):
        assert main(["profile", str(model), "--input-shape", "x=1,3,16,16", *flags]) == 2
        err = capfd.readouterr().err
        assert len(err.strip().splitlines()) == 1 and flags[0] in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "m.onnx"]


def test_cli_trace_output_next_to_an_unwritable_profile(tmp_path, capfd):
    profile = REAL["bert_tiny"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["profile", "--trace", str(profile), "--out-trace", str(blocker / "x.json")]) == 2
    assert "cannot be written" in capfd.readouterr().err
