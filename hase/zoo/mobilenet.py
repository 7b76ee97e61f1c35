"""MobileNet V1/V2/V3 and the inverted-residual (MBConv) block that MnasNet and ProxylessNAS reuse."""
from __future__ import annotations

from typing import Any

from hase.zoo.layers import GraphBuilder, Tensor, make_divisible
from hase.zoo.registry import Param, batch, kernel, register_family, resolution, width

NUM_CLASSES = 1000
RESIDUAL_GAMMA = 0.2

# MobileNetV1 depthwise-separable blocks as (out channels, stride); index 6 is the repeated 512-wide block.
V1_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (1024, 2), (1024, 1))
# MobileNetV2 stages as (expansion t (None: the family's), out channels c, repeats n, first stride s).
V2_STAGES = ((1, 16, 1, 1), (None, 24, 2, 2), (None, 32, 3, 2), (None, 64, 4, 2), (None, 96, 3, 1),
             (None, 160, 3, 2), (None, 320, 1, 1))
# MobileNetV3 blocks as (kernel, expanded, out, squeeze-excite, activation, stride), from the paper.
V3_BLOCKS: dict[str, tuple[tuple[int, int, int, bool, str, int], ...]] = {
    "large": (
        (3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
        (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
        (3, 240, 80, False, "hswish", 2), (3, 200, 80, False, "hswish", 1), (3, 184, 80, False, "hswish", 1),
        (3, 184, 80, False, "hswish", 1), (3, 480, 112, True, "hswish", 1), (3, 672, 112, True, "hswish", 1),
        (5, 672, 160, True, "hswish", 2), (5, 960, 160, True, "hswish", 1), (5, 960, 160, True, "hswish", 1),
    ),
    "small": (
        (3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2), (3, 88, 24, False, "relu", 1),
        (5, 96, 40, True, "hswish", 2), (5, 240, 40, True, "hswish", 1), (5, 240, 40, True, "hswish", 1),
        (5, 120, 48, True, "hswish", 1), (5, 144, 48, True, "hswish", 1), (5, 288, 96, True, "hswish", 2),
        (5, 576, 96, True, "hswish", 1), (5, 576, 96, True, "hswish", 1),
    ),
}
V3_HEAD = {"large": 1280, "small": 1024}


def squeeze_excite(g: GraphBuilder, x: Tensor, squeeze: int, gate: str = "hsigmoid") -> Tensor:
    """Squeeze-and-excite: GlobalAveragePool -> 1x1 -> ReLU -> 1x1 -> gate (HardSigmoid) -> Mul."""
    with g.scope("se"):
        s = g.act(g.conv(g.gap(x), squeeze, 1, bias=True), "relu")
        s = g.act(g.conv(s, x.channels, 1, bias=True), gate)
        return g.mul(x, s)


def inverted_residual(g: GraphBuilder, x: Tensor, hidden: int, out_c: int, k: int, stride: int,
                      act: str = "relu6", se: int = 0) -> Tensor:
    """MBConv: 1x1 expand (skipped when hidden == in), kxk depthwise, optional SE, linear 1x1 project (+ skip)."""
    y = x if hidden == x.channels else g.conv_bn(x, hidden, 1, act=act)
    y = g.conv_bn(y, hidden, k, stride, groups=hidden, act=act)
    if se:
        y = squeeze_excite(g, y, se)
    residual = stride == 1 and x.channels == out_c
    y = g.conv_bn(y, out_c, 1, act="none", gamma=RESIDUAL_GAMMA if residual else 1.0)
    return g.add(x, y) if residual else y


def classifier_head(g: GraphBuilder, x: Tensor, last_c: int, act: str) -> None:
    """1x1 conv to `last_c`, global pool, flatten, FC to the classes; declares the 'logits' output."""
    x = g.conv_bn(x, last_c, 1, act=act)
    x = g.flatten(g.gap(x))
    g.output(g.gemm(x, NUM_CLASSES), "logits")


@register_family("mobilenetv1", width(), kernel(3), Param("repeats", "n", 5, choices=(0, 1, 2, 3, 4, 5)),
                 resolution(224), batch())
def build_mobilenetv1(g: GraphBuilder, p: dict[str, Any]) -> None:
    """MobileNetV1: 3x3/2 stem, 13 depthwise-separable blocks (ReLU6), `repeats` of the 512-wide block kept."""
    w, k = p["width"], p["kernel"]
    x = g.image_input(p["batch"], p["resolution"])
    x = g.conv_bn(x, make_divisible(32 * w), 3, 2, act="relu6")
    blocks = V1_BLOCKS[:6] + (V1_BLOCKS[6],) * p["repeats"] + V1_BLOCKS[7:]
    for i, (c, stride) in enumerate(blocks):
        with g.scope(f"block{i}"):
            x = g.conv_bn(x, x.channels, k, stride, groups=x.channels, act="relu6")
            x = g.conv_bn(x, make_divisible(c * w), 1, act="relu6")
    x = g.flatten(g.gap(x))
    g.output(g.gemm(x, NUM_CLASSES), "logits")


@register_family("mobilenetv2", width(), kernel(3), Param("expansion", "t", 6, choices=(2, 3, 4, 6)),
                 resolution(224), batch())
def build_mobilenetv2(g: GraphBuilder, p: dict[str, Any]) -> None:
    """MobileNetV2: inverted residuals with linear bottlenecks (ReLU6), 1x1 to 1280 and a classifier."""
    w = p["width"]
    x = g.image_input(p["batch"], p["resolution"])
    x = g.conv_bn(x, make_divisible(32 * w), 3, 2, act="relu6")
    for s, (t, c, n, stride) in enumerate(V2_STAGES):
        expand = p["expansion"] if t is None else t
        for i in range(n):
            with g.scope(f"stage{s}.{i}"):
                hidden = round(x.channels * expand)
                x = inverted_residual(g, x, hidden, make_divisible(c * w), p["kernel"], stride if i == 0 else 1)
    classifier_head(g, x, make_divisible(1280 * max(1.0, w)), "relu6")


@register_family("mobilenetv3", Param("mode", "", "large", choices=tuple(V3_BLOCKS)), width(), resolution(224),
                 batch())
def build_mobilenetv3(g: GraphBuilder, p: dict[str, Any]) -> None:
    """MobileNetV3 large/small: MBConv with HardSwish and HardSigmoid squeeze-excite, 3x3 and 5x5 kernels."""
    w = p["width"]
    x = g.image_input(p["batch"], p["resolution"])
    x = g.conv_bn(x, make_divisible(16 * w), 3, 2, act="hswish")
    for i, (k, exp, c, se, act, stride) in enumerate(V3_BLOCKS[p["mode"]]):
        with g.scope(f"block{i}"):
            hidden = make_divisible(exp * w)
            squeeze = make_divisible(hidden // 4) if se else 0
            x = inverted_residual(g, x, hidden, make_divisible(c * w), k, stride, act, squeeze)
    x = g.conv_bn(x, 6 * x.channels, 1, act="hswish")
    x = g.flatten(g.gap(x))
    with g.scope("classifier"):
        x = g.gemm(x, make_divisible(V3_HEAD[p["mode"]] * max(1.0, w)), act="hswish")
        g.output(g.gemm(x, NUM_CLASSES), "logits")
