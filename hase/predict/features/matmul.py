"""Features of matrix products (MatMul, Gemm, FusedGemm, FusedMatMul, two-operand Einsum) and fused attention.

ORT prepacks a constant right-hand matrix once at session start, so `b_const` matters: a weight
product and an activation-by-activation product (attention scores) of the same size cost differently.
"""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import activation_code, attr, inp, numel, out0, safe_ratio, tensor_bytes
from hase.predict.features.registry import feature_family

MATMUL_OPS = ("MatMul", "Gemm", "FusedGemm", "FusedMatMul", "MatMulInteger", "QLinearMatMul", "Einsum")
MATMUL_COLUMNS = (
    ("batch", "product of the output's batch dimensions"),
    ("m", "rows of the product"),
    ("n", "columns of the product"),
    ("k", "reduction length"),
    ("flops", "2 x batch x M x N x K"),
    ("a_bytes", "bytes of the left operand"),
    ("b_bytes", "bytes of the right operand"),
    ("out_bytes", "bytes of the output"),
    ("bytes", "all operand and output bytes"),
    ("intensity", "FLOPs per byte moved"),
    ("trans_a", "left operand transposed"),
    ("trans_b", "right operand transposed"),
    ("a_const", "left operand is a constant"),
    ("b_const", "right operand is a constant (prepacked weights)"),
    ("b_batched", "right operand has batch dimensions > 1"),
    ("has_bias", "a bias (Gemm's C) is added"),
    ("activation", "fused activation code (see conv)"),
    ("n_batch_dims", "rank of the output minus 2"),
)
ATTENTION_OPS = ("Attention", "MultiHeadAttention")
ATTENTION_COLUMNS = (
    ("batch", "batch size"),
    ("seq", "sequence length"),
    ("hidden_in", "input hidden size"),
    ("hidden", "hidden size of Q/K/V"),
    ("heads", "attention heads"),
    ("head_size", "hidden / heads"),
    ("proj_flops", "FLOPs of the fused QKV projection (0 for MultiHeadAttention)"),
    ("attn_flops", "FLOPs of scores and context: 4 x batch x seq^2 x hidden"),
    ("flops", "projection + attention FLOPs"),
    ("bytes", "all input and output bytes"),
)


def einsum_dims(equation: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...]
                ) -> tuple[int, int, int, int, bool, bool] | None:
    """(batch, M, N, K, transA, transB) of a two-operand Einsum: letters in both operands and the output are batch,
    in one operand and the output M or N, in both operands only K (a letter summed out of one operand counts in K).
    CvT's attention `bhlk,bhtk->bhlt` is a batched q @ k^T (transB); an ellipsis stands for the leading axes it
    covers (LongT5's `...qhd,...khd->...hqk`); None for anything else (no `->`, shapes that do not match the
    letters)."""
    eq = equation.replace(" ", "")
    if "->" not in eq:
        return None
    lhs, out = eq.split("->")
    ops = lhs.split(",")
    if len(ops) != 2:
        return None
    if "..." in eq:
        ops, out = _expand_ellipsis(ops, out, (a_shape, b_shape))
    if len(ops[0]) != len(a_shape) or len(ops[1]) != len(b_shape) or "." in "".join(ops) + out:
        return None
    size = dict(zip(ops[0], a_shape, strict=True)) | dict(zip(ops[1], b_shape, strict=True))
    a, b = ops

    def prod(letters: str) -> int:
        return numel(tuple(size[c] for c in letters))

    batch = prod("".join(c for c in out if c in a and c in b))
    m = prod("".join(c for c in out if c in a and c not in b))
    n = prod("".join(c for c in out if c in b and c not in a))
    k = prod("".join(c for c in size if c not in out))
    contracted = [c for c in b if c not in out]
    trans_b = bool(contracted) and b.index(contracted[0]) > max((b.index(c) for c in b if c in out and c not in a),
                                                                 default=-1)
    contracted_a = [c for c in a if c not in out]
    trans_a = bool(contracted_a) and a.index(contracted_a[-1]) < max((a.index(c) for c in a if c in out and c not in b),
                                                                     default=-1)
    return batch, m, n, k, trans_a, trans_b


def _expand_ellipsis(ops: list[str], out: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[list[str], str]:
    """Operands and output with each `...` written as capital letters, one per axis it covers (aligned from the
    right, as numpy broadcasts them)."""
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in "".join(ops) + out]
    widths = [max(len(shape) - (len(op) - 3), 0) if "..." in op else 0 for op, shape in zip(ops, shapes, strict=True)]
    letters = "".join(spare[:max(widths, default=0)])
    expanded = [op.replace("...", letters[len(letters) - w:] if w else "") for op, w in zip(ops, widths, strict=True)]
    return expanded, out.replace("...", letters)


def _matmul_dims(spec: KernelSpec) -> tuple[int, int, int, int, bool, bool]:
    """(batch, M, N, K, transA, transB) of any matmul-like kernel."""
    a, b = inp(spec, 0), inp(spec, 1)
    if spec.op_type == "Einsum":
        dims = einsum_dims(str(attr(spec, "equation", "")), tuple(a.shape), tuple(b.shape)) \
            if a is not None and b is not None else None
        return dims or (1, numel(out0(spec).shape), 1, 1, False, False)
    ash = tuple(a.shape) if a is not None else (1, 1)
    bsh = tuple(b.shape) if b is not None else (1, 1)
    ta, tb = bool(attr(spec, "transA", 0)), bool(attr(spec, "transB", 0))
    if len(ash) == 1:
        ash, ta = (1, ash[0]), False
    if len(bsh) == 1:
        bsh, tb = (bsh[0], 1), False
    m, k = (ash[-1], ash[-2]) if ta else (ash[-2], ash[-1])
    n = bsh[-2] if tb else bsh[-1]
    y = out0(spec)
    batch = max(numel(y.shape) // max(m * n, 1), 1)
    return batch, m, n, k, ta, tb


@feature_family("matmul", MATMUL_OPS, MATMUL_COLUMNS)
def matmul_features(spec: KernelSpec) -> dict[str, float]:
    """Matrix products: batch, M, N, K, FLOPs, operand bytes, transposes, constant (prepacked) weights."""
    a, b, c = inp(spec, 0), inp(spec, 1), inp(spec, 2)
    y = out0(spec)
    batch, m, n, k, ta, tb = _matmul_dims(spec)
    flops = 2 * batch * m * n * k
    ab, bb, yb = (tensor_bytes(a) if a is not None else 0), (tensor_bytes(b) if b is not None else 0), tensor_bytes(y)
    has_bias = c is not None and spec.op_type in ("Gemm", "FusedGemm")
    total = ab + bb + yb + (tensor_bytes(c) if c is not None and has_bias else 0)
    b_batch = numel(b.shape[:-2]) if b is not None and len(b.shape) > 2 else 1
    return {
        "batch": batch, "m": m, "n": n, "k": k, "flops": flops, "a_bytes": ab, "b_bytes": bb, "out_bytes": yb,
        "bytes": total, "intensity": safe_ratio(flops, total), "trans_a": float(ta), "trans_b": float(tb),
        "a_const": float(a is not None and a.const), "b_const": float(b is not None and b.const),
        "b_batched": float(b_batch > 1), "has_bias": float(has_bias),
        "activation": activation_code(attr(spec, "activation", "")), "n_batch_dims": max(len(y.shape) - 2, 0),
    }


@feature_family("attention", ATTENTION_OPS, ATTENTION_COLUMNS)
def attention_features(spec: KernelSpec) -> dict[str, float]:
    """Fused attention (com.microsoft Attention / MultiHeadAttention): sizes and FLOPs of its pieces."""
    x, w = inp(spec, 0), inp(spec, 1)
    xs = tuple(x.shape) if x is not None and len(x.shape) == 3 else (1, 1, 1)
    batch, seq, hidden_in = xs
    heads = int(attr(spec, "num_heads", 1) or 1)
    if spec.op_type == "Attention" and w is not None and len(w.shape) == 2:
        hidden = w.shape[1] // 3
        proj = 2 * batch * seq * hidden_in * w.shape[1]
    else:
        hidden, proj = hidden_in, 0
    attn = 4 * batch * seq * seq * hidden
    total = sum(tensor_bytes(t) for t in spec.inputs if t.name) + sum(tensor_bytes(t) for t in spec.outputs if t.name)
    return {"batch": batch, "seq": seq, "hidden_in": hidden_in, "hidden": hidden, "heads": heads,
            "head_size": hidden // max(heads, 1), "proj_flops": proj, "attn_flops": attn, "flops": proj + attn,
            "bytes": total}
