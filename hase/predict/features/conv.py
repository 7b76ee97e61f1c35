"""Features of convolutions (Conv, FusedConv, ConvTranspose): shape, window, FLOPs, parameters, bytes.

Depthwise convolutions (one input channel per group) get their own predictors through the variants
'dw' (NCHWc) and 'dw-nchw' (plain NCHW); grouped ones stay with dense convolutions, separated by `groups` and
`cin_per_group`.
3-D convolutions fold depth into height; 1-D ones have height 1.
"""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import (
    activation_code,
    attr,
    fold_hw,
    hw_pads,
    hw_pair,
    inp,
    numel,
    out0,
    safe_ratio,
    tensor_bytes,
)
from hase.predict.features.registry import feature_family

CONV_OPS = ("Conv", "FusedConv", "ConvTranspose", "NhwcFusedConv")
CONV_COLUMNS = (
    ("n", "batch size"),
    ("c_in", "input channels"),
    ("h", "input height (depth x height for 3-D, 1 for 1-D)"),
    ("w", "input width"),
    ("c_out", "output channels"),
    ("kh", "kernel height (depth x height for 3-D)"),
    ("kw", "kernel width"),
    ("stride_h", "stride along height"),
    ("stride_w", "stride along width"),
    ("dilation_h", "dilation along height"),
    ("dilation_w", "dilation along width"),
    ("groups", "convolution groups"),
    ("cin_per_group", "input channels per group (1 = depthwise)"),
    ("depthwise", "1 if every group has one input channel"),
    ("pad_h", "total padding along height"),
    ("pad_w", "total padding along width"),
    ("out_h", "output height"),
    ("out_w", "output width"),
    ("flops", "2 x multiply-accumulates"),
    ("params", "weight and bias elements"),
    ("in_bytes", "bytes of the activation input"),
    ("out_bytes", "bytes of the output"),
    ("weight_bytes", "bytes of weight and bias"),
    ("bytes", "input + output + weight bytes"),
    ("intensity", "FLOPs per byte moved"),
    ("activation", "fused activation: 0 none, 1 Relu, 2 Clip, 3 LeakyRelu, 4 Sigmoid, 5 Tanh, 6 HardSigmoid, 7 other"),
    ("has_bias", "1 if a bias input is present"),
    ("has_sum", "1 if a residual input is summed in (FusedConv's fourth input)"),
    ("nchwc", "1 if ORT runs it in its blocked NCHWc layout (domain com.microsoft.nchwc), 0 for its plain NCHW kernel"),
)
NCHWC_DOMAIN = "com.microsoft.nchwc"


def conv_is_depthwise(spec: KernelSpec) -> bool:
    """Whether each group of the convolution has one input channel (and there are several groups)."""
    x, w = inp(spec, 0), inp(spec, 1)
    if x is None or w is None or len(x.shape) < 3:
        return False
    groups = int(attr(spec, "group", 1) or 1)
    cin = x.shape[1]
    return groups > 1 and cin // groups == 1


def _variant(spec: KernelSpec) -> str:
    """'dw' for depthwise convolutions in NCHWc, 'dw-nchw' for those ORT leaves in plain NCHW (channels that fill no
    NCHWc block: MixNet's 90-channel 9x9 ones take 10x the time per MAC), '' for the rest."""
    if not conv_is_depthwise(spec):
        return ""
    return "dw" if spec.domain == NCHWC_DOMAIN else "dw-nchw"


@feature_family("conv", CONV_OPS, CONV_COLUMNS, variant=_variant)
def conv_features(spec: KernelSpec) -> dict[str, float]:
    """Convolutions: window geometry, FLOPs (MACs x 2), parameters and bytes, fused activation."""
    x, w, b = inp(spec, 0), inp(spec, 1), inp(spec, 2)
    y = out0(spec)
    xs = x.shape if x is not None and len(x.shape) >= 3 else (1, 1, 1)
    ws = w.shape if w is not None else (1, 1)
    ys = y.shape if len(y.shape) >= 3 else (1, 1, 1)
    rank = max(len(xs) - 2, 1)
    groups = int(attr(spec, "group", 1) or 1)
    n, c_in, c_out = xs[0], xs[1], ys[1]
    kernel = tuple(attr(spec, "kernel_shape", None) or ws[2:] or (1,))
    k_elems = numel(kernel)
    transpose = spec.op_type == "ConvTranspose"
    in_spatial, out_spatial = numel(xs[2:]), numel(ys[2:])
    macs = (n * c_in * in_spatial * (c_out // max(groups, 1)) * k_elems if transpose
            else n * c_out * out_spatial * (c_in // max(groups, 1)) * k_elems)
    h, wd = fold_hw(xs[2:])
    oh, ow = fold_hw(ys[2:])
    kh, kw = fold_hw(kernel)
    sh, sw = hw_pair(attr(spec, "strides", None), rank, 1)
    dh, dw = hw_pair(attr(spec, "dilations", None), rank, 1)
    ph, pw = hw_pads(spec, rank)
    weight_bytes = (tensor_bytes(w) if w is not None else 0) + (tensor_bytes(b) if b is not None else 0)
    xb = tensor_bytes(x) if x is not None else 0
    yb = tensor_bytes(y)
    total = xb + yb + weight_bytes
    return {
        "n": n, "c_in": c_in, "h": h, "w": wd, "c_out": c_out, "kh": kh, "kw": kw, "stride_h": sh, "stride_w": sw,
        "dilation_h": dh, "dilation_w": dw, "groups": groups, "cin_per_group": c_in // max(groups, 1),
        "depthwise": float(conv_is_depthwise(spec)), "pad_h": ph, "pad_w": pw, "out_h": oh, "out_w": ow,
        "flops": 2 * macs, "params": (numel(ws) if w is not None else 0) + (numel(b.shape) if b is not None else 0),
        "in_bytes": xb, "out_bytes": yb, "weight_bytes": weight_bytes, "bytes": total,
        "intensity": safe_ratio(2 * macs, total), "activation": activation_code(attr(spec, "activation", "")),
        "has_bias": float(b is not None), "has_sum": float(inp(spec, 3) is not None),
        "nchwc": float(spec.domain == NCHWC_DOMAIN),
    }
