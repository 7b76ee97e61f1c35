"""The generic feature table: describes any kernel, so that no op is ever unpredictable.

It is what the fallback predictor uses for ops no family covers, and for op types whose own
predictor could not be trained; `hase predict` lists every kernel that went this way.
"""
from __future__ import annotations

from hase.kernels.types import KernelSpec
from hase.predict.features.common import (
    data_inputs,
    dtype_code,
    in_bytes,
    numel,
    out0,
    out_bytes,
    out_elems,
    present,
    tensor_bytes,
)
from hase.predict.features.registry import GENERIC, feature_family

GENERIC_COLUMNS = (
    ("in_elems", "elements of all inputs"),
    ("out_elems", "elements of all outputs"),
    ("in_bytes", "bytes of all inputs"),
    ("out_bytes", "bytes of all outputs"),
    ("const_bytes", "bytes of constant inputs (weights)"),
    ("n_inputs", "inputs"),
    ("n_outputs", "outputs"),
    ("max_rank", "largest rank of any input or output"),
    ("dtype", "output dtype code: 0 float32, 1 float16, 2 bfloat16, 3 float64, 4 int8, 5 uint8, 6 int32, "
              "7 int64, 8 bool"),
    ("flops", "output elements (a unit of work per output element)"),
    ("bytes", "input + output bytes"),
)


@feature_family(GENERIC, (), GENERIC_COLUMNS)
def generic_features(spec: KernelSpec) -> dict[str, float]:
    """Any op: input/output element counts and bytes, rank, dtype."""
    ins, outs = data_inputs(spec), present(spec.outputs)
    ib, ob = in_bytes(spec), out_bytes(spec)
    return {
        "in_elems": sum(numel(t.shape) for t in ins), "out_elems": out_elems(spec), "in_bytes": ib, "out_bytes": ob,
        "const_bytes": sum(tensor_bytes(t) for t in ins if t.const), "n_inputs": len(ins),
        "n_outputs": len(outs), "max_rank": max((len(t.shape) for t in ins + outs), default=0),
        "dtype": dtype_code(out0(spec).dtype), "flops": out_elems(spec), "bytes": ib + ob,
    }
