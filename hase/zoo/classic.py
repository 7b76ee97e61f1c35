"""Early plain CNN families: AlexNet, VGG and SqueezeNet (torchvision layouts, scaled by width)."""
from __future__ import annotations

from typing import Any

from hase.zoo.layers import GraphBuilder, Tensor, make_divisible
from hase.zoo.registry import Param, batch, register_family, resolution, width

NUM_CLASSES = 1000

VGG_LAYOUTS: dict[int, tuple[Any, ...]] = {  # "M" is a 2x2 max-pool
    11: (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    13: (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    16: (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
    19: (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"),
}

# SqueezeNet fire modules as (squeeze, expand1x1, expand3x3); "M" is a 3x3/2 ceil-mode max-pool.
SQUEEZENET_LAYOUTS: dict[str, tuple[Any, ...]] = {
    "1.0": ((96, 7), "M", (16, 64, 64), (16, 64, 64), (32, 128, 128), "M", (32, 128, 128), (48, 192, 192),
            (48, 192, 192), (64, 256, 256), "M", (64, 256, 256)),
    "1.1": ((64, 3), "M", (16, 64, 64), (16, 64, 64), "M", (32, 128, 128), (32, 128, 128), "M",
            (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)),
}


def _scaled(channels: int, w: float) -> int:
    return make_divisible(channels * w, 8)


def _classifier(g: GraphBuilder, x: Tensor, hidden: int) -> Tensor:
    """Flatten -> FC+ReLU -> FC+ReLU -> FC (dropout is gone at inference)."""
    with g.scope("classifier"):
        x = g.flatten(x)
        x = g.gemm(x, hidden, act="relu")
        x = g.gemm(x, hidden, act="relu")
        return g.gemm(x, NUM_CLASSES)


@register_family("alexnet", width(), resolution(224), batch())
def build_alexnet(g: GraphBuilder, p: dict[str, Any]) -> None:
    """AlexNet: five convolutions (11x11/4, 5x5, 3x3) with three max-pools, then three fully connected layers."""
    w = p["width"]
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("features"):
        for i, (c, k, stride) in enumerate(((64, 11, 4), (192, 5, 1), (384, 3, 1), (256, 3, 1), (256, 3, 1))):
            x = g.act(g.conv(x, _scaled(c, w), k, stride, bias=True, pad=2 if k > 3 else 1), "relu")
            if i in (0, 1, 4):
                x = g.maxpool(x, 3, 2)
    g.output(_classifier(g, x, _scaled(4096, w)), "logits")


@register_family("vgg", Param("depth", "d", 16, choices=tuple(VGG_LAYOUTS)), width(),
                 Param("bn", "bn", False), resolution(224), batch())
def build_vgg(g: GraphBuilder, p: dict[str, Any]) -> None:
    """VGG-11/13/16/19: stacks of 3x3 convolutions (optionally with BatchNorm) between 2x2 max-pools."""
    w = p["width"]
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("features"):
        for item in VGG_LAYOUTS[p["depth"]]:
            if item == "M":
                x = g.maxpool(x, 2, 2)
            elif p["bn"]:
                x = g.conv_bn(x, _scaled(item, w), 3)
            else:
                x = g.act(g.conv(x, _scaled(item, w), 3, bias=True), "relu")
    g.output(_classifier(g, x, _scaled(4096, w)), "logits")


def _fire(g: GraphBuilder, x: Tensor, squeeze: int, e1: int, e3: int) -> Tensor:
    """Fire module: 1x1 squeeze, then parallel 1x1 and 3x3 expands concatenated."""
    s = g.act(g.conv(x, squeeze, 1, bias=True), "relu")
    a = g.act(g.conv(s, e1, 1, bias=True), "relu")
    b = g.act(g.conv(s, e3, 3, bias=True), "relu")
    return g.concat([a, b])


@register_family("squeezenet", Param("version", "v", "1.1", choices=tuple(SQUEEZENET_LAYOUTS)), width(),
                 resolution(224), batch())
def build_squeezenet(g: GraphBuilder, p: dict[str, Any]) -> None:
    """SqueezeNet 1.0/1.1: fire modules, ceil-mode max-pools, a 1x1 conv classifier and global pooling."""
    w = p["width"]
    layout = SQUEEZENET_LAYOUTS[p["version"]]
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("features"):
        stem_c, stem_k = layout[0]
        x = g.act(g.conv(x, _scaled(stem_c, w), stem_k, 2, bias=True, pad=0), "relu")
        for i, item in enumerate(layout[1:]):
            if item == "M":
                x = g.maxpool(x, 3, 2, ceil=True)
            else:
                with g.scope(f"fire{i}"):
                    x = _fire(g, x, *(_scaled(c, w) for c in item))
    with g.scope("classifier"):
        x = g.act(g.conv(x, NUM_CLASSES, 1, bias=True), "relu")
        x = g.flatten(g.gap(x))
    g.output(x, "logits")
