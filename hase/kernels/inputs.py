"""Valid (not just well-typed) input tensors for models and kernels.

Token ids must index inside their embedding table, masks must be 0/1, and an op such as Sqrt or Log
must see positive values; random data of the right dtype is not enough.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from hase.errors import HaseError
from hase.kernels.types import TensorSpec


def np_dtype(elem_type: int) -> str:
    """numpy dtype name of an ONNX TensorProto element type."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError) as exc:
        raise HaseError(f"unsupported tensor element type {elem_type}: Hase handles numeric and bool tensors") from exc


def random_tensor(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    """Random data of spec's shape and dtype, uniformly within [low, high]."""
    dt = np.dtype(spec.dtype)
    if dt == np.bool_:
        return rng.integers(int(max(spec.low, 0)), int(min(spec.high, 1)) + 1, size=spec.shape).astype(bool)
    if np.issubdtype(dt, np.integer):
        lo, hi = int(np.floor(spec.low)), int(np.floor(spec.high))
        return rng.integers(lo, hi + 1, size=spec.shape, dtype=np.int64).astype(dt)
    return rng.uniform(spec.low, spec.high, size=spec.shape).astype(dt)


_Consumers = dict[str, list[tuple[onnx.NodeProto, int]]]


def _consumers(graph: onnx.GraphProto) -> _Consumers:
    """Tensor name -> every (node, input position) that reads it."""
    out: _Consumers = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            out.setdefault(name, []).append((node, i))
    return out


_PASS_THROUGH = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity"}


def _index_bound(name: str, graph: onnx.GraphProto, shapes: dict[str, tuple[int, ...]],
                 consumers: _Consumers, depth: int = 0) -> int | None:
    """Smallest size of the tables that `name` indexes (through Cast/Unsqueeze/...), or None."""
    bounds = []
    for node, idx in consumers.get(name, []):
        if node.op_type in ("Gather", "GatherElements") and idx == 1:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            data_shape = shapes.get(node.input[0])
            if data_shape:
                bounds.append(data_shape[axis])
        elif node.op_type in _PASS_THROUGH and idx == 0 and depth < 4:
            b = _index_bound(node.output[0], graph, shapes, consumers, depth + 1)
            if b is not None:
                bounds.append(b)
    return min(bounds) if bounds else None


def model_input_specs(model: onnx.ModelProto) -> list[TensorSpec]:
    """Specs of a model's non-initializer inputs, with value ranges inferred from how they are used.

    Integer inputs that index a Gather get [0, table size - 1]; inputs named like masks get {0, 1};
    other integer inputs get [0, 1]; floats get [-1, 1].
    """
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    shapes: dict[str, tuple[int, ...]] = {i.name: tuple(i.dims) for i in graph.initializer}
    for vi in list(graph.input) + list(graph.value_info):
        shapes.setdefault(vi.name, _static_shape(vi) or ())
    consumers = _consumers(graph)
    specs = []
    for vi in graph.input:
        if vi.name in inits:
            continue
        shape = _static_shape(vi)
        if shape is None:
            raise HaseError(f"input {vi.name!r} has a symbolic dimension: pass --input-shape {vi.name}=D0,D1,...")
        dtype = np_dtype(vi.type.tensor_type.elem_type)
        low, high = -1.0, 1.0
        if np.issubdtype(np.dtype(dtype), np.integer) or dtype == "bool":
            bound = _index_bound(vi.name, graph, shapes, consumers)
            low, high = (0.0, float(bound - 1)) if bound else (0.0, 1.0)
            if "mask" in vi.name.lower() and dtype != "bool":
                low, high = 1.0, 1.0  # an all-ones attention mask: valid and what inference usually sees
        specs.append(TensorSpec(vi.name, shape, dtype, False, low, high))
    return specs


def make_model_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """A valid feed dict for a model (see `model_input_specs` for the value ranges)."""
    rng = np.random.default_rng(seed)
    return {s.name: random_tensor(s, rng) for s in model_input_specs(model)}


def _static_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    """The shape as ints, or None if any dimension is symbolic/unknown."""
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims: list[int] = []
    for d in t.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_value") and d.dim_value == 0:
            dims.append(0)
        else:
            return None
    return tuple(dims)
