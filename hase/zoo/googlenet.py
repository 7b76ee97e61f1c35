"""GoogLeNet (Inception v1 with BatchNorm, torchvision layout): four-branch inception modules."""
from __future__ import annotations

from typing import Any

from hase.zoo.layers import GraphBuilder, Tensor, make_divisible
from hase.zoo.registry import Param, batch, register_family, resolution, width

NUM_CLASSES = 1000

# (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection); "M3" 3x3/2 and "M2" 2x2/2 ceil-mode max-pools.
INCEPTION_LAYOUT: tuple[Any, ...] = (
    ("3a", (64, 96, 128, 16, 32, 32)), ("3b", (128, 128, 192, 32, 96, 64)), "M3",
    ("4a", (192, 96, 208, 16, 48, 64)), ("4b", (160, 112, 224, 24, 64, 64)), ("4c", (128, 128, 256, 24, 64, 64)),
    ("4d", (112, 144, 288, 32, 64, 64)), ("4e", (256, 160, 320, 32, 128, 128)), "M2",
    ("5a", (256, 160, 320, 32, 128, 128)), ("5b", (384, 192, 384, 48, 128, 128)),
)


def _inception(g: GraphBuilder, x: Tensor, chans: tuple[int, ...], k: int) -> Tensor:
    """1x1 | 1x1->3x3 | 1x1->kxk | 3x3 max-pool->1x1, concatenated along channels."""
    c1, c3r, c3, c5r, c5, cp = chans
    b1 = g.conv_bn(x, c1, 1)
    b2 = g.conv_bn(g.conv_bn(x, c3r, 1), c3, 3)
    b3 = g.conv_bn(g.conv_bn(x, c5r, 1), c5, k)
    b4 = g.conv_bn(g.maxpool(x, 3, 1, pad=1, ceil=True), cp, 1)
    return g.concat([b1, b2, b3, b4])


@register_family("googlenet", width(), Param("kernel", "k", 5, choices=(3, 5)), resolution(224), batch())
def build_googlenet(g: GraphBuilder, p: dict[str, Any]) -> None:
    """GoogLeNet: 7x7/2 stem, nine inception modules (third branch kxk: 5 as in the paper, 3 as in torchvision)."""
    def c(n: int) -> int:
        return make_divisible(n * p["width"], 8)

    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("stem"):
        x = g.maxpool(g.conv_bn(x, c(64), 7, 2), 3, 2, ceil=True)
        x = g.conv_bn(g.conv_bn(x, c(64), 1), c(192), 3)
        x = g.maxpool(x, 3, 2, ceil=True)
    for item in INCEPTION_LAYOUT:
        if item == "M3":
            x = g.maxpool(x, 3, 2, ceil=True)
        elif item == "M2":
            x = g.maxpool(x, 2, 2, ceil=True)
        else:
            name, chans = item
            with g.scope(f"inception{name}"):
                x = _inception(g, x, tuple(c(n) for n in chans), p["kernel"])
    x = g.flatten(g.gap(x))
    g.output(g.gemm(x, NUM_CLASSES), "logits")
