"""`hase profile MODEL.onnx` writes nothing unless asked (--keep-profile, --out-trace), and its per-op table says
how its total relates to `kernel_time sum` (`hase.profiling.run.op_totals_note`)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import onnx
import pandas as pd
import pytest
from conftest import conv_bn_relu_model, exported_model

from hase.cli import main
from hase.errors import HaseError
from hase.profiling import decompose
from hase.profiling.findings import noise_finding
from hase.profiling.run import OP_TOTALS_TOLERANCE, analyze, op_totals_note, profile_model
from hase.runtime import profile
from hase.runtime.types import EPConfig

FAST = ["--runs", "3", "--warmup", "1"]


@pytest.fixture
def in_empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A model in its own folder, an empty current directory and an empty temporary root."""
    model = tmp_path / "models" / "m.onnx"
    model.parent.mkdir()
    onnx.save(conv_bn_relu_model(), model)
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return model, tmp


def test_profile_writes_nothing_by_default(in_empty_dir, capsys):
    model, tmp = in_empty_dir
    assert main(["profile", str(model), *FAST]) == 0
    out = capsys.readouterr().out
    assert "profile: not kept" in out and "trace:   not written" in out
    assert not list(Path.cwd().iterdir()) and not list(tmp.iterdir())  # no hase_profiles/, temp folder gone
    assert [p.name for p in model.parent.iterdir()] == ["m.onnx"]
    assert main(["profile", str(model), *FAST, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] is None and report["trace"] is None and report["n_runs"] == 3
    assert not list(Path.cwd().iterdir()) and not list(tmp.iterdir())


def test_out_trace_alone_writes_only_the_trace(in_empty_dir, capsys):
    model, tmp = in_empty_dir
    assert main(["profile", str(model), *FAST, "--out-trace", "t.json", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] is None and report["trace"] == "t.json"
    assert [p.name for p in Path.cwd().iterdir()] == ["t.json"] and not list(tmp.iterdir())
    trace = json.loads(Path("t.json").read_text())
    assert any(e.get("name") == "model_run" for e in trace["traceEvents"])


@pytest.mark.parametrize("flag", ["--keep-profile", "--workdir"])  # --workdir: the older name
def test_keep_profile_keeps_the_profile_and_the_trace_beside_it(in_empty_dir, capsys, flag):
    model, tmp = in_empty_dir
    assert main(["profile", str(model), *FAST, flag, "kept", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    profile_file, trace = Path(report["profile"]), Path(report["trace"])
    assert profile_file.parent == trace.parent == Path("kept") and profile_file.name.startswith("m_")
    assert trace.name == profile_file.stem + ".hase_trace.json"
    assert sorted(p.name for p in Path("kept").iterdir()) == sorted([profile_file.name, trace.name])
    events = profile.load_profile(profile_file)
    assert len(events[events[profile.EVENT_KIND] == profile.MODEL_RUN]) == 4  # warm-up + runs
    assert not list(tmp.iterdir())


def test_keep_profile_that_is_a_file_is_refused_before_running(in_empty_dir, capfd):
    model, _ = in_empty_dir
    Path("f").write_text("")
    assert main(["profile", str(model), "--keep-profile", "f"]) == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--keep-profile" in err and "is a file" in err


# ---------------------------------------------------------------- the per-op total and kernel_time sum


def _runs(node_us: list[list[float]]) -> pd.DataFrame:
    """Events of one model_run per row of `node_us`: node i runs for node_us[run][i] µs, back to back."""
    events, t = [], 0.0
    for durations in node_us:
        total = sum(durations) + 2.0
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "ts": t, "dur": total + 2.0,
                       "pid": 1, "tid": 1, "args": {}})
        events.append({"cat": "Session", "name": "SequentialExecutor::Execute", "ph": "X", "ts": t + 1.0,
                       "dur": total, "pid": 1, "tid": 1, "args": {}})
        start = t + 2.0
        for i, dur in enumerate(durations):
            events.append({"cat": "Node", "name": f"n{i}_kernel_time", "ph": "X", "ts": start, "dur": dur, "pid": 1,
                           "tid": 1,
                           "args": {"op_name": f"Op{i}", "provider": profile.CPU_PROVIDER, "node_index": str(i)}})
            start += dur
        t += total + 100.0
    return profile.parse_events(events)


def test_slowdowns_on_different_nodes_are_explained():
    """The docstring's example: two 1 ms nodes, each slowed to 9 ms in a different one of three runs."""
    events = _runs([[9000.0, 1000.0], [1000.0, 9000.0], [1000.0, 1000.0]])
    a = analyze(events)
    assert a.op_types[decompose.KERNEL_TIME_US].sum() == 2000.0 and a.summary[decompose.KERNEL_TIME_SUM_US] == 10000.0
    assert "2.000 ms" in a.op_types_note and "10.000 ms" in a.op_types_note
    assert "80% lower because medians do not add up" in a.op_types_note
    assert "runs 2.000 to 10.000 ms" in a.op_types_note


def test_steady_runs_add_up_without_an_excuse():
    a = analyze(_runs([[1000.0, 500.0]] * 3))
    assert a.op_types[decompose.KERNEL_TIME_US].sum() == a.summary[decompose.KERNEL_TIME_SUM_US] == 1500.0
    assert "medians do not add up" not in a.op_types_note and "1.500 ms" in a.op_types_note


def test_op_totals_note_checks_its_tables():
    with pytest.raises(HaseError, match="op_types"):
        op_totals_note(pd.DataFrame({"x": [1]}), pd.DataFrame({decompose.KERNEL_TIME_SUM_US: [1.0]}))


def test_noise_finding_names_the_spread():
    steady = pd.DataFrame({decompose.MODEL_RUN_US: [1000.0, 1010.0, 990.0, 1005.0]})
    busy = pd.DataFrame({decompose.MODEL_RUN_US: [1000.0, 1100.0, 9000.0, 12000.0, 1050.0]})
    assert noise_finding(steady) == [] and noise_finding(steady.head(2)) == []
    (finding,) = noise_finding(busy)
    assert "from 1.000 to 12.000 ms over the 5 runs" in finding and "the machine was busy" in finding
    assert "the quietest of 3 blocks of consecutive runs had a median of 1.050 ms" in finding  # min of block medians
    assert noise_finding(busy, bound=20.0) == []  # within a looser bound


def test_real_model_per_op_total_matches_or_is_explained():
    """The exported tiny BERT: the per-op rows are the sum of per-node medians, and either add up to kernel_time
    sum within the tolerance or the note says by how much and why."""
    result = profile_model(exported_model("hf_bert_tiny_s64_b2"), EPConfig(), runs=7, warmup=2)
    a = analyze(result.events, result.skip_runs)
    rows = float(a.op_types[decompose.KERNEL_TIME_US].sum())
    nodes = decompose.node_summary(result.events, result.skip_runs)
    assert rows == pytest.approx(float(nodes[~nodes[decompose.NESTED]][decompose.KERNEL_TIME_US].sum()))
    total = float(a.summary[decompose.KERNEL_TIME_SUM_US])
    assert total == pytest.approx(float(a.per_run[decompose.KERNEL_TIME_SUM_US].median()))
    assert f"{rows / 1e3:.3f} ms" in a.op_types_note and f"{total / 1e3:.3f} ms" in a.op_types_note
    if abs(rows - total) > OP_TOTALS_TOLERANCE * total:
        assert f"{abs(rows - total) / total:.0%}" in a.op_types_note and "medians do not add up" in a.op_types_note
    else:
        assert "medians do not add up" not in a.op_types_note
    assert len(a.op_types) == 15 and "SkipLayerNormalization" in set(a.op_types[decompose.OP_TYPE])


def test_cli_table_has_a_total_row_and_the_note(tmp_path, capsys):
    """17 op types: the first 15 listed, the other two folded into one row, then the total and the note."""
    trace = tmp_path / "p.json"
    durations = [[100.0 * (i + 1) for i in range(17)]] * 3
    records = _runs(durations)  # parse, then write back the raw events the CLI reads
    raw = [{"cat": r[profile.CAT], "name": r[profile.NAME], "ph": "X", "ts": r[profile.TS_US], "dur": r[profile.DUR_US],
            "pid": 1, "tid": 1,
            "args": {} if r[profile.CAT] == "Session" else {"op_name": r[profile.OP_TYPE],
                                                            "provider": profile.CPU_PROVIDER,
                                                       "node_index": str(r[profile.NODE_INDEX])}}
           for r in records.to_dict("records")]
    trace.write_text(json.dumps(raw))
    assert main(["profile", "--trace", str(trace), "--out-trace", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "(2 more)" in out and "0.300" in out  # Op0 + Op1: 0.1 + 0.2 ms
    total_line = next(line for line in out.splitlines() if line.startswith("│ total "))
    assert "17" in total_line and "15.300" in total_line and "100.0%" in total_line
    assert "Rows: each node's median over the 3 runs, summed: 15.300 ms" in " ".join(out.split())
    assert main(["profile", "--trace", str(trace), "--out-trace", str(tmp_path / "t.json"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["op_types_kernel_time_us"] == 15300.0 and len(report["op_types"]) == 17
    assert report["op_types_note"].startswith("Rows: each node's median")
