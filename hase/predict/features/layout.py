"""Features of ONNX Runtime's NCHWc layout changes (ReorderInput, ReorderOutput).

At `all` on x86, ORT runs convolutions in a channel-blocked layout and enters and leaves it through these two
kernels, about a hundred in every CNN. Without their own table they fell to the generic forest, which mixes every
op type by element count: a 524k-element ReorderOutput (0.05 ms in the model) was predicted 1.2 ms, as if it were
a convolution or a cubic resize of that size.
"""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import attr, inp, moved_bytes, numel, out0
from hase.predict.features.registry import feature_family

LAYOUT_OPS = ("ReorderInput", "ReorderOutput")
LAYOUT_COLUMNS = (
    ("batch", "size of axis 0"),
    ("c_in", "channels of the input (the blocked side pads them to the block)"),
    ("c_out", "channels of the output"),
    ("plane", "elements of one channel: the product of the spatial axes"),
    ("in_elems", "elements of the input"),
    ("out_elems", "elements of the output"),
    ("pad_channels", "channels the blocked side adds or drops: |c_in - c_out|"),
    ("channels_last", "1 if the plain side is NHWC (ORT's channels_last attribute)"),
    ("reorder_in", "1 for ReorderInput (into the blocked layout), 0 for ReorderOutput"),
    ("flops", "elements written (the output)"),
    ("bytes", "input + output bytes"),
)


@feature_family("layout", LAYOUT_OPS, LAYOUT_COLUMNS)
def layout_features(spec: KernelSpec) -> dict[str, float]:
    """NCHWc reorders: batch, channels on each side, the plane each channel spans, padding, direction."""
    x, y = inp(spec, 0), out0(spec)
    xs = tuple(x.shape) if x is not None else ()
    ys = tuple(y.shape)
    last = bool(attr(spec, "channels_last", 0))
    # the plain side of a channels_last reorder is [N, H, W, C]; the blocked side is always [N, C, H, W]
    plain, blocked = (xs, ys) if spec.op_type == "ReorderInput" else (ys, xs)
    c_plain = (plain[-1] if last else plain[1]) if len(plain) > 1 else 1
    c_blocked = blocked[1] if len(blocked) > 1 else 1
    c_in, c_out = (c_plain, c_blocked) if spec.op_type == "ReorderInput" else (c_blocked, c_plain)
    n_in, n_out = numel(xs), numel(ys)
    return {
        "batch": xs[0] if xs else 1, "c_in": c_in, "c_out": c_out, "plane": numel(blocked[2:]),
        "in_elems": n_in, "out_elems": n_out, "pad_channels": abs(c_in - c_out), "channels_last": float(last),
        "reorder_in": float(spec.op_type == "ReorderInput"), "flops": n_out, "bytes": moved_bytes(spec),
    }
