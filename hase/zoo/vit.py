"""Vision Transformer family: patch-embedding Conv, class token, pre-LN encoder blocks, class-token classifier.

Written the way timm/PyTorch exports a ViT (Conv patchify, Reshape/Transpose to tokens, Concat of an expanded
class token, learned position embedding), with the attention and MLP blocks shared with the GPT family.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hase import limits
from hase.errors import HaseError
from hase.zoo.layers import GraphBuilder, Tensor
from hase.zoo.registry import Param, batch, register_family, resolution
from hase.zoo.transformer import INIT_STD, Dims, attention, check_heads, feed_forward

NUM_CLASSES = 1000
LN_EPS = 1e-6  # timm's ViT LayerNorm epsilon


def _check(p: dict[str, Any]) -> None:
    check_heads(p)
    if p["resolution"] % p["patch"]:
        raise HaseError(f"resolution={p['resolution']} is not divisible by patch={p['patch']}: "
                        "pick a multiple of the patch size")


def patch_tokens(g: GraphBuilder, image: Tensor, d: Dims, patch: int) -> Tensor:
    """[B, 3, R, R] -> Conv(kernel=stride=patch) -> [B, N, H] tokens -> class token prepended -> + positions."""
    x = g.conv(image, d.hidden, patch, stride=patch, bias=True, pad=0)
    n = x.shape[2] * x.shape[3]
    x = g.transpose(g.reshape(x, (d.batch, d.hidden, n)), (0, 2, 1))
    cls = g.op1("Expand", [g.weight((1, 1, d.hidden), INIT_STD), g.const([d.batch, 1, d.hidden], np.int64)],
                (d.batch, 1, d.hidden))
    x = g.concat([cls, x], axis=1)
    return g.binary("Add", x, g.weight((1, n + 1, d.hidden), INIT_STD))


@register_family(
    "vit",
    Param("layers", "l", 12, minimum=1, maximum=limits.ZOO_MAX_LAYERS),
    Param("hidden", "h", 768, minimum=8, maximum=limits.ZOO_MAX_HIDDEN),
    Param("heads", "a", 12, minimum=1, maximum=limits.ZOO_MAX_HEADS),
    Param("patch", "p", 16, choices=(4, 8, 16)), resolution(), batch(),
    Param("gelu", "", "erf", choices=("erf", "tanh")), Param("linear", "", "matmul", choices=("matmul", "gemm")),
    Param("scale", "", "div", choices=("div", "mul")),
    Param("mlp_ratio", "m", 4, minimum=1, maximum=limits.ZOO_MAX_MLP_RATIO),
    check=_check,
)
def build_vit(g: GraphBuilder, p: dict[str, Any]) -> None:
    """ViT image classifier: patch embedding, pre-LN encoder blocks (fused QKV), final LN, class-token Gemm head."""
    seq = (p["resolution"] // p["patch"]) ** 2 + 1
    d = Dims(p["batch"], seq, p["hidden"], p["heads"], p["linear"], p["scale"])
    image = g.image_input(d.batch, p["resolution"])
    with g.scope("embeddings"):
        x = patch_tokens(g, image, d, p["patch"])
        x = g.reshape(x, d.stream_shape) if d.linear == "gemm" else x
    for i in range(p["layers"]):
        with g.scope(f"blocks.{i}"):
            x = g.add(x, attention(g, g.layer_norm(x, LN_EPS), d, None, causal=False, fused_qkv=True))
            x = g.add(x, feed_forward(g, g.layer_norm(x, LN_EPS), d, p["gelu"], p["mlp_ratio"]))
    x = g.layer_norm(x, LN_EPS)
    x = g.reshape(x, (d.batch, d.seq, d.hidden)) if d.linear == "gemm" else x
    with g.scope("head"):
        first = g.op1("Gather", [x.name, g.const(0, np.int64)], (d.batch, d.hidden), axis=1)
        logits = g.gemm(first, NUM_CLASSES, std=INIT_STD)
    g.output(logits, "logits")
