"""Small helpers the feature extractors share: element counts, bytes, attributes, broadcast patterns."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hase.kernels.types import KernelSpec, TensorSpec

ACTIVATIONS = {"": 0, "Relu": 1, "Clip": 2, "LeakyRelu": 3, "Sigmoid": 4, "Tanh": 5, "HardSigmoid": 6}
OTHER_ACTIVATION = 7
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3, "int8": 4, "uint8": 5, "int32": 6,
               "int64": 7, "bool": 8}


def numel(shape: Sequence[int]) -> int:
    """Element count of a shape (1 for a scalar)."""
    return int(math.prod(int(d) for d in shape))


def itemsize(dtype: str) -> int:
    """Bytes per element of a numpy dtype name (4 when unknown)."""
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return 4


def tensor_bytes(t: TensorSpec) -> int:
    """Bytes of a tensor."""
    return numel(t.shape) * itemsize(t.dtype)


def present(tensors: Sequence[TensorSpec]) -> list[TensorSpec]:
    """Tensors that exist (ONNX marks a skipped optional input by an empty name)."""
    return [t for t in tensors if t.name]


def data_inputs(spec: KernelSpec) -> list[TensorSpec]:
    """The inputs that are present, constants included."""
    return present(spec.inputs)


def inp(spec: KernelSpec, i: int) -> TensorSpec | None:
    """The i-th input, or None where it is absent."""
    return spec.inputs[i] if i < len(spec.inputs) and spec.inputs[i].name else None


def out0(spec: KernelSpec) -> TensorSpec:
    """The first present output (an empty scalar spec if none)."""
    outs = present(spec.outputs)
    return outs[0] if outs else TensorSpec("", (), "float32")


def attr(spec: KernelSpec, name: str, default: Any = None) -> Any:
    """An attribute of the kernel, or `default`."""
    for k, v in spec.attrs:
        if k == name:
            return v
    return default


def in_bytes(spec: KernelSpec) -> int:
    """Bytes of all present inputs."""
    return sum(tensor_bytes(t) for t in data_inputs(spec))


def out_bytes(spec: KernelSpec) -> int:
    """Bytes of all present outputs."""
    return sum(tensor_bytes(t) for t in present(spec.outputs))


def out_elems(spec: KernelSpec) -> int:
    """Elements of all present outputs."""
    return sum(numel(t.shape) for t in present(spec.outputs))


def moved_bytes(spec: KernelSpec) -> int:
    """Bytes read plus bytes written, once each: the memory traffic floor of the kernel."""
    return in_bytes(spec) + out_bytes(spec)


def activation_code(name: str | None) -> int:
    """Code of a fused activation (see ACTIVATIONS; 7 for any other)."""
    return ACTIVATIONS.get(name or "", OTHER_ACTIVATION)


def dtype_code(dtype: str) -> int:
    """Code of a dtype (see DTYPE_CODES)."""
    return DTYPE_CODES.get(dtype, len(DTYPE_CODES))


def norm_axis(axis: int, rank: int) -> int:
    """A non-negative axis."""
    return axis + rank if axis < 0 else axis


def align(shape: Sequence[int], rank: int) -> tuple[int, ...]:
    """Left-pad with ones to `rank`, as numpy broadcasting does."""
    return (1,) * (rank - len(shape)) + tuple(shape)


def trailing_block(shape: Sequence[int], out: Sequence[int]) -> int:
    """Elements of the longest run of trailing dims where `shape` equals the output: the contiguous chunk."""
    a = align(shape, len(out))
    block = 1
    for d, o in zip(reversed(a), reversed(out), strict=False):  # a is longer when shape outranks out
        if d != o:
            break
        block *= o
    return block


def broadcast_pattern(shapes: Sequence[Sequence[int]], out: Sequence[int]) -> int:
    """0: all inputs have the output's shape; 1: the others are scalars; 2: row (suffix) broadcast; 3: other;
    4: no input has the output's shape (an outer sum or product: ORT's general broadcast loop, 2-4x slower)."""
    full = tuple(out)
    others = [s for s in shapes if align(s, len(full)) != full]
    if not others:
        return 0
    if all(numel(s) == 1 for s in others):
        return 1
    if len(others) == len(shapes) and sum(numel(s) > 1 for s in others) > 1:
        return 4
    if all(trailing_block(s, full) == numel(s) for s in others):
        return 2
    return 3


def safe_ratio(a: float, b: float) -> float:
    """a / b, or 0 when b is 0."""
    return float(a) / float(b) if b else 0.0


# ---------------------------------------------------------------------- windows (convolution, pooling)


def fold_hw(dims: Sequence[int], fill: int = 1) -> tuple[int, int]:
    """(height, width) of spatial dims, so 1-D, 2-D and 3-D windows share columns: 1-D -> (fill, w); 3-D -> (d*h, w)."""
    dims = list(dims)
    if not dims:
        return fill, fill
    if len(dims) == 1:
        return fill, dims[0]
    return numel(dims[:-1]), dims[-1]


def hw_pair(values: Sequence[int] | None, rank: int, default: int) -> tuple[int, int]:
    """(height, width) of a per-axis attribute such as strides or dilations (`default` on every axis when absent)."""
    vals = list(values) if values else [default] * rank
    if len(vals) == 1:
        return 1, vals[0]
    return vals[0], vals[-1]


def hw_pads(spec: KernelSpec, rank: int) -> tuple[int, int]:
    """Total padding (begin + end) along height and width, from the `pads` attribute (0, 0 when malformed)."""
    pads = list(attr(spec, "pads", []) or [0] * (2 * rank))
    if len(pads) < 2 * rank:
        return 0, 0
    begin, end = pads[:rank], pads[rank:]
    if rank == 1:
        return 0, begin[0] + end[0]
    return begin[0] + end[0], begin[-1] + end[-1]
