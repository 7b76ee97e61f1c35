"""Features of ops that reduce over a window or an axis: pooling, normalization, softmax, reductions."""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import (
    attr,
    data_inputs,
    fold_hw,
    hw_pads,
    hw_pair,
    inp,
    moved_bytes,
    norm_axis,
    numel,
    out0,
    out_elems,
    safe_ratio,
)
from hase.predict.features.registry import feature_family

POOL_OPS = ("MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
POOL_COLUMNS = (
    ("n", "batch size"), ("c", "channels"), ("h", "input height"), ("w", "input width"),
    ("kh", "window height"), ("kw", "window width"), ("stride_h", "stride along height"),
    ("stride_w", "stride along width"), ("pad_h", "total padding along height"), ("pad_w", "total padding along width"),
    ("out_h", "output height"), ("out_w", "output width"), ("window", "elements per window"),
    ("global", "1 for global pooling"), ("in_elems", "input elements"), ("out_elems", "output elements"),
    ("flops", "output elements x window"), ("bytes", "input + output bytes"),
)
NORM_OPS = ("LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
            "SkipSimplifiedLayerNormalization", "InstanceNormalization", "GroupNormalization", "LpNormalization",
            "MeanVarianceNormalization", "RMSNormalization", "EmbedLayerNormalization")
NORM_COLUMNS = (
    ("elems", "elements normalized"), ("norm_size", "elements that share one mean/variance"),
    ("n_groups", "independent normalization groups"), ("channels", "size of axis 1"),
    ("n_data_inputs", "non-constant inputs (2 for Skip* ops: the residual add is fused)"),
    ("n_outputs", "outputs (extra mean/variance outputs)"), ("flops", "about 5 operations per element"),
    ("bytes", "input + output bytes"),
)
SOFTMAX_OPS = ("Softmax", "LogSoftmax", "Hardmax")
SOFTMAX_COLUMNS = (
    ("elems", "elements"), ("axis_size", "length of the softmax axis"), ("outer", "elements / axis length"),
    ("last_axis", "1 if the axis is the innermost one"),
    ("axis_from_end", "rank - 1 - axis: ORT swaps a non-last axis with the last one by a Transpose, a fast 2-D "
                      "copy when they are neighbours (1), an element-by-element walk otherwise (2 or more)"),
    ("inner", "elements after the axis (1 for the last axis)"), ("flops", "about 4 operations per element"),
    ("bytes", "input + output bytes"),
)
REDUCE_OPS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin")
REDUCE_COLUMNS = (
    ("in_elems", "input elements"), ("out_elems", "output elements"),
    ("reduce_size", "input elements per output element"), ("n_axes", "reduced axes"),
    ("last_axis_reduced", "1 if the innermost axis is reduced (contiguous reduction)"),
    ("inner_block", "elements after the last reduced axis (stride of the reduction)"),
    ("flops", "input elements"), ("bytes", "input + output bytes"),
)


@feature_family("pool", POOL_OPS, POOL_COLUMNS)
def pool_features(spec: KernelSpec) -> dict[str, float]:
    """Pooling: window geometry, input/output elements; global pooling has the whole plane as its window."""
    x = inp(spec, 0)
    xs = tuple(x.shape) if x is not None and len(x.shape) >= 3 else (1, 1, 1)
    ys = tuple(out0(spec).shape) if len(out0(spec).shape) >= 3 else (1, 1, 1)
    rank = max(len(xs) - 2, 1)
    is_global = spec.op_type.startswith("Global")
    kernel = tuple(xs[2:]) if is_global else tuple(attr(spec, "kernel_shape", None) or (1,) * rank)
    strides = tuple(attr(spec, "strides", None) or (1,) * rank)
    # a window (or stride) beyond the padded plane covers the plane: HF's EfficientNet pools 1280x7x7 with a
    # 1280x1280 window, which costs what a 7x7 one does (read as 1280² it was 2 GFLOP, predicted 115 ms)
    plane = _padded_plane(spec, xs[2:], rank)
    if len(kernel) == len(plane) == len(strides):
        kernel = tuple(min(int(k), p) for k, p in zip(kernel, plane, strict=True))
        strides = tuple(min(int(s), p) for s, p in zip(strides, plane, strict=True))
    h, w = fold_hw(xs[2:])
    oh, ow = fold_hw(ys[2:])
    kh, kw = fold_hw(kernel)
    sh, sw = hw_pair(strides, rank, 1)
    ph, pw = hw_pads(spec, rank)
    window = numel(kernel)
    n_out = numel(ys)
    return {"n": xs[0], "c": xs[1], "h": h, "w": w, "kh": kh, "kw": kw, "stride_h": sh, "stride_w": sw,
            "pad_h": ph, "pad_w": pw, "out_h": oh, "out_w": ow, "window": window, "global": float(is_global),
            "in_elems": numel(xs), "out_elems": n_out, "flops": n_out * window, "bytes": moved_bytes(spec)}


def _padded_plane(spec: KernelSpec, spatial: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """Each spatial size plus its padding (begin + end); the sizes alone where `pads` is absent or malformed."""
    pads = list(attr(spec, "pads", None) or [])
    if len(pads) != 2 * rank or len(spatial) != rank:
        return tuple(int(d) for d in spatial)
    return tuple(int(d) + int(pads[i]) + int(pads[i + rank]) for i, d in enumerate(spatial))


def _norm_size(spec: KernelSpec, shape: tuple[int, ...]) -> int:
    rank = len(shape)
    op = spec.op_type
    if rank == 0:
        return 1
    if op in ("InstanceNormalization", "MeanVarianceNormalization"):
        return numel(shape[2:]) if rank > 2 else 1
    if op == "GroupNormalization":
        groups = int(attr(spec, "num_groups", attr(spec, "groups", 1)) or 1)
        return numel(shape[1:]) // max(groups, 1) if rank > 1 else 1
    if op == "LpNormalization":
        return shape[norm_axis(int(attr(spec, "axis", -1)), rank)]
    axis = norm_axis(int(attr(spec, "axis", -1)), rank)
    return numel(shape[axis:])


@feature_family("norm", NORM_OPS, NORM_COLUMNS)
def norm_features(spec: KernelSpec) -> dict[str, float]:
    """Normalization: elements, the size of each normalization group, fused residual inputs."""
    x = inp(spec, 0)
    shape = tuple(x.shape) if x is not None else ()
    if spec.op_type == "EmbedLayerNormalization":
        shape = tuple(out0(spec).shape)
    elems = numel(shape)
    size = max(_norm_size(spec, shape), 1)
    return {"elems": elems, "norm_size": size, "n_groups": elems // size, "channels": shape[1] if len(shape) > 1 else 1,
            "n_data_inputs": sum(1 for t in data_inputs(spec) if not t.const),
            "n_outputs": sum(1 for t in spec.outputs if t.name), "flops": 5 * elems, "bytes": moved_bytes(spec)}


@feature_family("softmax", SOFTMAX_OPS, SOFTMAX_COLUMNS)
def softmax_features(spec: KernelSpec) -> dict[str, float]:
    """Softmax: elements, axis length, how many rows are normalized and where the axis lies (ORT runs a non-last
    axis through a Transpose: CoaT's [1, 3137, 8, 8] over axis 1 takes 10x the time of [1, 8, 3137, 8] over 2)."""
    x = inp(spec, 0)
    shape = tuple(x.shape) if x is not None else ()
    rank = len(shape)
    axis = norm_axis(int(attr(spec, "axis", -1)), rank) if rank else 0
    elems = numel(shape)
    size = shape[axis] if rank else 1
    return {"elems": elems, "axis_size": size, "outer": elems // max(size, 1),
            "last_axis": float(axis == rank - 1), "axis_from_end": max(rank - 1 - axis, 0),
            "inner": numel(shape[axis + 1:]), "flops": 4 * elems, "bytes": moved_bytes(spec)}


def reduced_axes(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int]:
    """Input axes a reduction removed, inferred from shapes (opset 18 passes axes as a runtime input)."""
    if len(in_shape) == len(out_shape):
        return [i for i, (a, b) in enumerate(zip(in_shape, out_shape, strict=True)) if a != b]
    axes, j = [], 0
    for i, d in enumerate(in_shape):
        if j < len(out_shape) and d == out_shape[j]:
            j += 1
        else:
            axes.append(i)
    if j < len(out_shape):  # no consistent alignment: assume the trailing axes went
        return list(range(len(out_shape), len(in_shape)))
    return axes


@feature_family("reduce", REDUCE_OPS, REDUCE_COLUMNS)
def reduce_features(spec: KernelSpec) -> dict[str, float]:
    """Reductions: sizes, reduced axes and whether the reduction runs over contiguous memory."""
    x = inp(spec, 0)
    shape = tuple(x.shape) if x is not None else ()
    y_shape = tuple(out0(spec).shape)
    axes = reduced_axes(shape, y_shape)
    last = axes[-1] if axes else len(shape) - 1
    n_in, n_out = numel(shape), max(out_elems(spec), 1)
    return {"in_elems": n_in, "out_elems": n_out, "reduce_size": safe_ratio(n_in, n_out), "n_axes": len(axes),
            "last_axis_reduced": float(bool(axes) and axes[-1] == len(shape) - 1),
            "inner_block": numel(shape[last + 1:]), "flops": n_in, "bytes": moved_bytes(spec)}
