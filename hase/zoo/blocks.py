"""Sampled block families: one small model around one sampled kernel, written the way real exports write it.

Each family is a zoo family (`@register_family`), so `hase zoo` builds them and `hase collect --zoo` measures
them like any zoo model: every kernel standalone and in-model (its ORT profile span). The block is what ONNX
Runtime fuses at `all` the way it fuses real models: Conv+BatchNormalization+ReLU (one NCHWc FusedConv),
MatMul+Add(+GELU) (Gemm / MatMul, Gelu or BiasGelu), attention scores (Transpose+MatMul+Mul -> FusedMatMul,
Softmax, MatMul), Add+LayerNormalization (SkipLayerNormalization), a 1x1 convolution before pooling (so the
pool runs in NCHWc, as after a real convolution), one element-wise or data-movement op, a Resize, a Gather or
ScatterND whose indices address single elements (`INDEX_KINDS`), and one Einsum as attention writes it.

Family names start with `SAMPLED_PREFIX`; training treats them as kernel data, not as zoo families to score
(docs/predictor.md, "Sampled kernels").
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from hase.errors import HaseError
from hase.zoo.layers import GraphBuilder, Tensor
from hase.zoo.registry import Param, register_family
from hase.zoo.transformer import INIT_STD, gelu

SAMPLED_PREFIX = "sampled-"
MAX_DIM = 1 << 16
MEMORY_FLOPS = 50  # one dimension of a sampled block (the tensor-size limit still applies on top)
ELTWISE_OPS = ("Add", "Mul", "Sub", "Div", "Relu", "Sigmoid", "Clip", "Tanh", "HardSwish", "Erf", "Transpose",
               "Concat")
# what else the element-wise block writes (op names of the block, not ONNX op types), for kernels whose time a
# forest cannot guess from element counts alone:
# - head transposes as attention writes them: [1, tokens, heads, dim] -> [1, heads, tokens, dim] (0213), keys
#   transposed for q @ k^T (0231), and what is left of timm's qkv permute(2, 0, 3, 4, 1) after ORT splits q, k
#   and v (XCiT): [1, tokens, 1, heads, dim] -> [1, 1, heads, dim, tokens] (20341), which ORT walks element by
#   element (it moves more than one axis, unit axes included), 9x the time of the same copy by (0, 2, 3, 4, 1);
# - Softmax over the tokens axis, not the last one (CoaT's factorized attention normalizes keys over tokens):
#   of [1, heads, tokens, dim] (axis 2) and of [1, tokens, heads, dim] (axis 1, what ORT runs in CoaT at `all`
#   after moving a Transpose through it), 10x the time of the first on the same data;
# - Resize in ORT's three modes: nearest/linear 2x upsampling as in FPN-style necks, and a cubic ~0.93x
#   downsampling as in CrossViT's branches
# - ops real graphs run that no zoo family wrote (`COVERAGE_OPS`; from the op counts of the 74 real models of the two
#   dev sets, where each was 0.5-40 % of a model's time and had no training kernel): SiLU (x * sigmoid(x), which ORT
#   fuses into QuickGelu: EfficientNets, RegNetYs, MobileViT, MixNet), Slice of a half along an outer or the last
#   axis (GhostNet's channel halves, heads split off a fused projection), Pad of the two inner axes, Neg, Expand of
#   one row to all rows, reductions over the last axis (ReduceSum, ReduceMax) and over an outer one (ReduceL2: the
#   global response normalization of ConvNeXt-V2 over H, W of an NHWC tensor), InstanceNormalization, and Swin's
#   window partition, a Transpose of [1, n, win, n, win, channels] by (0, 1, 3, 2, 4, 5) (Swin2SR's 133
#   transposes ran 2.5x their prediction from the head transposes the zoo had), and an Expand of a last axis of
#   size 1 ([1, rows, 1] -> [1, rows, width]: F.normalize's norm, expand_as(x), in SwinV2/Swin2SR's cosine
#   attention and CLIP-style heads; one element per output element, 28x the time of the row copies above);
#   `_coverage` draws them in turn, 8 blocks each (a forest of its own needs 8: a random choice had given Expand 3,
#   and Swin2SR's 32 Expands of its attention masks were predicted at 1/12 of their 13.6 ms)
COVERAGE_OPS = ("SiLU", "SliceOuter", "SliceLast", "Pad", "Neg", "Expand", "ReduceSumLast", "ReduceMaxLast",
                "ReduceL2Outer", "InstanceNorm", "TransposeWindow", "ExpandLast")
# - every other element-wise op of the `elementwise` feature family that ORT's CPU provider runs on floats and real
#   exports write (`ACTIVATION_OPS`): an op the zoo never ran gets its family's forest, which knows element counts,
#   not the op's arithmetic, and put an Elu (exp per element, 2.2 ms in EnCodec) at 0.35 ms and a Softplus (exp and
#   log1p) at 1/25 of its time. Pow squares (RMSNorm's x^2, ReLU^2); Max takes a second tensor; SiLU again, as
#   COVERAGE_OPS drew it 5 times of 48 (the fused QuickGelu needs 8 kernels for a forest of its own)
ACTIVATION_OPS = ("Softplus", "Elu", "Selu", "Softsign", "LeakyRelu", "HardSigmoid", "Exp", "Log", "Sqrt",
                  "Reciprocal", "Abs", "Sign", "Round", "Floor", "Sin", "Cos", "Pow", "Max", "SiLU")
# - Pow by other exponents than 2 (`POW_OPS`, listed in the zoo configs): ORT multiplies for 2 and 3 and calls
#   std::pow for any other value, 12x the time per element (YOSO's Pow over [4, 512, 512], 3.3 ms in-model, was
#   predicted 0.27 ms from squares); the exponent is in the kernel's signature (`hase.kernels.split.VALUE_OPS`).
#   std::pow takes twice as long on a negative base, so the others raise |x|, as real graphs' x^0.5 and x^-1 do
POW_OPS = {"PowCube": 3.0, "PowHalf": 0.5, "PowInv": -1.0, "PowFrac": 1.5}
# - Cast between the dtypes real exports convert (`CAST_OPS`: source and target; listed in the zoo configs): the
#   zoo's Casts were all 4-byte, and I-BERT's float64 -> float32 Casts were predicted 11x their 0.05 ms
CAST_OPS = {"CastF64F32": (onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT),
            "CastF32F64": (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE),
            "CastI64F32": (onnx.TensorProto.INT64, onnx.TensorProto.FLOAT),
            "CastF32I64": (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64),
            "CastBoolF32": (onnx.TensorProto.BOOL, onnx.TensorProto.FLOAT)}
# - listed only (zoo configs), built by `_coverage` like COVERAGE_OPS: reductions over the outer axis of [1, rows,
#   width] (VibeVoice's ReduceMean over 32-128 channels of 6k-48k samples, ZoeDepth's ReduceSum over 64 maps of
#   256x256: 10-30x their predictions from last-axis reductions), and GQA's repeat of key/value heads, an Expand of
#   [1, rows, 1, width] to [1, rows, 2, width] (whole rows copied: 1/6 of what the Expands above put on it)
#   Element-wise ops whose two inputs broadcast along different axes (an outer sum or product, ORT's general
#   broadcast loop): SAM's decomposed relative positions [.., w, 1] + [.., 1, w] (`AddOuter`) and Mamba's and
#   Kimi's state updates, [.., c, 1] x [.., 1, 16] (`MulOuter`, 16 the state size), ran 2-4x their predictions
#   from one-sided broadcasts (Jamba's [1, 1024, 128, 1] x [1, 1, 128, 16]: 1.0 ms in-model, predicted 0.26 ms)
#   And a channels <-> tokens Transpose of [1, rows, width] by (0, 2, 1) (`Transpose021`): SegFormer's [1, 128,
#   16384] ran 1.35 ms in-model (6 GB/s, ORT moving one axis element by element), predicted 0.54 ms
LISTED_COVERAGE_OPS = ("ReduceMeanOuter", "ReduceSumOuter", "ExpandRepeat", "AddOuter", "MulOuter", "Transpose021")
OUTER_STATE = 16  # MulOuter's last axis: Mamba's state size
TRANSPOSE_OPS = ("Transpose0213", "Transpose0231", "Transpose20341")
SOFTMAX_OPS = ("SoftmaxAxis2", "SoftmaxAxis1")
MOVEMENT_OPS = (*TRANSPOSE_OPS, *SOFTMAX_OPS, "ResizeNearest", "ResizeLinear", "ResizeCubic")
RESIZE_MODES = {"ResizeNearest": ("nearest", 2.0), "ResizeLinear": ("linear", 2.0), "ResizeCubic": ("cubic", 0.93)}
RESIZE_MAX_ELEMENTS = 1 << 19  # input elements of a sampled Resize (the 2x output is 4x that; a cubic one of
# this size takes ~80 ms a run, and CrossViT's, the largest in the 45 real models, 172k elements)

#: the op types of each block family's sampled kernel, as ORT names them at `all` (refine finds it by these)
MAIN_OPS: dict[str, frozenset[str]] = {
    "sampled-conv": frozenset({"Conv", "FusedConv"}),
    "sampled-conv1d": frozenset({"Conv", "FusedConv"}),
    "sampled-matmul": frozenset({"MatMul", "FusedMatMul", "Gemm", "FusedGemm"}),
    "sampled-attention": frozenset({"MatMul", "FusedMatMul"}),
    "sampled-norm": frozenset({"LayerNormalization", "SkipLayerNormalization"}),
    "sampled-rmsnorm": frozenset({"SimplifiedLayerNormalization"}),
    "sampled-scan": frozenset({"MatMul", "Mul", "Add", "Squeeze", "Unsqueeze"}),
    "sampled-pool": frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMean", "Mul"}),
    "sampled-eltwise": frozenset(ELTWISE_OPS) | {"Resize", "Softmax", "QuickGelu", "Slice", "Pad", "Neg", "Expand",
                                                  "ReduceSum", "ReduceMax", "ReduceL2", "InstanceNormalization", "Cast",
                                                  "ReduceMean"}
    | (frozenset(ACTIVATION_OPS) - {"SiLU"}),
    "sampled-resize": frozenset({"Resize"}),
    "sampled-index": frozenset({"Gather", "ScatterND"}),
    "sampled-einsum": frozenset({"Einsum"}),
    "sampled-recurrent": frozenset({"LSTM", "GRU"}),
}
#: pooling as real graphs write it: `max`/`avg` windows, `global` (GlobalAveragePool), `window` (global pooling
#: written as an AveragePool whose window is the whole plane, HF's EfficientNet pooler over 1280x7x7) and `mixer`
#: (PoolFormer's token mixer: a stride-1 AveragePool without the padding in the mean, minus its input)
POOL_KINDS = ("max", "avg", "global", "window", "mixer", "se")  # `se`: listed only (the ranges have none)
# `nearest-floor` is nearest upsampling as torch.onnx writes F.interpolate(scale_factor=s) (coordinate mode
# `asymmetric`, nearest mode `floor`, a scales input): FPN/DBNet necks (PP-OCR's 2-8x). ORT copies an exact 2x of the
# two inner axes that way in whole rows, ~5x quicker than the half-pixel nearest of the same data; its other
# scales take the general path. The sampled half-pixel ones had put PP-OCRv5's 8x Resizes at 5.8 ms (0.2 ms).
RESIZE_MODE_NAMES = ("nearest", "linear", "cubic", "nearest-floor")
# Indexing as real exports write it, whose time is per index, not per byte (a forest that had seen only embedding
# lookups, whole rows per index, put them at a memcpy's time, 15-40x too fast):
# - `window`: ConvBERT's span convolution unfolds [b, seq, hidden + 8, 1] along the tokens with a [9, hidden] index
#   (one element per index, 9x the input);
# - `inner`: and then picks index 0 of a last axis of size 1 (an element-wise copy through Gather);
# - `scatter`: MViTv2's relative-position add writes [1, heads, q, k] back with ScatterND, one full 4-d coordinate
#   per element (ORT copies the data, then writes each update);
# - `rows`: ScatterND of whole rows ([n, 1] indices into [rows, width]), the per-row form.
INDEX_KINDS = ("window", "inner", "scatter", "rows")
INDEX_WINDOW = 9
INDEX_MAX_ELEMENTS = 1 << 20  # output elements of a sampled index op (a full-coordinate scatter's indices are 32
# bytes per element: 32 MB at this size; MViTv2-T's largest, [1, 1, 3136, 196], has 615k)


def is_sampled(family: str) -> bool:
    """Whether a model family is one of the sampled block families."""
    return family.startswith(SAMPLED_PREFIX)


def _dim(name: str, tag: str, default: int, minimum: int = 1) -> Param:
    return Param(name, tag, default, minimum=minimum, maximum=MAX_DIM)


def _check_conv(p: dict[str, Any]) -> None:
    if p["c_in"] % p["groups"] or p["c_out"] % p["groups"]:
        raise HaseError(f"sampled-conv: groups={p['groups']} must divide c_in={p['c_in']} and c_out={p['c_out']}")
    if p["spatial"] + 2 * ((p["kernel"] - 1) // 2) * p["dilation"] < p["dilation"] * (p["kernel"] - 1) + 1:
        raise HaseError(f"sampled-conv: spatial={p['spatial']} is too small for kernel={p['kernel']}")


@register_family(
    "sampled-conv", _dim("batch", "b", 1), _dim("c_in", "i", 32), _dim("c_out", "o", 32), _dim("spatial", "r", 56),
    Param("kernel", "k", 3, minimum=1, maximum=16), Param("stride", "s", 1, minimum=1, maximum=16),
    Param("dilation", "d", 1, minimum=1, maximum=4), _dim("groups", "g", 1),
    Param("act", "", "relu", choices=("relu", "none")),
    check=_check_conv,
)
def build_conv(g: GraphBuilder, p: dict[str, Any]) -> None:
    """One convolution (+BatchNormalization, +ReLU): ORT's NCHWc FusedConv between ReorderInput/Output."""
    x = g.input("input", (p["batch"], p["c_in"], p["spatial"], p["spatial"]))
    y = g.bn(g.conv(x, p["c_out"], p["kernel"], p["stride"], p["groups"], dilation=p["dilation"]))
    g.output(g.act(y, p["act"]), "output")


@register_family(
    "sampled-matmul", _dim("rows", "m", 128), _dim("k", "k", 256), _dim("n", "n", 256),
    Param("rank", "r", 3, choices=(2, 3)), Param("gelu", "", "none", choices=("none", "erf", "tanh")),
)
def build_matmul(g: GraphBuilder, p: dict[str, Any]) -> None:
    """x[rows, K] (or [1, rows, K]) @ W[K, N] + b, then GELU if asked: Gemm or MatMul, (Bias)Gelu at `all`."""
    shape = (p["rows"], p["k"]) if p["rank"] == 2 else (1, p["rows"], p["k"])
    x = g.input("input", shape)
    y = g.matmul(x, g.weight((p["k"], p["n"]), INIT_STD), (p["k"], p["n"]))
    y = g.binary("Add", y, g.weight((p["n"],), 0.01))
    g.output(y if p["gelu"] == "none" else gelu(g, y, p["gelu"]), "output")


@register_family(
    "sampled-attention", _dim("batch", "b", 4), _dim("m", "m", 128), _dim("k", "k", 64), _dim("n", "n", 128),
)
def build_attention(g: GraphBuilder, p: dict[str, Any]) -> None:
    """softmax(q @ keys^T * scale) @ v over [1, batch, ., .]: FusedMatMul (transB, alpha), Softmax, MatMul."""
    b, m, k, n = p["batch"], p["m"], p["k"], p["n"]
    q = g.input("query", (1, b, m, k))
    keys = g.input("key", (1, b, n, k))
    v = g.input("value", (1, b, n, k))
    scores = g.binary("Mul", g.matmul(q, g.transpose(keys, (0, 1, 3, 2))), g.const(1.0 / math.sqrt(k)))
    g.output(g.matmul(g.softmax(scores, -1), v), "output")


def _check_conv1d(p: dict[str, Any]) -> None:
    if p["c_in"] % p["groups"] or p["c_out"] % p["groups"]:
        raise HaseError(f"sampled-conv1d: groups={p['groups']} must divide c_in={p['c_in']} and c_out={p['c_out']}")
    if p["length"] + 2 * ((p["kernel"] - 1) // 2 if p["stride"] == 1 else 0) < p["kernel"]:
        raise HaseError(f"sampled-conv1d: length={p['length']} is shorter than kernel={p['kernel']}")


@register_family(
    "sampled-conv1d", _dim("batch", "b", 1), _dim("c_in", "i", 64), _dim("c_out", "o", 64), _dim("length", "l", 1000),
    Param("kernel", "k", 7, minimum=1, maximum=16), Param("stride", "s", 1, minimum=1, maximum=8),
    _dim("groups", "g", 1), check=_check_conv1d,
)
def build_conv1d(g: GraphBuilder, p: dict[str, Any]) -> None:
    """One 1-D Conv over [batch, c_in, length] with a bias, no activation (audio and time-series models: wav2vec2's
    strided feature encoder, depthwise k=7 ConvNeXt-1D blocks of codecs and vocoders). ORT's NCHWc transformer
    leaves 1-D convolutions in plain NCHW, and the 2-D samples put VibeVoice's depthwise ones at 4x their time."""
    k, s, groups = p["kernel"], p["stride"], p["groups"]
    pad = (k - 1) // 2 if s == 1 else 0
    out_len = (p["length"] + 2 * pad - k) // s + 1
    x = g.input("input", (p["batch"], p["c_in"], p["length"]))
    bound = 1.0 / math.sqrt(p["c_in"] // groups * k)
    w = g.uniform((p["c_out"], p["c_in"] // groups, k), -bound, bound)
    b = g.uniform((p["c_out"],), -bound, bound)
    g.output(g.op1("Conv", [x.name, w, b], (p["batch"], p["c_out"], out_len), kernel_shape=[k], strides=[s],
                   pads=[pad, pad], group=groups), "output")


@register_family("sampled-scan", _dim("steps", "t", 32), _dim("channels", "c", 256), _dim("state", "n", 16))
def build_scan(g: GraphBuilder, p: dict[str, Any]) -> None:
    """A selective scan unrolled over `steps`, as transformers' Mamba writes its slow path and torch.onnx unrolls it:
    per step h = A_t * h + Bu_t over [1, channels, state], then y_t = h @ C_t, ~9 tiny nodes a step. Real Mamba
    hybrids run 2-19 thousand such nodes, whose per-node cost the zoo never showed the calibration (Zamba's 19k nodes
    ran at 6.7 us each; Jamba and Zamba were predicted 40 % fast). The steps are split off in one Split per input, so
    the block has a handful of distinct kernels however many nodes it has."""
    t, c, n = p["steps"], p["channels"], p["state"]
    a, bu = (g.input(name, (1, c, t, n)) for name in ("a", "bu"))
    cs = g.input("c", (1, t, n))
    parts = {name: g.op("Split", [x.name], [(1, c, 1, n)] * t if name != "c" else [(1, 1, n)] * t, axis=2 if name != "c"
                        else 1) for name, x in (("a", a), ("bu", bu), ("c", cs))}
    axes2, axes1 = g.const([2], np.int64), g.const([1], np.int64)
    h = g.input("h0", (1, c, n))
    outs = []
    for i in range(t):
        a_t = g.op1("Squeeze", [parts["a"][i].name, axes2], (1, c, n))
        b_t = g.op1("Squeeze", [parts["bu"][i].name, axes2], (1, c, n))
        h = g.add(g.mul(a_t, h), b_t)
        c_t = g.op1("Unsqueeze", [g.op1("Squeeze", [parts["c"][i].name, axes1], (1, n)).name, g.const([-1], np.int64)],
                    (1, n, 1))
        outs.append(g.op1("MatMul", [h.name, c_t.name], (1, c, 1)))
    g.output(g.concat(outs, axis=2), "output")


@register_family("sampled-norm", _dim("rows", "m", 128), _dim("hidden", "h", 256),
                 Param("skip", "s", 1, choices=(0, 1)))
def build_norm(g: GraphBuilder, p: dict[str, Any]) -> None:
    """LayerNormalization over [1, rows, hidden], after a residual Add when skip=1 (SkipLayerNormalization)."""
    x = g.input("input", (1, p["rows"], p["hidden"]))
    if p["skip"]:
        x = g.add(x, g.input("residual", x.shape))
    g.output(g.layer_norm(x), "output")


@register_family("sampled-rmsnorm", _dim("rows", "m", 128), _dim("hidden", "h", 256))
def build_rmsnorm(g: GraphBuilder, p: dict[str, Any]) -> None:
    """RMSNorm over [1, rows, hidden] as transformers' Llama-style models export it (weight * x / sqrt(mean(x^2) +
    eps), between float casts): ORT fuses it into SimplifiedLayerNormalization, the norm of most decoder LLMs, which
    the zoo never ran (the LayerNormalization forest put dev4's at twice their time)."""
    x = g.input("input", (1, p["rows"], p["hidden"]))
    x = g.op1("Cast", [x.name], x.shape, to=onnx.TensorProto.FLOAT)  # hidden_states.to(torch.float32)
    mean = g.reduce_mean(g.binary("Pow", x, g.const(2.0)), [2], keepdims=True)
    root = g.op1("Sqrt", [g.binary("Add", mean, g.const(1e-6)).name], mean.shape)
    inv = g.binary("Div", g.const(1.0), root)  # torch.rsqrt as torch.onnx writes it
    y = g.op1("Cast", [g.mul(x, inv).name], x.shape, to=onnx.TensorProto.FLOAT)
    weight = g.initializer("rms_weight", (1.0 + g.rng.standard_normal(p["hidden"]) * 0.05).astype(np.float32))
    g.output(g.binary("Mul", weight, y), "output")


@register_family(
    "sampled-pool", _dim("batch", "b", 1), _dim("channels", "c", 64), _dim("spatial", "r", 56),
    Param("kernel", "k", 3, minimum=1, maximum=16), Param("stride", "s", 2, minimum=1, maximum=4),
    Param("kind", "", "max", choices=POOL_KINDS),
)
def build_pool(g: GraphBuilder, p: dict[str, Any]) -> None:
    """1x1 convolution (+ReLU), then the pool (`POOL_KINDS`): as after a real convolution, ORT runs it in NCHWc."""
    x = g.input("input", (p["batch"], p["channels"], p["spatial"], p["spatial"]))
    x = g.act(g.conv(x, p["channels"], 1, bias=True), "relu")
    if p["kind"] == "global":
        y = g.gap(x)
    elif p["kind"] == "window":
        y = g.avgpool(x, p["spatial"], p["spatial"])
    elif p["kind"] == "se":  # squeeze-and-excite as timm writes it: x * sigmoid(conv(relu(conv(x.mean((2, 3))))))
        s = g.reduce_mean(x, [2, 3], keepdims=True)
        s = g.act(g.conv(s, max(8, p["channels"] // 4), 1, bias=True), "relu")
        y = g.mul(x, g.act(g.conv(s, p["channels"], 1, bias=True), "sigmoid"))
    elif p["kind"] == "mixer":
        k = min(p["kernel"], p["spatial"])
        if k % 2 == 0:
            raise HaseError(f"sampled-pool: a mixer (pool(x) - x) needs an odd kernel to keep the plane, not {k}")
        y = g.binary("Sub", g.avgpool(x, k, 1, (k - 1) // 2), x)
    else:
        k = min(p["kernel"], p["spatial"])
        y = g.maxpool(x, k, p["stride"], (k - 1) // 2) if p["kind"] == "max" else \
            g.avgpool(x, k, p["stride"], (k - 1) // 2)
    g.output(y, "output")


ELTWISE_BLOCK_OPS = tuple(dict.fromkeys(ELTWISE_OPS + MOVEMENT_OPS + COVERAGE_OPS + ACTIVATION_OPS + tuple(POW_OPS)
                                        + tuple(CAST_OPS) + LISTED_COVERAGE_OPS))


@register_family("sampled-eltwise", _dim("rows", "m", 256), _dim("width", "w", 256),
                 Param("op", "", "Add", choices=ELTWISE_BLOCK_OPS))
def build_eltwise(g: GraphBuilder, p: dict[str, Any]) -> None:
    """One element-wise or data-movement op over [1, rows, width] (binary ops, Max and Concat take two inputs, Pow
    a constant exponent 2, POW_OPS theirs, CAST_OPS convert between their dtypes; a head transpose splits width into
    heads, a Resize reads rows as channels and width as the image side)."""
    op, shape = p["op"], (1, p["rows"], p["width"])
    if op in MOVEMENT_OPS:
        g.output(_movement(g, op, p["rows"], p["width"]), "output")
        return
    if op in COVERAGE_OPS or op in LISTED_COVERAGE_OPS:  # SiLU included, also one of ACTIVATION_OPS
        g.output(_coverage(g, op, p["rows"], p["width"]), "output")
        return
    if op in CAST_OPS:
        src, dst = CAST_OPS[op]
        g.output(g.op1("Cast", [g.input("input", shape, src).name], shape, dst, to=dst), "output")
        return
    x = g.input("input", shape)
    if op in POW_OPS:
        base = x if float(POW_OPS[op]).is_integer() and POW_OPS[op] > 0 else g.op1("Abs", [x.name], shape)
        y = g.op1("Pow", [base.name, g.const(POW_OPS[op])], shape)
    elif op in ("Add", "Mul", "Sub", "Div", "Concat", "Max"):
        other = g.input("other", shape)
        y = g.concat([x, other], axis=-1) if op == "Concat" else g.binary(op, x, other)
    elif op == "Pow":
        y = g.op1("Pow", [x.name, g.const(2.0)], shape)
    elif op == "Transpose":
        y = g.transpose(x, (0, 2, 1))
    elif op == "Clip":
        y = g.op1("Clip", [x.name, g.const(0.0), g.const(6.0)], shape)
    else:
        y = g.op1(op, [x.name], shape)
    g.output(y, "output")


def _check_resize(p: dict[str, Any]) -> None:
    if p["mode"] == "nearest-floor" and p["out"] % p["side"]:
        raise HaseError(f"sampled-resize: nearest-floor upsamples by a whole factor, out={p['out']} is no multiple "
                        f"of side={p['side']}: use out = 2, 4 or 8 x side")


@register_family(
    "sampled-resize", _dim("channels", "c", 256), _dim("side", "r", 32), _dim("out", "o", 128),
    Param("mode", "", "linear", choices=RESIZE_MODE_NAMES), check=_check_resize,
)
def build_resize(g: GraphBuilder, p: dict[str, Any]) -> None:
    """A Resize of [1, channels, side, side] to [1, channels, out, out] (half-pixel with output sizes, as PyTorch's
    interpolate with align_corners=False exports it: segmentation decoders' bilinear upsampling, SegFormer's at 512
    px), or, mode `nearest-floor`, by scales as torch writes nearest upsampling (asymmetric, floor)."""
    x = g.input("input", (1, p["channels"], p["side"], p["side"]))
    out = (1, p["channels"], p["out"], p["out"])
    if p["mode"] == "nearest-floor":
        factor = p["out"] / p["side"]
        scales = g.const([1.0, 1.0, factor, factor])
        y = g.op1("Resize", [x.name, "", scales], out, mode="nearest", coordinate_transformation_mode="asymmetric",
                  nearest_mode="floor")
    else:
        y = g.op1("Resize", [x.name, "", "", g.const(list(out), np.int64)], out, mode=p["mode"],
                  coordinate_transformation_mode="half_pixel")
    g.output(y, "output")


# Einsum as real exports write it (ORT runs it as transposes around a batched MatMul, so the equation decides how
# much is moved): CvT's attention scores `bhlk,bhtk->bhlt` and context `bhlt,bhtv->bhlv`, and MViTv2's relative
# positions `byhwc,hkc->byhwk`, batched over a middle axis (12x the roofline time of the first two)
EINSUM_EQUATIONS = {"qk": "bhlk,bhtk->bhlt", "av": "bhlt,bhtv->bhlv", "rel": "byhwc,hkc->byhwk",
                    "local-qk": "...qhd,...khd->...hqk", "local-av": "...hqk,...khd->...qhd",
                    "rel-key": "bhld,lrd->bhlr"}
# LongT5's local attention (listed in the zoo configs): heads kept in place, blocks of m queries against n keys in
# a leading batch axis, 6x the time the three above predicted for it; and relative-position keys per query
# (`rel-key`: w2v-BERT's and Conformers' [1, heads, l, d] x [l, r, d], 3.9 ms in-model, predicted 1.9 ms)
SAMPLED_EINSUMS = ("qk", "av", "rel")  # what the sampler draws


@register_family("sampled-einsum", _dim("batch", "b", 2), _dim("m", "m", 256), _dim("k", "k", 64),
                 _dim("n", "n", 64), Param("eq", "", "qk", choices=tuple(EINSUM_EQUATIONS)))
def build_einsum(g: GraphBuilder, p: dict[str, Any]) -> None:
    """One Einsum of `batch` products of m x k by k x n, written as `eq` (`EINSUM_EQUATIONS`)."""
    b, m, k, n, eq = p["batch"], p["m"], p["k"], p["n"], p["eq"]
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    out: tuple[int, ...]
    if eq == "local-qk":  # b blocks of m queries, 8 heads of k, against n keys: [1, b, m, 8, k] x [1, b, n, 8, k]
        shapes, out = ((1, b, m, 8, k), (1, b, n, 8, k)), (1, b, 8, m, n)
    elif eq == "local-av":  # [1, b, 8, m, n] scores x [1, b, n, 8, k] values
        shapes, out = ((1, b, 8, m, n), (1, b, n, 8, k)), (1, b, m, 8, k)
    elif eq == "rel-key":  # b heads of m queries, each against its own n relative keys: [1, b, m, k] x [m, n, k]
        shapes, out = ((1, b, m, k), (m, n, k)), (1, b, m, n)
    elif eq == "qk":
        shapes, out = ((1, b, m, k), (1, b, n, k)), (1, b, m, n)
    elif eq == "av":
        shapes, out = ((1, b, m, k), (1, b, k, n)), (1, b, m, n)
    else:
        shapes, out = ((1, 1, b, m, k), (b, n, k)), (1, 1, b, m, n)
    a, c = g.input("a", shapes[0]), g.input("b", shapes[1])
    g.output(g.op1("Einsum", [a.name, c.name], out, equation=EINSUM_EQUATIONS[eq]), "output")


# Recurrent cells as torch.onnx writes nn.LSTM and nn.GRU (one ONNX node per layer; EnCodec's and SEANet's LSTMs,
# OCR and TTS decoders): ORT runs the input projection of every step as one GEMM, then one small GEMM per step and
# direction, so the time grows with the steps, not only with the FLOPs (gates: LSTM 4, GRU 3)
RECURRENT_CELLS = {"lstm": ("LSTM", 4), "gru": ("GRU", 3)}


@register_family("sampled-recurrent", _dim("seq", "s", 64), _dim("batch", "b", 1), _dim("input", "i", 128),
                 _dim("hidden", "h", 128), Param("cell", "", "lstm", choices=tuple(RECURRENT_CELLS)),
                 Param("dirs", "d", 1, choices=(1, 2)))
def build_recurrent(g: GraphBuilder, p: dict[str, Any]) -> None:
    """One LSTM or GRU layer over [seq, batch, input] (`dirs` 2: bidirectional), all steps' outputs
    [seq, dirs, batch, hidden] out; GRU with linear_before_reset=1, as torch.onnx writes it."""
    op, gates = RECURRENT_CELLS[p["cell"]]
    seq, batch, dirs, hidden = p["seq"], p["batch"], p["dirs"], p["hidden"]
    scale = 1.0 / math.sqrt(hidden)
    x = g.input("input", (seq, batch, p["input"]))
    w = g.uniform((dirs, gates * hidden, p["input"]), -scale, scale)
    r = g.uniform((dirs, gates * hidden, hidden), -scale, scale)
    b = g.uniform((dirs, 2 * gates * hidden), -scale, scale)
    attrs: dict[str, Any] = {"hidden_size": hidden, "direction": "bidirectional" if dirs == 2 else "forward"}
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    g.output(g.op1(op, [x.name, w, r, b], (seq, dirs, batch, hidden), **attrs), "output")


def _check_index(p: dict[str, Any]) -> None:
    n = p["rows"] * p["width"] * (INDEX_WINDOW if p["kind"] == "window" else 1)
    if n > INDEX_MAX_ELEMENTS:
        raise HaseError(f"sampled-index: {p['kind']} over {p['rows']}x{p['width']} writes {n} elements, over "
                        f"{INDEX_MAX_ELEMENTS}: use fewer rows or a smaller width")
    if p["kind"] == "rows" and p["rows"] < 2:
        raise HaseError("sampled-index: a row scatter needs rows >= 2")


@register_family("sampled-index", _dim("rows", "m", 128), _dim("width", "w", 128),
                 Param("kind", "", "window", choices=INDEX_KINDS), check=_check_index)
def build_index(g: GraphBuilder, p: dict[str, Any]) -> None:
    """One Gather or ScatterND whose indices address single elements or rows (`INDEX_KINDS`), over `rows` x
    `width` (tokens x hidden, or query x key positions)."""
    rows, width, kind = p["rows"], p["width"], p["kind"]
    if kind == "window":
        x = g.input("input", (1, rows, width + INDEX_WINDOW - 1, 1))
        idx = np.arange(INDEX_WINDOW)[:, None] + np.arange(width)[None, :]
        y = g.op1("Gather", [x.name, g.const(idx, np.int64)], (1, rows, INDEX_WINDOW, width, 1), axis=2)
    elif kind == "inner":
        x = g.input("input", (1, rows, width, 1))
        y = g.op1("Gather", [x.name, g.const(np.zeros((1, 1)), np.int64)], (1, rows, width, 1, 1), axis=3)
    elif kind == "scatter":
        x = g.input("input", (1, 1, rows, width))
        updates = g.input("updates", (1, 1, rows, width))
        grid = np.stack(np.meshgrid(np.zeros(1), np.zeros(1), np.arange(rows), np.arange(width), indexing="ij"), -1)
        y = g.op1("ScatterND", [x.name, g.const(grid, np.int64), updates.name], x.shape)
    else:
        x = g.input("input", (rows, width))
        picked = np.arange(0, rows, 2)[:, None]
        updates = g.input("updates", (len(picked), width))
        y = g.op1("ScatterND", [x.name, g.const(picked, np.int64), updates.name], x.shape)
    g.output(y, "output")


def _outer_or_transpose(g: GraphBuilder, op: str, rows: int, width: int) -> Tensor:
    """Outer sums and products (`AddOuter`: [1, rows, width, 1] + [1, rows, 1, width]; `MulOuter`: [1, rows, width, 1]
    x [1, 1, width, 16]); `Transpose021`: [1, rows, width] to [1, width, rows]; `TransposeWindow`: Swin's window
    partition of a square map of `rows` tokens with `width` channels."""
    outers = {"AddOuter": ("Add", (1, rows, 1, width)), "MulOuter": ("Mul", (1, 1, width, OUTER_STATE))}
    if op in outers:
        binary, other = outers[op]
        return g.binary(binary, g.input("input", (1, rows, width, 1)), g.input("other", other))
    if op == "Transpose021":
        return g.transpose(g.input("input", (1, rows, width)), (0, 2, 1))
    win = 8 if rows >= 256 else 4
    n = max(1, math.isqrt(rows) // win)
    return g.transpose(g.input("input", (1, n, win, n, win, width)), (0, 1, 3, 2, 4, 5))


def _coverage(g: GraphBuilder, op: str, rows: int, width: int) -> Tensor:
    """One of `COVERAGE_OPS` or `LISTED_COVERAGE_OPS` over [1, rows, width] (rows as channels or tokens, width as a
    plane or hidden size)."""
    shape = (1, rows, width)
    expands = {"Expand": ((1, 1, width), shape), "ExpandLast": ((1, rows, 1), shape),
               "ExpandRepeat": ((1, rows, 1, width), (1, rows, 2, width))}
    if op in expands:
        part, out = expands[op]
        return g.op1("Expand", [g.input("input", part).name, g.const(list(out), np.int64)], out)
    if op in ("AddOuter", "MulOuter", "Transpose021", "TransposeWindow"):
        return _outer_or_transpose(g, op, rows, width)
    x = g.input("input", shape)
    if op == "SiLU":
        return g.binary("Mul", x, g.op1("Sigmoid", [x.name], shape))
    if op in ("SliceOuter", "SliceLast"):
        axis = 1 if op == "SliceOuter" else 2
        half = max(1, shape[axis] // 2)
        out = (1, half, width) if axis == 1 else (1, rows, half)
        return g.op1("Slice", [x.name, g.const([0], np.int64), g.const([half], np.int64), g.const([axis], np.int64)],
                     out)
    if op == "InstanceNorm":
        scale, bias = g.uniform((rows,), 0.5, 1.5), g.uniform((rows,), -0.1, 0.1)
        return g.op1("InstanceNormalization", [x.name, scale, bias], shape, epsilon=1e-5)
    # the rest are one node each: (op type, extra inputs, output shape, attributes); at opset 17 ReduceSum takes its
    # axes as an input, ReduceMax and ReduceL2 as an attribute
    one: dict[str, tuple[str, list[list[int]], tuple[int, ...], dict[str, Any]]] = {
        "Pad": ("Pad", [[0, 1, 1, 0, 1, 1]], (1, rows + 2, width + 2), {}),
        "Neg": ("Neg", [], shape, {}),
        "ReduceSumLast": ("ReduceSum", [[2]], (1, rows, 1), {"keepdims": 1}),
        "ReduceMaxLast": ("ReduceMax", [], (1, rows, 1), {"axes": [2], "keepdims": 1}),
        "ReduceL2Outer": ("ReduceL2", [], (1, 1, width), {"axes": [1], "keepdims": 1}),
        "ReduceMeanOuter": ("ReduceMean", [], (1, 1, width), {"axes": [1], "keepdims": 1}),
        "ReduceSumOuter": ("ReduceSum", [[1]], (1, 1, width), {"keepdims": 1}),
    }
    op_type, extra, out_shape, attrs = one[op]
    return g.op1(op_type, [x.name, *(g.const(v, np.int64) for v in extra)], out_shape, **attrs)


def _movement(g: GraphBuilder, op: str, rows: int, width: int) -> Tensor:
    """A head transpose or a softmax over tokens (rows tokens, `width` split into heads), or a Resize of
    [1, c, side, side]."""
    heads = math.gcd(width, 8)
    if op == "Transpose0213":
        return g.transpose(g.input("input", (1, rows, heads, width // heads)), (0, 2, 1, 3))
    if op == "Transpose0231":
        return g.transpose(g.input("input", (1, rows, heads, width // heads)), (0, 2, 3, 1))
    if op == "Transpose20341":
        return g.transpose(g.input("input", (1, rows, 1, heads, width // heads)), (2, 0, 3, 4, 1))
    if op == "SoftmaxAxis2":
        return g.softmax(g.input("input", (1, heads, rows, width // heads)), 2)
    if op == "SoftmaxAxis1":
        return g.softmax(g.input("input", (1, rows, heads, width // heads)), 1)
    mode, scale = RESIZE_MODES[op]
    side = max(7, min(width, 320))
    channels = max(1, min(rows, RESIZE_MAX_ELEMENTS // (side * side)))
    x = g.input("input", (1, channels, side, side))
    new_side = round(side * scale) if scale > 1 else min(side - 1, round(side * scale))  # never a same-size no-op
    out = (1, channels, new_side, new_side)
    sizes = g.const(list(out), np.int64)
    return g.op1("Resize", [x.name, "", "", sizes], out, mode=mode, coordinate_transformation_mode="half_pixel")


def block_flops(family: str, p: dict[str, Any]) -> float:
    """The cost of a block's sampled kernel: multiply-adds x 2, and MEMORY_FLOPS per element of the memory-bound
    families (about what one element's load and store take on a CPU core, in the time of that many flops)."""
    if family == "sampled-conv":
        out = p["spatial"] // p["stride"]
        return float(2.0 * p["batch"] * p["c_out"] * out * out * p["c_in"] // p["groups"] * p["kernel"] ** 2)
    if family == "sampled-matmul":
        return float(2.0 * p["rows"] * p["k"] * p["n"])
    if family in ("sampled-attention", "sampled-einsum"):  # attention: scores and context, two products
        return float((4.0 if family == "sampled-attention" else 2.0) * p["batch"] * p["m"] * p["k"] * p["n"])
    if family == "sampled-pool":
        return float(p["batch"] * p["channels"] * p["spatial"] ** 2 * (MEMORY_FLOPS + p["kernel"] ** 2))
    if family in ("sampled-norm", "sampled-rmsnorm", "sampled-eltwise", "sampled-index"):
        copies = INDEX_WINDOW if p.get("kind") == "window" else 1  # a window gather writes 9x its rows x width
        return float(p["rows"] * p.get("hidden", p.get("width", 1)) * copies) * MEMORY_FLOPS
    return _other_flops(family, p)


def _other_flops(family: str, p: dict[str, Any]) -> float:
    if family == "sampled-conv1d":
        out_len = p["length"] // p["stride"]
        return float(2.0 * p["batch"] * p["c_out"] * out_len * p["c_in"] // p["groups"] * p["kernel"])
    if family == "sampled-resize":
        return float(p["channels"] * (p["side"] ** 2 + p["out"] ** 2)) * MEMORY_FLOPS
    if family == "sampled-scan":
        return float(p["steps"] * p["channels"] * p["state"] * 6) * MEMORY_FLOPS
    if family == "sampled-recurrent":
        gates = RECURRENT_CELLS[p.get("cell", "lstm")][1]
        return float(2.0 * p["seq"] * p["batch"] * p["dirs"] * gates * p["hidden"] * (p["input"] + p["hidden"]))
    raise HaseError(f"unknown sampled family {family!r}: use one of {sorted(MAIN_OPS)}")
