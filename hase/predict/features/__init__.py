"""Kernel features from the signature alone (no device access): one documented table per op family.

    >>> spec = KernelSpec.from_json(signature_json)        # a FusedConv 3x3, 32 -> 64 channels
    >>> kernel_key(spec), extract(spec)["flops"]
    ('FusedConv', 231211008.0)

Families: conv, matmul, attention, pool, norm, softmax, reduce, elementwise, movement, inplace, layout, recurrent,
and `generic`, which describes any op. `kernel_key` names the predictor a kernel belongs to: its op type, plus a
variant where one op type holds kernels that behave differently (``FusedConv/dw`` for depthwise).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hase.kernels.types import KernelSpec
from hase.predict.features import (  # noqa: F401 - fill the registry
    conv,
    elementwise,
    generic,
    layout,
    matmul,
    movement,
    recurrent,
    reduce,
)
from hase.predict.features.registry import (
    GENERIC,
    FeatureFamily,
    families,
    family_of,
    feature_family,
    get_family,
    has_family,
)

if TYPE_CHECKING:  # pragma: no cover - pandas loads only for the tables below, never to predict
    import pandas as pd

__all__ = [
    "GENERIC",
    "FeatureFamily",
    "cost_frame",
    "describe",
    "extract",
    "families",
    "family_of",
    "feature_family",
    "feature_frame",
    "generic_extract",
    "get_family",
    "has_family",
    "kernel_key",
]

KEY, FAMILY, FLOPS, BYTES = "key", "family", "flops", "bytes"


def kernel_key(spec: KernelSpec) -> str:
    """The predictor a kernel belongs to: op type, with the family's variant where it has one."""
    variant = family_of(spec.op_type).variant(spec)
    return f"{spec.op_type}/{variant}" if variant else spec.op_type


def extract(spec: KernelSpec) -> dict[str, float]:
    """The kernel's features in its own family's table (the generic one for unknown ops)."""
    return family_of(spec.op_type).extract(spec)


def generic_extract(spec: KernelSpec) -> dict[str, float]:
    """The kernel's features in the generic table (what the fallback predictor reads)."""
    return get_family(GENERIC).extract(spec)


def feature_frame(specs: Sequence[KernelSpec], family: FeatureFamily) -> pd.DataFrame:
    """One row per kernel, the family's columns in order (float64)."""
    import pandas as pd  # noqa: PLC0415 - loads only when a table is asked for: `hase predict` runs without pandas

    rows = [family.extract(s) for s in specs]
    return pd.DataFrame(rows, columns=list(family.column_names), dtype="float64")


def cost_frame(specs: Sequence[KernelSpec]) -> pd.DataFrame:
    """Per kernel: predictor key, family, FLOPs and bytes moved (what the FLOPs baselines sum)."""
    import pandas as pd  # noqa: PLC0415 - loads only when a table is asked for: `hase predict` runs without pandas

    rows = []
    for s in specs:
        fam = family_of(s.op_type)
        f = fam.extract(s)
        rows.append({KEY: kernel_key(s), FAMILY: fam.name, FLOPS: f["flops"], BYTES: f["bytes"]})
    return pd.DataFrame(rows, columns=[KEY, FAMILY, FLOPS, BYTES])


def describe() -> pd.DataFrame:
    """Every family's table: family, op types, column and meaning (for docs and `hase train --list-features`)."""
    import pandas as pd  # noqa: PLC0415 - loads only when a table is asked for: `hase predict` runs without pandas

    rows = [{"family": f.name, "ops": ", ".join(f.ops) or "(any other op)", "column": c, "meaning": m}
            for f in families() for c, m in f.columns]
    return pd.DataFrame(rows, columns=["family", "ops", "column", "meaning"])
