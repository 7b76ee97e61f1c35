"""Shared fixtures: tiny real ONNX models, each built for the property a test checks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
EXPORTED = REPO.parent / "shared" / "models" / "exported"


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def conv_bn_relu_model(batch: int | str = 1, c: int = 8, hw: int = 16) -> onnx.ModelProto:
    """Conv -> BatchNorm -> Relu -> Conv -> Add(residual) -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(0)
    w = lambda *s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1)  # noqa: E731
    inits = []
    for name, arr in [("w1", w(c, 3, 3, 3)), ("b1", w(c)), ("w2", w(c, c, 3, 3)), ("b2", w(c)),
                      ("fc_w", w(10, c)), ("fc_b", w(10))]:
        arr.name = name
        inits.append(arr)
    for name, val in [("bn_s", 1.0), ("bn_b", 0.0), ("bn_m", 0.0), ("bn_v", 1.0)]:
        inits.append(numpy_helper.from_array(np.full(c, val, np.float32), name))
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn1"], name="bn1"),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
        helper.make_node("GlobalAveragePool", ["a"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1, name="fc"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])
    return _model(nodes, [x], [y], inits)


def embedding_model(vocab: int = 50) -> onnx.ModelProto:
    """int64 token ids -> Gather from a table -> Sqrt(abs) ... : inputs must be valid ids."""
    table = numpy_helper.from_array(np.random.default_rng(1).standard_normal((vocab, 4)).astype(np.float32), "table")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="emb"),
             helper.make_node("Abs", ["e"], ["a"], name="abs"),
             helper.make_node("Sqrt", ["a"], ["y"], name="sqrt")]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 4])
    return _model(nodes, [ids], [y], [table])


@pytest.fixture
def conv_model_path(tmp_path: Path) -> Path:
    p = tmp_path / "conv.onnx"
    onnx.save(conv_bn_relu_model(), p)
    return p


@pytest.fixture
def exported_dir() -> Path:
    if not EXPORTED.is_dir():
        pytest.skip(f"shared exported models not found at {EXPORTED}")
    return EXPORTED
