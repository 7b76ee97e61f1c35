"""Features of element-wise ops, unary and broadcasting n-ary: element counts, bytes, broadcast pattern."""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import (
    broadcast_pattern,
    data_inputs,
    itemsize,
    moved_bytes,
    numel,
    out0,
    safe_ratio,
    trailing_block,
)
from hase.predict.features.registry import feature_family

UNARY_OPS = ("Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Exp", "Log", "Sqrt",
             "Reciprocal", "Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Erf", "Clip", "Cast", "CastLike", "Not",
             "Elu", "Selu", "Celu", "ThresholdedRelu", "Softplus", "Softsign", "Sin", "Cos", "IsNaN", "IsInf", "Mish",
             "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd", "BiasSoftmax", "Swish",
             "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
             "BatchNormalization")  # at inference a per-channel affine map: x * scale + shift
BINARY_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal", "Less",
              "LessOrEqual", "Greater", "GreaterOrEqual", "Where", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr")
ELEMENTWISE_COLUMNS = (
    ("out_elems", "output elements"),
    ("n_inputs", "inputs (constants included)"),
    ("n_const_inputs", "constant inputs"),
    ("max_in_elems", "elements of the largest input"),
    ("min_in_elems", "elements of the smallest input"),
    ("broadcast", "0 same shapes, 1 scalar operand, 2 row (suffix) broadcast, 3 other broadcast, 4 no input "
                  "of the output's shape (outer sum/product)"),
    ("broadcast_ratio", "output elements / smallest input's elements"),
    ("inner_block", "smallest contiguous block an input shares with the output"),
    ("rank", "output rank"),
    ("in_itemsize", "bytes per element of the first input"),
    ("out_itemsize", "bytes per element of the output"),
    ("is_float", "1 if the output is floating point"),
    ("pow_general", "Pow: 0 for an exponent of 2 or 3 (ORT multiplies), 1 for any other or an unknown one (std::pow, "
                    "12x the time per element); -1 for other ops"),
    ("flops", "output elements"),
    ("bytes", "input + output bytes"),
)


FAST_EXPONENTS = (2.0, 3.0)


def pow_general(spec: KernelSpec) -> float:
    """`pow_general` of a kernel: whether a Pow's exponent (a scalar constant whose value the signature carries as
    [low, high]) takes ORT's std::pow path."""
    if spec.op_type != "Pow":
        return -1.0
    e = spec.inputs[1] if len(spec.inputs) > 1 else None
    known = e is not None and e.const and e.numel == 1 and e.low == e.high
    return float(not (known and e is not None and e.low in FAST_EXPONENTS))


def _variant(spec: KernelSpec) -> str:
    """'general' for a Pow that takes ORT's std::pow path (its own predictor: 12x the time per element of a square,
    which a forest choosing among 4 of 17 features per split mixed with the squares), '' for the rest."""
    return "general" if pow_general(spec) == 1 else ""


@feature_family("elementwise", UNARY_OPS + BINARY_OPS, ELEMENTWISE_COLUMNS, variant=_variant)
def elementwise_features(spec: KernelSpec) -> dict[str, float]:
    """Element-wise ops: output size, operand sizes and the broadcast pattern that decides the loop shape."""
    ins = data_inputs(spec)
    if spec.op_type == "BatchNormalization":  # mean and variance fold into scale and shift
        ins = ins[:3]
    y = out0(spec)
    out_shape = tuple(y.shape)
    shapes = [tuple(t.shape) for t in ins] or [out_shape]
    sizes = [numel(s) for s in shapes]
    n_out = numel(out_shape)
    big = [s for s in shapes if numel(s) > 1]
    block = min((trailing_block(s, out_shape) for s in big), default=n_out)
    first = ins[0].dtype if ins else y.dtype
    return {
        "out_elems": n_out, "n_inputs": len(ins), "n_const_inputs": sum(t.const for t in ins),
        "max_in_elems": max(sizes), "min_in_elems": min(sizes), "broadcast": broadcast_pattern(shapes, out_shape),
        "broadcast_ratio": safe_ratio(n_out, max(min(sizes), 1)), "inner_block": block, "rank": len(out_shape),
        "in_itemsize": itemsize(first), "out_itemsize": itemsize(y.dtype),
        "is_float": float(y.dtype.startswith(("float", "bfloat"))), "pow_general": pow_general(spec),
        "flops": n_out, "bytes": moved_bytes(spec),
    }
