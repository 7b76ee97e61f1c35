"""Dummy models for simulation mode: a MatMul(+Relu) chain of configurable size, built with onnx.helper."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hase import limits
from hase.errors import HaseError
from hase.kernels.inputs import fill_chunked

log = logging.getLogger(__name__)

OPSET = 17


def matmul_chain(rows: int, in_features: int, width: int, layers: int, seed: int = 0) -> onnx.ModelProto:
    """`x[rows, in_features] -> (MatMul -> Relu) x layers -> y[rows, width]`, fixed shapes, float32.

    Weights are scaled by 1/sqrt(fan_in) so activations stay in range however deep the chain is.
    """
    if min(rows, in_features, width, layers) < 1:
        raise HaseError(f"dummy model sizes must be >= 1 (rows={rows}, in={in_features}, width={width}, "
                        f"layers={layers})")
    check_chain_size(rows, in_features, width, layers)
    rng = np.random.default_rng(seed)
    nodes, inits, prev, fan_in = [], [], "x", in_features
    for i in range(layers):
        w = _scaled_normal(rng, fan_in, width)
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


def _scaled_normal(rng: np.random.Generator, fan_in: int, width: int) -> np.ndarray:
    """A [fan_in, width] float32 weight from N(0, 1/fan_in), drawn in chunks (no float64 copy of the whole)."""
    scale = np.sqrt(fan_in)
    return fill_chunked(lambda n: rng.standard_normal(n) / scale, (fan_in, width), np.dtype(np.float32))


def check_chain_size(rows: int, in_features: int, width: int, layers: int) -> None:
    """Refuse a chain whose tensors (input, activations, each weight) are over the per-tensor limit, or whose
    weights are more than one ONNX file holds, before anything is drawn."""
    what = f"dummy model [{rows}, {in_features}] -> {layers} x {width}"
    limits.check_tensor(f"{what}: input", (rows, in_features), "float32")
    limits.check_tensor(f"{what}: activation", (rows, width), "float32")
    first = limits.check_tensor(f"{what}: first weight", (in_features, width), "float32")
    rest = limits.check_tensor(f"{what}: weight", (width, width), "float32") if layers > 1 else 0
    total = first + (layers - 1) * rest
    if total > limits.ONNX_FILE_BYTES:
        raise HaseError(f"{what}: its weights need {limits.format_gb(total)}, more than one ONNX file holds (2 GB): "
                        f"use a smaller width or fewer layers")


def write_matmul_chain(path: str | Path, rows: int, in_features: int, width: int, layers: int,
                       seed: int = 0) -> Path:
    """Build a dummy chain and save it to `path` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(matmul_chain(rows, in_features, width, layers, seed), path)
    log.debug("dummy model %s: [%d, %d] -> %d x %d layers", path, rows, in_features, width, layers)
    return path
