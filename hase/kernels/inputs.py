"""Valid (not just well-typed) input tensors for models and kernels.

Token ids must index inside their embedding table, masks must be 0/1, and an op such as Sqrt or Log
must see positive values; random data of the right dtype is not enough.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper

from hase.errors import HaseError
from hase.kernels.types import TensorSpec
from hase.limits import check_tensor, format_shape


@functools.cache  # asked for every tensor of every model: a dict lookup, not a numpy dtype each time
def np_dtype(elem_type: int) -> str:
    """numpy dtype name of an ONNX TensorProto element type."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError) as exc:
        raise HaseError(f"unsupported tensor element type {elem_type}: Hase handles numeric and bool tensors") from exc


CHUNK = 1 << 18  # elements drawn at a time: a float64 draw never needs more than 2 MB beside the result


def random_tensor(spec: TensorSpec, rng: np.random.Generator, what: str | None = None) -> np.ndarray:
    """Random data of spec's shape and dtype, uniformly within [low, high].

    The size is checked against the per-tensor limit (`hase.limits`) before anything is allocated; the data is
    written straight into an array of the spec's dtype, drawn in chunks, so a float32 tensor never has a float64
    copy (the values are the same as one draw of the whole tensor).
    """
    check_tensor(what or f"tensor {spec.name!r}", spec.shape, spec.dtype)
    dt = np.dtype(spec.dtype)
    if dt == np.bool_:
        lo, hi = int(max(spec.low, 0)), int(min(spec.high, 1))
        return fill_chunked(lambda n: rng.integers(lo, hi + 1, size=n), spec.shape, dt)
    if np.issubdtype(dt, np.integer):
        lo, hi = int(np.floor(spec.low)), int(np.floor(spec.high))
        return fill_chunked(lambda n: rng.integers(lo, hi + 1, size=n, dtype=np.int64), spec.shape, dt)
    return fill_chunked(lambda n: rng.uniform(spec.low, spec.high, size=n), spec.shape, dt)


def fill_chunked(draw: Callable[[int], np.ndarray], shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """An array of `shape` and `dtype` filled by `draw(n)` (n values at a time, in order, cast on assignment).

    numpy's Generator fills element by element, so the result equals `draw(total).astype(dtype)` while only
    one chunk of `draw`'s own dtype (float64 / int64) exists at a time.
    """
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)  # a view: `out` is contiguous
    for start in range(0, flat.size, CHUNK):
        flat[start:start + CHUNK] = draw(min(CHUNK, flat.size - start))
    return out


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
            raise HaseError(f"input {vi.name!r} has symbolic shape {format_shape(declared_dims(vi))}: "
                            f"pass --input-shape {vi.name}=D0,D1,...")
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
    """A valid feed dict for a model (see `model_input_specs` for the value ranges); every input's size is
    checked against the per-tensor limit before any of them is allocated."""
    specs = model_input_specs(model)
    for s in specs:
        check_tensor(f"input {s.name!r}", s.shape, s.dtype)
    rng = np.random.default_rng(seed)
    return {s.name: random_tensor(s, rng, f"input {s.name!r}") for s in specs}


def declared_dims(vi: onnx.ValueInfoProto) -> list[int | str | None]:
    """A value's declared dimensions: ints, symbolic names, or None for an unknown one."""
    dims: list[int | str | None] = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or None)
    return dims


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
