"""What the collect and store tests share: a fast device config, models built to fail, the completeness check."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from hase.measure.store import Store

FAST = """
[kernel_timing]
warmup = 2
min_runs = 5
max_runs = 20
min_time_s = 0.0
max_time_s = 0.05
[model_timing]
warmup = 2
min_runs = 5
max_runs = 20
min_time_s = 0.0
max_time_s = 0.2
[profile]
warmup = 1
runs = 3
[cold]
sessions = 3
max_mb = 64
[[device]]
name = "cpu-test"
ep = "cpu"
intra_op_threads = 1
opt_level = "extended"
"""


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "t", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def string_input_model() -> onnx.ModelProto:
    """A string input passed through Identity beside a float Relu: ORT runs it, but cannot bind the string."""
    return _model([helper.make_node("Identity", ["s"], ["t"], name="pass"), helper.make_node("Relu", ["x"], ["y"])],
                  [helper.make_tensor_value_info("s", TensorProto.STRING, [3]),
                   helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                  [helper.make_tensor_value_info("t", TensorProto.STRING, [3]),
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])


def unknown_op_model() -> onnx.ModelProto:
    """A well-formed ONNX file with an operator ONNX Runtime does not have: it fails at session creation."""
    return _model([helper.make_node("NoSuchOp", ["x"], ["y"], name="bad")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])


def relu_model(n: int = 16) -> onnx.ModelProto:
    """One Relu on [1, n]: the smallest model that measures, different content for each n."""
    return _model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])])


def integrity(store_path: Path) -> str:
    """SQLite's full integrity check of a store file."""
    conn = sqlite3.connect(store_path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def check_complete(store_path: Path, n_models: int) -> dict[str, int]:
    """Every model measured once, every unique kernel measured warm+cold once (or skipped), db intact."""
    assert integrity(store_path) == "ok"
    with Store(store_path) as s:
        mm, km = s.table("model_measurements"), s.table("kernel_measurements")
        mn, skips = s.table("model_nodes"), s.table("skips")
        counts = s.counts()
    assert len(mm) == mm.model_id.nunique() == n_models
    assert not km.duplicated(["kernel_id", "device", "variant"]).any()
    measured = set(km.kernel_id)
    skipped = {j.split(":", 1)[1] for j in skips.job if j.startswith("kernel:")}
    assert set(mn.kernel_id) == measured | skipped
    assert (km.groupby("kernel_id").variant.nunique() == 2).all()
    assert (mm.median_ms > 0).all() and (km.median_ms > 0).all()
    for col in ("device", "cpu_model", "ort_version", "execution_provider", "intra_op_threads", "opt_level"):
        assert km[col].notna().all() and mm[col].notna().all()
    return counts
