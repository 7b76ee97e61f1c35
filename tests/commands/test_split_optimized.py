"""`hase split` writes ORT's optimized graph, `optimized.onnx`, beside the kernels: the graph whose nodes
kernels.csv names, runnable, with the same outputs as the model it came from."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import onnx
from conftest import exported_model

from hase.cli import main
from hase.kernels import split
from hase.kernels.inputs import make_model_feeds
from hase.runtime import sessions
from hase.runtime.types import EPConfig

EP = EPConfig()


def _check_optimized(out: Path, model_path: Path) -> onnx.ModelProto:
    """optimized.onnx holds kernels.csv's nodes in order, runs, and gives the original model's outputs."""
    optimized = onnx.load(str(out / split.OPTIMIZED_FILE))
    with (out / "kernels.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [n.name for n in optimized.graph.node] == [r["node_name"] for r in rows]
    assert [n.op_type for n in optimized.graph.node] == [r["op_type"] for r in rows]
    for r in rows:
        assert (out / r["file"]).is_file()
    original = onnx.load(str(model_path))
    feeds = make_model_feeds(original)
    ref = sessions.make_session(original.SerializeToString(), EP).run(None, feeds)
    got = sessions.make_session(str(out / split.OPTIMIZED_FILE), EP, opt_level="disabled").run(None, feeds)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return optimized


def test_split_writes_the_optimized_graph(tmp_path, capsys):
    model = exported_model("hf_bert_tiny_s64_b2")
    out = tmp_path / "k"
    assert main(["split", str(model), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["optimized"] == str(out / "optimized.onnx")
    optimized = _check_optimized(out, model)
    assert len(optimized.graph.node) == summary["n_nodes"]
    ops = {n.op_type for n in optimized.graph.node}
    fused = {"SkipLayerNormalization", "Gelu", "FusedMatMul"}  # ORT's fusions, absent from the exported graph
    assert fused <= ops and not fused & {n.op_type for n in onnx.load(str(model)).graph.node}
    assert not (out / split.OPTIMIZED_WEIGHTS).exists()  # weights inline below 2 GB


def test_split_table_names_the_optimized_graph(tmp_path, capsys):
    out = tmp_path / "k"
    assert main(["split", str(exported_model("hf_bert_tiny_s64_b2")), "--out", str(out)]) == 0
    assert f"optimized graph: {out / 'optimized.onnx'}" in capsys.readouterr().out


def test_an_optimized_graph_over_the_protobuf_limit_keeps_its_weights_beside_it(tmp_path, monkeypatch):
    """Past 2 GB one protobuf message cannot hold the graph: weights go to optimized.weights.bin (the limit is
    lowered here, so that a small model takes that path)."""
    monkeypatch.setattr(split, "PROTOBUF_MAX_BYTES", 1000)
    model = exported_model("hf_bert_tiny_s64_b2")
    split.split_to_dir(model, tmp_path, EP)
    graph_bytes = (tmp_path / split.OPTIMIZED_FILE).stat().st_size
    assert graph_bytes < 200_000 < (tmp_path / split.OPTIMIZED_WEIGHTS).stat().st_size
    _check_optimized(tmp_path, model)


def test_help_names_the_files(capsys):
    assert main(["split", "--help"]) == 0
    assert "optimized.onnx" in " ".join(capsys.readouterr().out.split())
