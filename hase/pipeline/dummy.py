"""Dummy models for simulation mode: a MatMul(+Relu) chain of configurable size, built with onnx.helper."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hase.errors import HaseError

log = logging.getLogger(__name__)

OPSET = 17


def matmul_chain(rows: int, in_features: int, width: int, layers: int, seed: int = 0) -> onnx.ModelProto:
    """`x[rows, in_features] -> (MatMul -> Relu) x layers -> y[rows, width]`, fixed shapes, float32.

    Weights are scaled by 1/sqrt(fan_in) so activations stay in range however deep the chain is.
    """
    if min(rows, in_features, width, layers) < 1:
        raise HaseError(f"dummy model sizes must be >= 1 (rows={rows}, in={in_features}, width={width}, "
                        f"layers={layers})")
    rng = np.random.default_rng(seed)
    nodes, inits, prev, fan_in = [], [], "x", in_features
    for i in range(layers):
        w = (rng.standard_normal((fan_in, width)) / np.sqrt(fan_in)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = "y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"mm{i}"], name=f"matmul{i}"))
        nodes.append(helper.make_node("Relu", [f"mm{i}"], [out], name=f"relu{i}"))
        prev, fan_in = out, width
    graph = helper.make_graph(
        nodes, "hase_dummy_matmul_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, in_features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hase")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write_matmul_chain(path: str | Path, rows: int, in_features: int, width: int, layers: int,
                       seed: int = 0) -> Path:
    """Build a dummy chain and save it to `path` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(matmul_chain(rows, in_features, width, layers, seed), path)
    log.debug("dummy model %s: [%d, %d] -> %d x %d layers", path, rows, in_features, width, layers)
    return path
