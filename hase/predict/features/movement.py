"""Features of data-movement ops (Reshape, Transpose, Concat, Split, Slice, Gather, Pad, Resize, ...)."""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import (
    attr,
    data_inputs,
    inp,
    itemsize,
    moved_bytes,
    norm_axis,
    numel,
    out0,
    out_elems,
    safe_ratio,
)
from hase.predict.features.registry import feature_family

MOVEMENT_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose", "Concat", "Split",
                "Slice", "Gather", "GatherElements", "GatherND", "Pad", "Resize", "Upsample", "Expand", "Tile",
                "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements", "Shape", "Size", "ConstantOfShape",
                "Range", "NonZero", "Trilu", "ReverseSequence", "Compress", "OneHot")
IN_PLACE_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")  # their own family, "inplace" (below)
COPY_OPS = tuple(op for op in MOVEMENT_OPS if op not in IN_PLACE_OPS)  # the "movement" family: ops that copy
RESIZE_MODES = {"nearest": 0, "linear": 1, "cubic": 2}
RESIZE_COORDINATES = {"half_pixel": 0, "asymmetric": 1, "pytorch_half_pixel": 2, "align_corners": 3}
MOVEMENT_COLUMNS = (
    ("in_elems", "elements of the data input"),
    ("out_elems", "elements of all outputs"),
    ("n_inputs", "inputs (constants included)"),
    ("n_outputs", "outputs"),
    ("rank", "rank of the data input"),
    ("axis_from_end", "rank - 1 - axis (0 = innermost axis; -1 where the op has no axis)"),
    ("inner_block", "elements after the axis (Transpose: of the trailing axes left in place)"),
    ("perm_moved", "Transpose: axes that change place"),
    ("last_axis_kept", "Transpose: 1 if the innermost axis stays innermost"),
    ("single_axis_move", "Transpose: 1 if the perm moves one axis and keeps the others in order (ORT's fast "
                         "path; unit axes count, so [1, n, 1, h, d] by (2, 0, 3, 4, 1) is not one)"),
    ("scale", "output elements / input elements"),
    ("index_elems", "Gather/Scatter: elements of the indices"),
    ("mode", "Resize: 0 nearest, 1 linear, 2 cubic; -1 for other ops (Pad's own mode is no Resize mode)"),
    ("coordinates", "Resize: coordinate transformation, 0 half_pixel, 1 asymmetric, 2 pytorch_half_pixel, "
                    "3 align_corners, 4 other; -1 for other ops"),
    ("nearest_2x", "Resize: 1 for ORT's quick path, nearest asymmetric floor by exactly 2 on the two inner axes (as "
                   "torch writes 2x nearest upsampling; ~5x quicker than the same half-pixel copy)"),
    ("itemsize", "bytes per element of the data input"),
    ("flops", "output elements"),
    ("bytes", "input + output bytes"),
)
IN_PLACE_COLUMNS = (
    ("in_elems", "elements of the data input"),
    ("rank", "rank of the data input"),
    ("out_rank", "rank of the output"),
    ("itemsize", "bytes per element of the data input"),
    ("flops", "0: nothing is computed"),
    ("bytes", "0: inside a model nothing moves (a standalone run copies its feed; `in_elems` tells the trees)"),
)
_INDEX_INPUT = {"Gather": 1, "GatherElements": 1, "GatherND": 1, "ScatterND": 1, "ScatterElements": 1, "OneHot": 0}


def _axis(spec: KernelSpec, rank: int) -> int | None:
    ax = attr(spec, "axis", None)
    if ax is None:
        return None
    try:
        return norm_axis(int(ax), rank)
    except (TypeError, ValueError):
        return None


def _perm(spec: KernelSpec, rank: int) -> list[int]:
    perm = attr(spec, "perm", None)
    return [int(p) for p in perm] if perm else list(reversed(range(rank)))


def moves_single_axis(perm: list[int]) -> bool:
    """Whether `perm` is the identity with one axis taken out and put back elsewhere (the identity is not).

    ONNX Runtime's CPU Transpose copies such permutations in whole blocks and walks every other one element by
    element: timm's XCiT writes qkv's permute(2, 0, 3, 4, 1), 9x the time of (0, 2, 3, 4, 1) on the same data."""
    n = len(perm)
    for src in range(n):
        rest = [a for a in range(n) if a != src]
        for dst in range(n):
            if dst != src and [*rest[:dst], src, *rest[dst:]] == perm:
                return True
    return False


def _resize_features(spec: KernelSpec, shape: tuple[int, ...]) -> tuple[float, float, float]:
    """mode, coordinates and nearest_2x of a Resize (-1, -1, 0 for any other op)."""
    if spec.op_type not in ("Resize", "Upsample"):
        return -1.0, -1.0, 0.0
    mode = str(attr(spec, "mode", "nearest"))
    coords = str(attr(spec, "coordinate_transformation_mode", "half_pixel"))
    out = tuple(out0(spec).shape)
    doubled = (len(shape) >= 2 and len(out) == len(shape) and out[:-2] == shape[:-2]
               and out[-2:] == (2 * shape[-2], 2 * shape[-1]))
    quick = mode == "nearest" and coords == "asymmetric" and str(attr(spec, "nearest_mode", "round_prefer_floor")) \
        == "floor" and doubled
    return float(RESIZE_MODES.get(mode, 3)), float(RESIZE_COORDINATES.get(coords, 4)), float(quick)


def _kept_block(shape: tuple[int, ...], perm: list[int]) -> int:
    """Elements of the trailing axes a permutation leaves in place (the contiguous run it copies)."""
    block = 1
    for i in reversed(range(len(perm))):
        if perm[i] != i:
            break
        block *= shape[i]
    return block


def _variant(spec: KernelSpec) -> str:
    """'nearest' for a nearest Resize (its own predictor: a copy, where linear and cubic ones interpolate; one forest
    choosing among 5 of 19 features per split put PP-OCRv5's 8x nearest upsampling, 0.15 ms, at 3 ms), '' else."""
    return "nearest" if spec.op_type in ("Resize", "Upsample") and _resize_features(spec, ())[0] == 0 else ""


@feature_family("movement", COPY_OPS, MOVEMENT_COLUMNS, variant=_variant)
def movement_features(spec: KernelSpec) -> dict[str, float]:
    """Data movement: elements and bytes moved, axis and contiguity, permutation, scale, indices."""
    ins = data_inputs(spec)
    x = inp(spec, 0) or (ins[0] if ins else None)
    shape = tuple(x.shape) if x is not None else ()
    rank = len(shape)
    axis = _axis(spec, rank)
    n_in, n_out = numel(shape), out_elems(spec)
    perm = _perm(spec, rank) if spec.op_type == "Transpose" else list(range(rank))
    block = numel(shape[axis + 1:]) if axis is not None else n_in
    if spec.op_type == "Transpose":
        block = _kept_block(shape, perm)
    idx_pos = _INDEX_INPUT.get(spec.op_type)
    idx = inp(spec, idx_pos) if idx_pos is not None else None
    mode, coordinates, nearest_2x = _resize_features(spec, shape)
    return {
        "in_elems": n_in, "out_elems": n_out, "n_inputs": len(ins), "n_outputs": sum(1 for t in spec.outputs if t.name),
        "rank": rank, "axis_from_end": (rank - 1 - axis) if axis is not None and axis < rank else -1,
        "inner_block": block,
        "perm_moved": sum(1 for i, p in enumerate(perm) if i != p),
        "last_axis_kept": float(not perm or perm[-1] == rank - 1),
        "single_axis_move": float(spec.op_type == "Transpose" and moves_single_axis(perm)),
        "scale": safe_ratio(n_out, n_in), "index_elems": numel(idx.shape) if idx is not None else 0,
        "mode": mode, "coordinates": coordinates, "nearest_2x": nearest_2x,
        "itemsize": itemsize(x.dtype) if x is not None else 4, "flops": n_out, "bytes": moved_bytes(spec),
    }


@feature_family("inplace", IN_PLACE_OPS, IN_PLACE_COLUMNS)
def in_place_features(spec: KernelSpec) -> dict[str, float]:
    """Shape-only ops. ORT's CPU kernels declare Alias(0, 0): in a model the output shares the input's buffer and
    a node costs its dispatch whatever its size (in-model spans of real models: 3-6 us from 10 KB to 10 MB). In the
    movement family their size made a base linear in bytes: skresnet18's 16 Unsqueezes of 100 KB-1 MB were
    predicted 3.5 ms (measured 0.05 ms) by a forest that had seen only small ones."""
    x = inp(spec, 0) or next(iter(data_inputs(spec)), None)
    shape = tuple(x.shape) if x is not None else ()
    return {"in_elems": numel(shape), "rank": len(shape), "out_rank": len(out0(spec).shape),
            "itemsize": itemsize(x.dtype) if x is not None else 4, "flops": 0, "bytes": 0}
