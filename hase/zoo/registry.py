"""Registry of model-family builders keyed by family name, and the hashable `ModelSpec` that names a variant.

A family declares its tunable parameters (`Param`: name, short tag for model names, default, allowed
values); `Family.spec` turns a mapping of values into a validated `ModelSpec` whose name is built from the
tags, e.g. ``resnet_d18_w0.5_r64_b1``.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hase import limits
from hase.errors import HaseError

if TYPE_CHECKING:  # pragma: no cover
    from hase.zoo.layers import GraphBuilder

BuildFn = Callable[["GraphBuilder", dict[str, Any]], None]
CheckFn = Callable[[dict[str, Any]], None]

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_FAMILIES: dict[str, Family] = {}


@dataclass(frozen=True)
class ModelSpec:
    """One model variant: its family, a unique filename-safe name, and every parameter value (hashable)."""

    family: str
    name: str
    params: tuple[tuple[str, Any], ...]

    def kwargs(self) -> dict[str, Any]:
        """The parameters as a dict, in the family's declared order."""
        return dict(self.params)


@dataclass(frozen=True)
class Param:
    """A tunable parameter: its type is the default's type; `choices` (if any) lists the allowed values."""

    name: str
    tag: str
    default: Any
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    maximum: float | None = None  # sizes are bounded (hase.limits): a variant never asks for terabytes

    def coerce(self, family: str, value: Any) -> Any:
        """Check `value` against the declared type, choices, minimum and maximum; return it in canonical form."""
        where = f"{family}.{self.name}"
        kind = type(self.default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not kind:
            raise HaseError(f"{where} = {value!r} has the wrong type: use a {kind.__name__}, e.g. {self.default!r}")
        if self.choices and value not in self.choices:
            raise HaseError(f"{where} = {value!r} is not supported: use one of {list(self.choices)}")
        if self.minimum is not None and value < self.minimum:
            raise HaseError(f"{where} = {value!r} is too small: use a value >= {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise HaseError(f"{where} = {value!r} is over the limit of {self.maximum}: use a value <= {self.maximum}")
        return value

    def label(self, value: Any) -> str:
        """The part of a model name for `value`, e.g. ``w0.5`` or ``erf``."""
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif isinstance(value, float):
            text = repr(value)
        else:
            text = str(value)
        return f"{self.tag}{text}"


@dataclass(frozen=True)
class Family:
    """A model family: its parameters, the function that builds a graph, and an optional cross-parameter check."""

    name: str
    params: tuple[Param, ...]
    build: BuildFn
    description: str = ""
    check: CheckFn | None = None

    @property
    def param_names(self) -> list[str]:
        """Names of the family's parameters, in declaration order."""
        return [p.name for p in self.params]

    def spec(self, values: Mapping[str, Any]) -> ModelSpec:
        """Validate `values` (missing ones take defaults) and return the variant's `ModelSpec`."""
        unknown = sorted(set(values) - set(self.param_names))
        if unknown:
            raise HaseError(
                f"unknown parameter(s) {unknown} for family {self.name!r}: use some of {self.param_names}"
            )
        resolved = {p.name: p.coerce(self.name, values.get(p.name, p.default)) for p in self.params}
        if self.check is not None:
            self.check(resolved)
        name = "_".join([self.name] + [p.label(resolved[p.name]) for p in self.params])
        if not _NAME_RE.match(name):
            raise HaseError(f"model name {name!r} is not filename-safe: use plain letters, digits, '.', '-' in values")
        return ModelSpec(self.name, name, tuple(resolved.items()))


def register_family(name: str, *params: Param, check: CheckFn | None = None) -> Callable[[BuildFn], BuildFn]:
    """Decorator: register `build(g, params)` as the builder of family `name`; a duplicate name is an error."""
    tags = [p.tag for p in params if p.tag]
    if len(set(tags)) != len(tags) or len({p.name for p in params}) != len(params):
        raise ValueError(f"family {name!r} declares a parameter name or tag twice")

    def decorate(fn: BuildFn) -> BuildFn:
        if name in _FAMILIES:
            raise ValueError(f"model family {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()
        _FAMILIES[name] = Family(name, tuple(params), fn, doc[0] if doc else "", check)
        return fn

    return decorate


def get_family(name: str) -> Family:
    """The registered family `name`; an unknown name raises HaseError listing the known ones."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise HaseError(f"unknown model family {name!r}: use one of {sorted(_FAMILIES)}") from None


def families() -> list[Family]:
    """All registered families, sorted by name."""
    return [_FAMILIES[k] for k in sorted(_FAMILIES)]


# Parameters shared by the image families.
def width(default: float = 1.0) -> Param:
    """Channel-width multiplier."""
    return Param("width", "w", default, minimum=0.05, maximum=limits.ZOO_MAX_WIDTH)


def resolution(default: int = 224) -> Param:
    """Square input resolution in pixels."""
    return Param("resolution", "r", default, minimum=16, maximum=limits.ZOO_MAX_RESOLUTION)


def batch(default: int = 1) -> Param:
    """Batch size of the static input shape."""
    return Param("batch", "b", default, minimum=1, maximum=limits.ZOO_MAX_BATCH)


def kernel(default: int = 3) -> Param:
    """Depthwise kernel size."""
    return Param("kernel", "k", default, choices=(3, 5, 7))
