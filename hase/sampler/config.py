"""Zoo configs with their sampled blocks: the `[sampler]` table of a zoo config read and expanded.

`hase.zoo` reads the hand-listed families of a config and keeps its `[sampler]` table as it is; this module
checks that table (`hase.sampler.draw.parse_sampler`) and appends the sampled block models it asks for.

    >>> config = read_zoo("configs/zoo_small.toml")      # hand-listed variants, then the sampled blocks
    >>> for entry in ensure_zoo(config, "model_zoo"): ...
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from hase.sampler.draw import SamplerConfig, parse_sampler, sample_specs
from hase.zoo.config import ZooConfig, check_variant_count, read_zoo_config
from hase.zoo.registry import ModelSpec


def zoo_sampler(config: ZooConfig) -> SamplerConfig | None:
    """The checked `[sampler]` settings of a zoo config, or None when it has none."""
    if config.sampler_table is None:
        return None
    return parse_sampler(config.sampler_table, config.config_dir, f"zoo config {config.name!r}")


def resolve(config: ZooConfig) -> ZooConfig:
    """The config with the sampled blocks of its `[sampler]` table after its hand-listed variants."""
    sampler = zoo_sampler(config)
    if sampler is None:
        return config
    specs = {spec.name: spec for spec in config.specs}
    for spec in sample_specs(sampler):
        specs.setdefault(spec.name, spec)
    check_variant_count(config.name, len(specs))
    return dataclasses.replace(config, specs=tuple(specs.values()))


def read_zoo(path: str | Path) -> ZooConfig:
    """Read and validate a zoo config file, sampled blocks included."""
    return resolve(read_zoo_config(path))


def load_zoo(path: str | Path) -> list[ModelSpec]:
    """Every model variant of a zoo config file, sampled blocks included, in order."""
    return list(read_zoo(path).specs)
