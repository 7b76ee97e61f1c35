"""Transformer families: a BERT-like post-LN encoder and a GPT-like pre-LN causal decoder.

Both are written the way PyTorch/Hugging Face exports look (MatMul+Add or Gemm linears, Reshape/Transpose
heads, Softmax attention, Erf- or Tanh-form GELU), so ONNX Runtime's transformer fusions apply to them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hase import limits
from hase.errors import HaseError
from hase.zoo.layers import FLOAT, INT64, GraphBuilder, Tensor
from hase.zoo.registry import Param, batch, register_family

INIT_STD = 0.02
MASK_VALUE = -10000.0  # BERT's additive mask value; finite so fully masked rows stay finite


@dataclass(frozen=True)
class Dims:
    """Static sizes of one transformer graph and its layer style."""

    batch: int
    seq: int
    hidden: int
    heads: int
    linear: str  # "matmul": [B, S, H] stream with MatMul+Add; "gemm": [B*S, H] stream with Gemm
    scale: str  # "div" by sqrt(d) or "mul" by 1/sqrt(d)

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def stream_shape(self) -> tuple[int, ...]:
        """Shape of the residual stream: (batch*seq, hidden) when linears are Gemm, else (batch, seq, hidden)."""
        if self.linear == "gemm":
            return (self.batch * self.seq, self.hidden)
        return (self.batch, self.seq, self.hidden)


def _params(layers: int, gelu: str, scale: str) -> tuple[Param, ...]:
    return (
        Param("layers", "l", layers, minimum=1, maximum=limits.ZOO_MAX_LAYERS),
        Param("hidden", "h", 768, minimum=8, maximum=limits.ZOO_MAX_HIDDEN),
        Param("heads", "a", 12, minimum=1, maximum=limits.ZOO_MAX_HEADS),
        Param("seq", "s", 128, minimum=1, maximum=limits.ZOO_MAX_SEQ), batch(),
        Param("vocab", "v", 30522, minimum=2, maximum=limits.ZOO_MAX_VOCAB),
        Param("gelu", "", gelu, choices=("erf", "tanh")),
        Param("linear", "", "matmul", choices=("matmul", "gemm")), Param("scale", "", scale, choices=("div", "mul")),
    )


def check_heads(p: dict[str, Any]) -> None:
    """Reject a hidden size that the number of attention heads does not divide."""
    if p["hidden"] % p["heads"]:
        raise HaseError(f"hidden={p['hidden']} is not divisible by heads={p['heads']}: pick a divisor of hidden")


def linear(g: GraphBuilder, x: Tensor, out: int, mode: str) -> Tensor:
    """Dense layer: MatMul(x, W[in, out]) + b on any rank, or Gemm(x, W[out, in]^T, b) on a 2-D stream."""
    fan_in = x.shape[-1]
    if mode == "gemm":
        return g.gemm(x, out, std=INIT_STD)
    y = g.matmul(x, g.weight((fan_in, out), INIT_STD), (fan_in, out))
    return g.binary("Add", y, g.weight((out,), 0.01))


def gelu(g: GraphBuilder, x: Tensor, form: str) -> Tensor:
    """GELU as exported: exact `0.5*x*(1+erf(x/sqrt2))` or the tanh approximation of GPT-2."""
    if form == "erf":
        e = g.op1("Erf", [g.binary("Div", x, g.const(math.sqrt(2.0))).name], x.shape)
        return g.binary("Mul", g.binary("Mul", x, g.binary("Add", e, g.const(1.0))), g.const(0.5))
    cube = g.binary("Mul", g.binary("Pow", x, g.const(3.0)), g.const(0.044715))
    inner = g.binary("Mul", g.binary("Add", x, cube), g.const(math.sqrt(2.0 / math.pi)))
    t = g.op1("Tanh", [inner.name], x.shape)
    return g.binary("Mul", g.binary("Mul", x, g.const(0.5)), g.binary("Add", t, g.const(1.0)))


def attention(g: GraphBuilder, x: Tensor, d: Dims, mask: Tensor | None, causal: bool, fused_qkv: bool) -> Tensor:
    """Multi-head self-attention: Q/K/V projections, scaled scores, mask, Softmax, context, output projection."""
    b, s, a, hd = d.batch, d.seq, d.heads, d.head_dim
    if fused_qkv:
        q, k, v = g.split(linear(g, x, 3 * d.hidden, d.linear), (d.hidden,) * 3, axis=-1)
    else:
        q, k, v = (linear(g, x, d.hidden, d.linear) for _ in range(3))
    q = g.transpose(g.reshape(q, (b, s, a, hd)), (0, 2, 1, 3))
    k = g.transpose(g.reshape(k, (b, s, a, hd)), (0, 2, 3, 1))
    v = g.transpose(g.reshape(v, (b, s, a, hd)), (0, 2, 1, 3))
    scores = g.matmul(q, k)
    if d.scale == "div":
        scores = g.binary("Div", scores, g.const(math.sqrt(hd)))
    else:
        scores = g.binary("Mul", scores, g.const(1.0 / math.sqrt(hd)))
    if causal:
        allowed = g.const(np.tril(np.ones((s, s), dtype=bool))[None, None], np.bool_)
        floor = g.const(np.finfo(np.float32).min)
        scores = g.op1("Where", [allowed, scores.name, floor], scores.shape)
    if mask is not None:
        scores = g.add(scores, mask)
    ctx = g.matmul(g.softmax(scores, -1), v)
    ctx = g.reshape(g.transpose(ctx, (0, 2, 1, 3)), d.stream_shape)
    return linear(g, ctx, d.hidden, d.linear)


def feed_forward(g: GraphBuilder, x: Tensor, d: Dims, form: str, ratio: int = 4) -> Tensor:
    """Position-wise FFN: linear to ratio*H, GELU, linear back to H."""
    return linear(g, gelu(g, linear(g, x, ratio * d.hidden, d.linear), form), d.hidden, d.linear)


def embed(g: GraphBuilder, ids: Tensor, d: Dims, vocab: int) -> tuple[Tensor, str]:
    """Token Gather plus learned position Gather; returns the [B, S, H] sum and the token table's name."""
    wte = g.weight((vocab, d.hidden), INIT_STD)
    tok = g.op1("Gather", [wte, ids.name], (d.batch, d.seq, d.hidden))
    wpe = g.weight((max(d.seq, 512), d.hidden), INIT_STD)
    pos = g.op1("Gather", [wpe, g.const(np.arange(d.seq)[None], np.int64)], (1, d.seq, d.hidden))
    return g.add(tok, pos), wte


def _dims(p: dict[str, Any]) -> Dims:
    return Dims(p["batch"], p["seq"], p["hidden"], p["heads"], p["linear"], p["scale"])


def _additive_mask(g: GraphBuilder, mask: Tensor) -> Tensor:
    """int64 [B, S] of 0/1 -> float [B, 1, 1, S] of 0 / -10000, as BERT exports it."""
    m = g.op1("Cast", [g.unsqueeze(mask, (1, 2)).name], (mask.shape[0], 1, 1, mask.shape[1]), to=FLOAT)
    m = g.binary("Sub", g.const(1.0), m)
    return g.binary("Mul", m, g.const(MASK_VALUE))


@register_family("bert", *_params(12, "erf", "div"), check=check_heads)
def build_bert(g: GraphBuilder, p: dict[str, Any]) -> None:
    """BERT-like encoder: embeddings + LayerNorm, post-LN layers (attention with padding mask, GELU FFN), pooler."""
    d = _dims(p)
    ids = g.input("input_ids", (d.batch, d.seq), INT64)
    mask = _additive_mask(g, g.input("attention_mask", (d.batch, d.seq), INT64))
    with g.scope("embeddings"):
        x, _ = embed(g, ids, d, p["vocab"])
        x = g.layer_norm(x, 1e-12)
        x = g.reshape(x, d.stream_shape) if d.linear == "gemm" else x
    for i in range(p["layers"]):
        with g.scope(f"layer.{i}"):
            x = g.layer_norm(g.add(x, attention(g, x, d, mask, causal=False, fused_qkv=False)), 1e-12)
            x = g.layer_norm(g.add(x, feed_forward(g, x, d, p["gelu"])), 1e-12)
    x = g.reshape(x, (d.batch, d.seq, d.hidden)) if d.linear == "gemm" else x
    with g.scope("pooler"):
        first = g.op1("Gather", [x.name, g.const(0, np.int64)], (d.batch, d.hidden), axis=1)
        pooled = g.gemm(first, d.hidden, std=INIT_STD, act="tanh")
    g.output(x, "last_hidden_state")
    g.output(pooled, "pooler_output")


@register_family("gpt", *_params(12, "tanh", "mul"), Param("lm_head", "lm", True), check=check_heads)
def build_gpt(g: GraphBuilder, p: dict[str, Any]) -> None:
    """GPT-like decoder: embeddings, pre-LN causal layers (fused QKV + Split), final LN, tied LM head."""
    d = _dims(p)
    ids = g.input("input_ids", (d.batch, d.seq), INT64)
    with g.scope("embeddings"):
        x, wte = embed(g, ids, d, p["vocab"])
        x = g.reshape(x, d.stream_shape) if d.linear == "gemm" else x
    for i in range(p["layers"]):
        with g.scope(f"h.{i}"):
            x = g.add(x, attention(g, g.layer_norm(x), d, None, causal=True, fused_qkv=True))
            x = g.add(x, feed_forward(g, g.layer_norm(x), d, p["gelu"]))
    x = g.layer_norm(x)
    if not p["lm_head"]:
        x = g.reshape(x, (d.batch, d.seq, d.hidden)) if d.linear == "gemm" else x
        g.output(x, "last_hidden_state")
        return
    with g.scope("lm_head"):  # tied to the token embedding table
        if d.linear == "gemm":
            logits = g.op1("Gemm", [x.name, wte], (d.batch * d.seq, p["vocab"]), transB=1)
            logits = g.reshape(logits, (d.batch, d.seq, p["vocab"]))
        else:
            wte_t = g.op1("Transpose", [wte], (d.hidden, p["vocab"]), perm=[1, 0])
            logits = g.matmul(x, wte_t)
    g.output(logits, "logits")
