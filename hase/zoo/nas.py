"""Architectures found by neural architecture search: MnasNet-B1 and ProxylessNAS (mobile, CPU, GPU)."""
from __future__ import annotations

from typing import Any

from hase.zoo.layers import GraphBuilder, make_divisible
from hase.zoo.mobilenet import NUM_CLASSES, classifier_head, inverted_residual
from hase.zoo.registry import Param, batch, register_family, resolution, width

MNASNET_DEPTHS = (32, 16, 24, 40, 80, 96, 192, 320)
# MnasNet-B1 stacks as (kernel, stride, expansion, repeats); stack i maps depth i+1 -> depth i+2.
MNASNET_STACKS = ((3, 2, 3, 3), (5, 2, 3, 3), (5, 2, 6, 3), (3, 1, 6, 2), (5, 2, 6, 4), (3, 1, 6, 1))

# ProxylessNAS searched blocks as (expansion, kernel, out channels, stride), after the published
# architectures (approximate), each with its stem width, first MB1 block width and final 1x1 width.
PROXYLESS: dict[str, dict[str, Any]] = {
    "mobile": {"stem": 32, "first": 16, "last": 1280, "blocks": (
        (3, 5, 24, 2), (3, 3, 24, 1),
        (3, 7, 40, 2), (3, 3, 40, 1), (3, 5, 40, 1), (3, 5, 40, 1),
        (6, 7, 80, 2), (3, 5, 80, 1), (3, 5, 80, 1), (3, 5, 80, 1),
        (6, 5, 96, 1), (3, 5, 96, 1), (3, 5, 96, 1), (3, 5, 96, 1),
        (6, 7, 192, 2), (6, 7, 192, 1), (3, 7, 192, 1), (3, 7, 192, 1),
        (6, 7, 320, 1))},
    "cpu": {"stem": 40, "first": 24, "last": 1432, "blocks": (
        (6, 3, 32, 2), (3, 3, 32, 1), (3, 3, 32, 1), (3, 3, 32, 1),
        (6, 3, 48, 2), (3, 3, 48, 1), (3, 3, 48, 1), (3, 5, 48, 1),
        (6, 3, 88, 2), (3, 3, 88, 1),
        (6, 5, 104, 1), (3, 3, 104, 1), (3, 3, 104, 1), (3, 3, 104, 1),
        (6, 5, 216, 2), (3, 5, 216, 1), (3, 5, 216, 1), (3, 3, 216, 1),
        (6, 5, 360, 1))},
    "gpu": {"stem": 40, "first": 24, "last": 1728, "blocks": (
        (3, 5, 32, 2),
        (3, 7, 56, 2), (3, 3, 56, 1),
        (6, 7, 112, 2), (3, 5, 112, 1),
        (6, 5, 128, 1), (3, 3, 128, 1), (3, 5, 128, 1),
        (6, 7, 256, 2), (6, 7, 256, 1), (6, 7, 256, 1), (6, 5, 256, 1),
        (6, 7, 432, 1))},
}


@register_family("mnasnet", width(), resolution(224), batch())
def build_mnasnet(g: GraphBuilder, p: dict[str, Any]) -> None:
    """MnasNet-B1 (torchvision): separable stem, six MBConv stacks (ReLU, 3x3/5x5), 1x1 to 1280, mean, FC."""
    d = [make_divisible(c * p["width"]) for c in MNASNET_DEPTHS]
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("stem"):
        x = g.conv_bn(x, d[0], 3, 2)
        x = g.conv_bn(x, d[0], 3, groups=d[0])
        x = g.conv_bn(x, d[1], 1, act="none")
    for s, (k, stride, t, repeats) in enumerate(MNASNET_STACKS):
        for i in range(repeats):
            with g.scope(f"stack{s}.{i}"):
                x = inverted_residual(g, x, x.channels * t, d[s + 2], k, stride if i == 0 else 1, act="relu")
    x = g.conv_bn(x, 1280, 1)
    x = g.reduce_mean(x, (2, 3))
    g.output(g.gemm(x, NUM_CLASSES), "logits")


@register_family("proxylessnas", Param("target", "", "mobile", choices=tuple(PROXYLESS)), width(),
                 resolution(224), batch())
def build_proxylessnas(g: GraphBuilder, p: dict[str, Any]) -> None:
    """ProxylessNAS searched for mobile, CPU or GPU: MBConv blocks with per-block expansion 3/6 and kernel 3/5/7."""
    arch, w = PROXYLESS[p["target"]], p["width"]
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("stem"):
        x = g.conv_bn(x, make_divisible(arch["stem"] * w), 3, 2, act="relu6")
        x = inverted_residual(g, x, x.channels, make_divisible(arch["first"] * w), 3, 1)
    for i, (t, k, c, stride) in enumerate(arch["blocks"]):
        with g.scope(f"block{i}"):
            x = inverted_residual(g, x, make_divisible(x.channels * t), make_divisible(c * w), k, stride)
    classifier_head(g, x, make_divisible(arch["last"] * max(1.0, w)), "relu6")
