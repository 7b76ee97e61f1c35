"""ShuffleNetV2: channel split, depthwise branch, concat and channel shuffle (Reshape/Transpose/Reshape)."""
from __future__ import annotations

from typing import Any

from hase.zoo.layers import GraphBuilder, Tensor
from hase.zoo.registry import Param, batch, kernel, register_family, resolution

NUM_CLASSES = 1000
STAGE_REPEATS = (4, 8, 4)
# width multiplier -> output channels of (stem, stage2, stage3, stage4, last 1x1 conv), as in the paper
STAGE_CHANNELS: dict[float, tuple[int, ...]] = {
    0.5: (24, 48, 96, 192, 1024),
    1.0: (24, 116, 232, 464, 1024),
    1.5: (24, 176, 352, 704, 1024),
    2.0: (24, 244, 488, 976, 2048),
}


def channel_shuffle(g: GraphBuilder, x: Tensor, groups: int = 2) -> Tensor:
    """Interleave channel groups: Reshape to [N, g, C/g, H, W], swap axes 1 and 2, Reshape back."""
    n, c, h, w = x.shape
    y = g.reshape(x, (n, groups, c // groups, h, w))
    y = g.transpose(y, (0, 2, 1, 3, 4))
    return g.reshape(y, (n, c, h, w))


def _branch(g: GraphBuilder, x: Tensor, out_c: int, k: int, stride: int) -> Tensor:
    """1x1-BN-ReLU, kxk depthwise-BN (no activation), 1x1-BN-ReLU."""
    y = g.conv_bn(x, out_c, 1)
    y = g.conv_bn(y, out_c, k, stride, groups=out_c, act="none")
    return g.conv_bn(y, out_c, 1)


def _unit(g: GraphBuilder, x: Tensor, out_c: int, k: int, stride: int) -> Tensor:
    """A ShuffleNetV2 unit: stride 1 splits the channels in half; stride 2 runs both branches on the input."""
    half = out_c // 2
    if stride == 1:
        left, right = g.split(x, (x.channels // 2, x.channels // 2))
        right = _branch(g, right, half, k, 1)
    else:
        left = g.conv_bn(x, x.channels, k, stride, groups=x.channels, act="none")
        left = g.conv_bn(left, half, 1)
        right = _branch(g, x, half, k, stride)
    return channel_shuffle(g, g.concat([left, right]))


@register_family("shufflenetv2", Param("width", "w", 1.0, choices=tuple(STAGE_CHANNELS)), kernel(3),
                 resolution(224), batch())
def build_shufflenetv2(g: GraphBuilder, p: dict[str, Any]) -> None:
    """ShuffleNetV2 0.5x-2.0x: 3x3/2 stem and max-pool, three stages of shuffle units, 1x1 conv, mean, FC."""
    chans = STAGE_CHANNELS[p["width"]]
    x = g.image_input(p["batch"], p["resolution"])
    with g.scope("stem"):
        x = g.maxpool(g.conv_bn(x, chans[0], 3, 2), 3, 2, pad=1)
    for s, repeats in enumerate(STAGE_REPEATS):
        for i in range(repeats):
            with g.scope(f"stage{s + 2}.{i}"):
                x = _unit(g, x, chans[s + 1], p["kernel"], 2 if i == 0 else 1)
    x = g.conv_bn(x, chans[-1], 1)
    x = g.reduce_mean(x, (2, 3))
    g.output(g.gemm(x, NUM_CLASSES), "logits")
