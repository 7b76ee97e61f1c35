"""What a model's tensors will need, estimated from declared and inferred shapes before anything runs.

The probe run that learns every tensor's spec (`probe.observe_values`) keeps each intermediate tensor alive,
so a small file that declares `1x3x100000x100000` would ask for terabytes. ONNX shape inference on a copy of
the graph without its large weights gives the shapes first; tensors it cannot size are not counted, so the
estimate is a floor, and ORT's own allocation failure still stops anything it misses.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import onnx
from onnx import helper, shape_inference

from hase.errors import HaseError
from hase.kernels.inputs import np_dtype
from hase.limits import check_tensor, check_total, tensor_nbytes

log = logging.getLogger(__name__)

SMALL_INIT = 4096  # initializers up to this many elements keep their values (shape constants for Reshape, ...)


@dataclass(frozen=True)
class SizedTensor:
    """A non-constant tensor with a fully static shape: `role` is input, output or intermediate."""

    name: str
    role: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes of its data (exact integer)."""
        return tensor_nbytes(self.shape, self.dtype)


def check_model_memory(model: onnx.ModelProto, probe: bool = True) -> int:
    """Refuse a model whose inputs, outputs or inferred intermediates are over the per-tensor limit, or (with
    `probe`: every tensor kept alive at once) whose tensors together are over the probe limit; returns the bytes.

    Raises HaseError naming the tensor, its shape and size, and the limit.
    """
    tensors = sized_tensors(model)
    for t in tensors:
        check_tensor(f"{t.role} {t.name!r}", t.shape, t.dtype)
    total = sum(t.nbytes for t in tensors)
    if probe:
        check_total(f"the probe run of this model (its {len(tensors)} tensors of known shape held at once)", total)
    return total


def sized_tensors(model: onnx.ModelProto) -> list[SizedTensor]:
    """Every non-constant tensor whose shape is known: declared inputs and outputs, then ONNX shape inference."""
    inits = {t.name for t in model.graph.initializer}
    inputs = {vi.name for vi in model.graph.input}
    outputs = {vi.name for vi in model.graph.output}
    graph = _inferred(model).graph
    out: dict[str, SizedTensor] = {}
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.name in inits or vi.name in out:
            continue
        role = "input" if vi.name in inputs else "output" if vi.name in outputs else "intermediate tensor"
        sized = _sized(vi, role)
        if sized is not None:
            out[vi.name] = sized
    return list(out.values())


def _sized(vi: onnx.ValueInfoProto, role: str) -> SizedTensor | None:
    """The tensor's static shape and numpy dtype, or None when either is unknown (symbolic, non-tensor, string)."""
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return None
    dims = vi.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
        return None
    try:
        dtype = np_dtype(vi.type.tensor_type.elem_type)
    except HaseError:
        return None
    if dtype == "object":
        return None
    return SizedTensor(vi.name, role, tuple(int(d.dim_value) for d in dims), dtype)


def _inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model's graph without its large weights, with ONNX's inferred shapes; the declared graph when
    inference fails (fused or custom ops ONNX does not know are simply left unsized)."""
    light = _without_large_weights(model)
    try:
        return shape_inference.infer_shapes(light, check_type=False, strict_mode=False, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError, ValidationError, RuntimeError variants
        log.debug("shape inference failed (%s); sizing declared tensors only", exc)
        return light


def _without_large_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the model in which initializers over SMALL_INIT elements are graph inputs of the same type."""
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g, src = light.graph, model.graph
    g.name = src.name
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    declared = {vi.name for vi in src.input}
    for t in src.initializer:
        numel = 1
        for d in t.dims:
            numel *= int(d)
        if numel <= SMALL_INIT:
            g.initializer.append(t)
        elif t.name not in declared:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return light
