"""hase.profiling.gpu.cpu_preferred: CPU nodes of a CUDA session split into ORT's deliberate shape-subgraph placement
and true fallbacks, on real exported models' graphs and on tiny graphs built for one rule each."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from hase.profiling.gpu.cpu_preferred import shape_subgraph_nodes, split_cpu_nodes

MODELS = Path(__file__).parents[2] / "data" / "models"


@pytest.mark.parametrize("name", ["hf_bert_tiny_s64_b2.onnx", "hf_gpt2_tiny_s64_b1.onnx"])
def test_real_transformer_shape_subgraph(name):
    graph = onnx.load(MODELS / name, load_external_data=False).graph
    ops = {n.name: n.op_type for n in graph.node}
    shape = shape_subgraph_nodes(graph, set())
    assert "Concat" in {ops[n] for n in shape} and "Gather" in {ops[n] for n in shape}
    assert not {ops[n] for n in shape} & {"MatMul", "Gemm", "Softmax", "LayerNormalization", "Shape"}
    # a profile that shows the shape nodes and one MatMul on the CPU: only the MatMul is a fallback
    matmul = next(n.name for n in graph.node if n.op_type in ("MatMul", "Gemm"))
    split = split_cpu_nodes(graph, shape | {matmul})
    assert split.shape == frozenset(shape) and split.fallback == frozenset({matmul})


def _graph(nodes, inits=(), dtype=TensorProto.FLOAT) -> onnx.GraphProto:
    return helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dtype, [2, 3, 4])],
                             [helper.make_tensor_value_info("y", dtype, None)], list(inits))


def test_shape_chain_is_placed_and_reshape_data_is_not():
    g = _graph([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                helper.make_node("Gather", ["s", "i"], ["d"], name="gather"),
                helper.make_node("Concat", ["d", "m1"], ["t"], name="concat", axis=0),
                helper.make_node("Reshape", ["x", "t"], ["y"], name="reshape")],
               [numpy_helper.from_array(np.array([0], np.int64), "i"),
                numpy_helper.from_array(np.array([-1], np.int64), "m1")])
    assert shape_subgraph_nodes(g, set()) == {"gather", "concat"}  # Reshape reads x from the GPU


def test_large_initializer_host_input_and_half_precision_stop_the_walk():
    big = numpy_helper.from_array(np.zeros(101, np.int64), "big")
    g = _graph([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                helper.make_node("Add", ["s", "big"], ["a"], name="add_big"),
                helper.make_node("Reshape", ["s", "s"], ["r"], name="reshape_host_input"),
                helper.make_node("Identity", ["x"], ["y"], name="id")], [big])
    assert shape_subgraph_nodes(g, set()) == set()
    h = _graph([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                helper.make_node("Cast", ["s"], ["c"], name="cast", to=TensorProto.FLOAT16),
                helper.make_node("Mul", ["c", "x"], ["y"], name="mul")], dtype=TensorProto.FLOAT16)
    assert shape_subgraph_nodes(h, set()) == {"cast"}  # mul: an input is float16 (and on the GPU)


def test_a_fallback_feeds_the_walk_and_unknown_names_are_fallbacks():
    g = _graph([helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
                helper.make_node("Transpose", ["nz"], ["t"], name="transpose"),
                helper.make_node("Identity", ["x"], ["y"], name="id")])
    split = split_cpu_nodes(g, {"nonzero", "transpose", "ghost"})
    assert split.shape == frozenset({"transpose"}) and split.fallback == frozenset({"nonzero", "ghost"})
