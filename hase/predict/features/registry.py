"""The registry of feature families: which op types a family covers and its documented feature columns.

A family is registered with `@feature_family(name, ops, columns)` on its extractor; an op type may
belong to one family only (a second registration is an error). Ops no family claims use `generic`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hase.errors import HaseError
from hase.kernels.types import KernelSpec

ExtractFn = Callable[[KernelSpec], dict[str, float]]
VariantFn = Callable[[KernelSpec], str]
REQUIRED_COLUMNS = ("flops", "bytes")  # every family reports these, so model-level baselines can sum them
GENERIC = "generic"

_FAMILIES: dict[str, FeatureFamily] = {}
_BY_OP: dict[str, str] = {}


@dataclass(frozen=True)
class FeatureFamily:
    """A feature table for a group of op types: its columns with their meaning, and the extractor."""

    name: str
    ops: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    extract_fn: ExtractFn
    variant_fn: VariantFn | None = None
    description: str = ""

    @property
    def column_names(self) -> tuple[str, ...]:
        """The feature columns, in the order the extractor returns them (and the forests read them)."""
        return tuple(c for c, _ in self.columns)

    def extract(self, spec: KernelSpec) -> dict[str, float]:
        """The family's features of one kernel, in column order; a missing or extra column is a bug."""
        raw = self.extract_fn(spec)
        if set(raw) != set(self.column_names):
            diff = sorted(set(raw) ^ set(self.column_names))
            raise ValueError(f"feature family {self.name!r} returned columns that differ from its table: {diff}")
        return {c: float(raw[c]) for c in self.column_names}

    def variant(self, spec: KernelSpec) -> str:
        """A sub-kind that gets its own predictor (e.g. 'dw' for depthwise convolutions), or ''."""
        return self.variant_fn(spec) if self.variant_fn else ""


def feature_family(name: str, ops: tuple[str, ...], columns: tuple[tuple[str, str], ...],
                   variant: VariantFn | None = None) -> Callable[[ExtractFn], ExtractFn]:
    """Decorator: register `extract(spec) -> {column: value}` as family `name` for `ops`."""
    names = [c for c, _ in columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing or len(set(names)) != len(names):
        raise ValueError(f"feature family {name!r}: columns must be unique and include {list(REQUIRED_COLUMNS)}")

    def decorate(fn: ExtractFn) -> ExtractFn:
        if name in _FAMILIES:
            raise ValueError(f"feature family {name!r} is registered twice")
        taken = [op for op in ops if op in _BY_OP]
        if taken:
            raise ValueError(f"op types {taken} already belong to family {_BY_OP[taken[0]]!r}")
        doc = (fn.__doc__ or "").strip().splitlines()
        _FAMILIES[name] = FeatureFamily(name, tuple(ops), tuple(columns), fn, variant, doc[0] if doc else "")
        for op in ops:
            _BY_OP[op] = name
        return fn

    return decorate


def get_family(name: str) -> FeatureFamily:
    """The family `name`; an unknown name raises HaseError listing the known ones."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise HaseError(f"unknown feature family {name!r}: known families are {sorted(_FAMILIES)}") from None


def family_of(op_type: str) -> FeatureFamily:
    """The family that describes `op_type`: its own, or the generic fallback when no family claims it."""
    return _FAMILIES[_BY_OP.get(op_type, GENERIC)]


def has_family(op_type: str) -> bool:
    """Whether some family other than the generic fallback describes `op_type`."""
    return op_type in _BY_OP


def families() -> list[FeatureFamily]:
    """All registered families, generic last."""
    return sorted(_FAMILIES.values(), key=lambda f: (f.name == GENERIC, f.name))
