"""Input shapes: `--input-shape NAME=D0,D1,...` and `--free-dim NAME=SIZE` from the command line, and giving
every model input a static shape with them (`fix_input_shapes`), with messages that show the declared shape
(`[batch, 3, 224, 224]`) and the fix."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx

from hase.errors import HaseError
from hase.kernels.inputs import declared_dims
from hase.limits import format_shape


def fix_input_shapes(model: onnx.ModelProto, input_shapes: Mapping[str, tuple[int, ...]],
                     free_dims: Mapping[str, int] | None = None) -> None:
    """Set the given inputs' shapes in place, and in every other input each symbolic dimension named in
    `free_dims` (as onnxruntime_perf_test's `-f batch:4`); any remaining symbolic, unknown or zero dimension
    is an error, and so is a free dimension no input has (a typo would otherwise pass unnoticed)."""
    inits = {i.name for i in model.graph.initializer}
    inputs = {vi.name: vi for vi in model.graph.input if vi.name not in inits}
    unknown = set(input_shapes) - set(inputs)
    if unknown:
        raise HaseError(f"--input-shape names unknown inputs {sorted(unknown)}: "
                        f"the model's inputs are {sorted(inputs)}")
    free = dict(free_dims or {})
    named = {d for vi in inputs.values() for d in declared_dims(vi) if isinstance(d, str)}
    if set(free) - named:
        have = ", ".join(f"{n} {format_shape(declared_dims(vi))}" for n, vi in inputs.items())
        raise HaseError(f"--free-dim names {sorted(set(free) - named)}, a dimension no input of the model has "
                        f"(its inputs: {have})")
    for name, vi in inputs.items():
        dims = vi.type.tensor_type.shape.dim
        if name in input_shapes:
            _set_dims(name, dims, tuple(int(d) for d in input_shapes[name]))
            continue
        for d in dims:
            if d.HasField("dim_param") and d.dim_param in free:
                value = free[d.dim_param]
                d.Clear()
                d.dim_value = value
        _check_static(name, declared_dims(vi))


def _check_static(name: str, dims: list[int | str | None]) -> None:
    """An input's declared shape must be static and non-empty; the message shows the shape as declared."""
    example = ",".join(str(d) if isinstance(d, int) and d > 0 else "1" for d in dims)
    fix = f"pass --input-shape {name}={example or 'D0,D1,...'}"
    shown = format_shape(dims)
    sizes = [d for d in dims if isinstance(d, int)]
    if len(sizes) < len(dims):
        named = sorted({d for d in dims if isinstance(d, str)})
        by_name = f", or name them: --free-dim {named[0]}=1 (repeat for each)" if named else ""
        raise HaseError(f"input {name!r} has symbolic shape {shown}: {fix} (your sizes for the named dimensions)"
                        f"{by_name}")
    if any(d < 0 for d in sizes):
        raise HaseError(f"input {name!r} has an invalid static shape {shown} (a negative dimension): re-export it")
    if 0 in sizes:
        raise HaseError(f"input {name!r} has static shape {shown} with a zero dimension (an empty tensor): "
                        f"Hase needs non-empty inputs; {fix}")


def _set_dims(name: str, dims: Any, shape: tuple[int, ...]) -> None:
    """Overwrite an input's dimensions with `shape`; a rank or fixed-dimension mismatch is an error."""
    if len(shape) != len(dims):
        raise HaseError(f"--input-shape {name} has rank {len(shape)} but the model's input has rank {len(dims)}")
    for d, v in zip(dims, shape, strict=True):
        if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v:
            raise HaseError(f"--input-shape {name}: dimension {v} conflicts with the model's fixed {d.dim_value}")
        d.Clear()
        d.dim_value = v


MAX_DIM = 2**62  # beyond any real tensor, and inside ONNX's int64 dimensions


def parse_input_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """Parse CLI `name=1,3,224,224` (or `name=1x3x224x224`) items into a shape dict; every dimension >= 1.

    Sizes are checked against the memory limit later, when the model says each input's dtype.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            shape = ()
        if not sep or not name.strip() or not shape:
            raise HaseError(f"bad --input-shape {item!r}: write NAME=D0,D1,... e.g. input=1,3,224,224")
        if min(shape) < 1 or max(shape) > MAX_DIM:
            bad = next(d for d in shape if d < 1 or d > MAX_DIM)
            raise HaseError(f"bad --input-shape {item!r}: dimension {bad} is "
                            f"{'not >= 1 (an empty or negative size)' if bad < 1 else 'too large'}; "
                            f"every dimension must be a size >= 1")
        shapes[name] = shape
    return shapes


def parse_free_dims(items: list[str] | None) -> dict[str, int]:
    """Parse CLI `batch=4` (or perf_test's `batch:4`) items into {dimension name: size >= 1}."""
    dims: dict[str, int] = {}
    for item in items or []:
        name, sep, value = item.partition("=") if "=" in item else item.partition(":")
        try:
            size = int(value)
        except ValueError:
            size = None
        if not sep or not name.strip() or size is None:
            raise HaseError(f"bad --free-dim {item!r}: write NAME=SIZE, e.g. batch=4 (NAME: a symbolic dimension of "
                            f"the model's inputs)")
        if not 1 <= size <= MAX_DIM:
            raise HaseError(f"bad --free-dim {item!r}: {size} is {'not >= 1' if size < 1 else 'too large'}; "
                            f"a dimension is a size >= 1")
        dims[name.strip()] = size
    return dims
