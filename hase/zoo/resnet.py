"""Residual and densely connected families: ResNet (basic and bottleneck blocks) and DenseNet-BC."""
from __future__ import annotations

from typing import Any

from hase import limits
from hase.zoo.layers import GraphBuilder, Tensor, make_divisible
from hase.zoo.registry import Param, batch, register_family, resolution, width

NUM_CLASSES = 1000
RESIDUAL_GAMMA = 0.2  # damp the last BN of each branch so deep random nets keep finite activations

# depth -> (block kind, blocks per stage)
RESNET_LAYOUTS: dict[int, tuple[str, tuple[int, ...]]] = {
    10: ("basic", (1, 1, 1, 1)),
    18: ("basic", (2, 2, 2, 2)),
    26: ("bottleneck", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}

# depth -> dense layers per block (depth = 2 * sum + 5)
DENSENET_LAYOUTS: dict[int, tuple[int, ...]] = {
    45: (2, 4, 8, 6),
    63: (3, 6, 12, 8),
    121: (6, 12, 24, 16),
    161: (6, 12, 36, 24),
    169: (6, 12, 32, 32),
    201: (6, 12, 48, 32),
}


def _basic(g: GraphBuilder, x: Tensor, planes: int, stride: int) -> Tensor:
    """Two 3x3 conv-BN layers with an identity or 1x1-conv-BN shortcut."""
    y = g.conv_bn(x, planes, 3, stride)
    y = g.conv_bn(y, planes, 3, act="none", gamma=RESIDUAL_GAMMA)
    return g.act(g.add(y, _shortcut(g, x, planes, stride)), "relu")


def _bottleneck(g: GraphBuilder, x: Tensor, planes: int, stride: int) -> Tensor:
    """1x1 reduce, 3x3 (carrying the stride, as in torchvision v1.5), 1x1 expand by 4, plus shortcut."""
    y = g.conv_bn(x, planes, 1)
    y = g.conv_bn(y, planes, 3, stride)
    y = g.conv_bn(y, planes * 4, 1, act="none", gamma=RESIDUAL_GAMMA)
    return g.act(g.add(y, _shortcut(g, x, planes * 4, stride)), "relu")


def _shortcut(g: GraphBuilder, x: Tensor, out_c: int, stride: int) -> Tensor:
    if stride == 1 and x.channels == out_c:
        return x
    with g.scope("downsample"):
        return g.conv_bn(x, out_c, 1, stride, act="none")


@register_family("resnet", Param("depth", "d", 18, choices=tuple(RESNET_LAYOUTS)), width(), resolution(224),
                 batch())
def build_resnet(g: GraphBuilder, p: dict[str, Any]) -> None:
    """ResNet-10..152: 7x7/2 stem and max-pool, four stages of basic or bottleneck blocks, global pool, FC."""
    kind, blocks = RESNET_LAYOUTS[p["depth"]]
    block = _basic if kind == "basic" else _bottleneck
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("stem"):
        x = g.conv_bn(x, make_divisible(64 * p["width"]), 7, 2)
        x = g.maxpool(x, 3, 2, pad=1)
    for stage, n in enumerate(blocks):
        planes = make_divisible(64 * 2**stage * p["width"])
        for i in range(n):
            with g.scope(f"layer{stage + 1}.{i}"):
                x = block(g, x, planes, 2 if i == 0 and stage > 0 else 1)
    x = g.flatten(g.gap(x))
    g.output(g.gemm(x, NUM_CLASSES), "logits")


def _dense_layer(g: GraphBuilder, features: list[Tensor], growth: int) -> Tensor:
    """Pre-activation bottleneck: concat(all previous) -> BN-ReLU-1x1 (4k) -> BN-ReLU-3x3 (k)."""
    x = g.concat(features) if len(features) > 1 else features[0]
    x = g.conv(g.act(g.bn(x), "relu"), 4 * growth, 1)
    return g.conv(g.act(g.bn(x), "relu"), growth, 3)


def _transition(g: GraphBuilder, x: Tensor) -> Tensor:
    """BN-ReLU-1x1 conv halving the channels, then 2x2 average pooling."""
    x = g.conv(g.act(g.bn(x), "relu"), x.channels // 2, 1)
    return g.avgpool(x, 2, 2)


@register_family("densenet", Param("depth", "d", 121, choices=tuple(DENSENET_LAYOUTS)),
                 Param("growth", "k", 32, minimum=4, maximum=limits.ZOO_MAX_GROWTH), resolution(224), batch())
def build_densenet(g: GraphBuilder, p: dict[str, Any]) -> None:
    """DenseNet-BC: 7x7/2 stem, dense blocks whose layers see all earlier outputs, compressing transitions."""
    growth = p["growth"]
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("stem"):
        x = g.maxpool(g.conv_bn(x, 2 * growth, 7, 2), 3, 2, pad=1)
    layout = DENSENET_LAYOUTS[p["depth"]]
    for b, n in enumerate(layout):
        features = [x]
        for i in range(n):
            with g.scope(f"denseblock{b + 1}.layer{i + 1}"):
                features.append(_dense_layer(g, features, growth))
        x = g.concat(features)
        if b < len(layout) - 1:
            with g.scope(f"transition{b + 1}"):
                x = _transition(g, x)
    x = g.act(g.bn(x), "relu")
    x = g.flatten(g.gap(x))
    g.output(g.gemm(x, NUM_CLASSES), "logits")
