"""Read a zoo config (TOML) into validated `ModelSpec`s.

Format::

    seed = 0        # weights come from numpy's Generator seeded with (seed, model name)
    opset = 17      # default-domain opset of every model (17..20)

    [[families.resnet]]     # one grid: the cartesian product of the listed values
    depth = [18, 50]        # a list means "each of these"
    width = 0.5             # a scalar is a single value
    resolution = [64, 96]
    batch = 1               # parameters left out take the family's default

    [[families.resnet]]     # more grids for the same family are allowed; duplicates are dropped
    depth = 10

A family given as a single table (``[families.gpt]``) is one grid.

    [sampler]               # optional: sampled block models over real kernel sizes
    kernels = 240

The `[sampler]` table is kept as it is (`ZooConfig.sampler_table`): the kernel sampler (`hase.sampler.config`)
validates it and adds the sampled blocks after the listed families' variants; a config may hold only a
`[sampler]` table.
"""
from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hase import limits
from hase.errors import HaseError
from hase.files import load_toml
from hase.zoo.layers import IR_VERSIONS
from hase.zoo.registry import ModelSpec, families, get_family

log = logging.getLogger(__name__)

TOP_LEVEL_KEYS = ("seed", "opset", "families", "sampler")


@dataclass(frozen=True)
class ZooConfig:
    """A parsed zoo config: its name (the file stem), weight seed, opset, the variants in file order, the raw
    `[sampler]` table if any and the folder its relative paths start from.

    `hase.sampler.config.resolve` appends the sampled blocks the `[sampler]` table asks for to `specs`."""

    name: str
    seed: int
    opset: int
    specs: tuple[ModelSpec, ...]
    sampler_table: Mapping[str, Any] | None = None
    config_dir: Path = Path(".")


def read_zoo_config(path: str | Path) -> ZooConfig:
    """Parse and validate the TOML zoo config at `path`; every problem raises HaseError naming the fix."""
    data = load_toml(path, "zoo config", "pass --config with an existing .toml file")
    return parse_zoo_config(data, Path(path).stem, Path(path).parent)


def load_zoo_config(path: str | Path) -> list[ModelSpec]:
    """The hand-listed model variants of a zoo config, in file order, duplicates dropped (no sampled blocks)."""
    return list(read_zoo_config(path).specs)


def parse_zoo_config(data: Mapping[str, Any], name: str, config_dir: Path | None = None) -> ZooConfig:
    """Validate an already-parsed config mapping (see the module docstring for the format); `config_dir` is
    where the `[sampler]` ranges path starts (the working directory when None)."""
    unknown = sorted(set(data) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise HaseError(f"unknown key(s) {unknown} in zoo config {name!r}: use only {list(TOP_LEVEL_KEYS)}")
    seed, opset = data.get("seed", 0), data.get("opset", 17)
    if type(seed) is not int or seed < 0:
        raise HaseError(f"seed = {seed!r} in zoo config {name!r} is invalid: use an integer >= 0")
    if type(opset) is not int or opset not in IR_VERSIONS:
        raise HaseError(f"opset = {opset!r} in zoo config {name!r} is not supported: use one of {sorted(IR_VERSIONS)}")
    sampler_table = data.get("sampler")
    if sampler_table is not None and not isinstance(sampler_table, Mapping):
        raise HaseError(f"[sampler] in zoo config {name!r} must be a table")
    groups = data.get("families", {})
    if not isinstance(groups, Mapping) or (not groups and sampler_table is None):
        known = [f.name for f in families()]
        raise HaseError(f"zoo config {name!r} lists no families: add [[families.NAME]] tables, NAME one of {known}")
    specs: dict[str, ModelSpec] = {}
    expanded = 0
    for family_name, grids in groups.items():
        family_specs = _expand_family(family_name, grids, expanded)
        expanded += len(family_specs)
        for spec in family_specs:
            if spec.name in specs:
                log.debug("dropping duplicate variant %s", spec.name)
            specs.setdefault(spec.name, spec)
    check_variant_count(name, len(specs))
    return ZooConfig(name, seed, opset, tuple(specs.values()), sampler_table, config_dir or Path("."))


def check_variant_count(name: str, count: int) -> None:
    """Refuse a zoo config of more than `limits.ZOO_MAX_VARIANTS` variants, sampled blocks included."""
    if count > limits.ZOO_MAX_VARIANTS:
        raise HaseError(f"zoo config {name!r} has {count} variants, over the limit of {limits.ZOO_MAX_VARIANTS}: "
                        f"lower [sampler] kernels or list fewer values")


def _expand_family(family_name: str, grids: Any, expanded: int = 0) -> list[ModelSpec]:
    """All variants of one family: each grid is expanded to the cartesian product of its values.

    `expanded`: variants of the families before this one; the config's total is bounded by ZOO_MAX_VARIANTS,
    checked before a grid is expanded.
    """
    family = get_family(family_name)
    grids = [grids] if isinstance(grids, Mapping) else grids
    if not isinstance(grids, list) or not all(isinstance(grid, Mapping) for grid in grids):
        raise HaseError(f"families.{family_name} must be a table or an array of tables ([[families.{family_name}]])")
    specs: list[ModelSpec] = []
    for i, grid in enumerate(grids, start=1):
        keys = list(grid)
        choices = [v if isinstance(v, list) else [v] for v in grid.values()]
        for key, values in zip(keys, choices, strict=True):
            if not values:
                raise HaseError(f"families.{family_name}.{key} is an empty list: give at least one value")
        size = math.prod(len(v) for v in choices)
        if expanded + len(specs) + size > limits.ZOO_MAX_VARIANTS:
            where = f"families.{family_name}" + (f" (grid {i})" if len(grids) > 1 else "")
            raise HaseError(f"{where} expands to {size} variants, {expanded + len(specs) + size} in the config so far, "
                            f"over the limit of {limits.ZOO_MAX_VARIANTS} per zoo config: list fewer values or split "
                            f"the config")
        for combo in itertools.product(*choices):
            specs.append(family.spec(dict(zip(keys, combo, strict=True))))
    return specs
