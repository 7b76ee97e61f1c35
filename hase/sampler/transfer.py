"""The transfer set of `hase adapt` and `hase host survey`: the zoo of the packaged config (its models and sampled
one-kernel blocks), built where missing, in the order a tight time budget should measure it.

It ships with Hase (`paths.PACKAGED_ZOO_CONFIG`), so adapting works from an installed wheel in any folder: in a
checkout (where `configs/zoo_small.toml` is) the models go to `model_zoo/` as `make zoo` builds them, elsewhere to
the user cache directory. Building the whole set takes about 20 s on 2 cores (2.1 GB of models, most of them small). The
exported real models are never in it: they are what an adapted predictor is judged on.
"""
from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

from hase import paths
from hase.measure.collect import dir_sources
from hase.measure.types import ModelSource
from hase.sampler.config import read_zoo
from hase.zoo import INDEX_NAME, ensure_zoo
from hase.zoo.order import round_robin


def transfer_root() -> Path:
    """Where the transfer zoo is built: the checkout's `model_zoo/` when run in one, else the user cache."""
    return Path(paths.ZOO_DIR) if Path(paths.ZOO_CONFIG).is_file() else paths.user_cache_dir() / "zoo"


def transfer_set(root: str | Path | None = None) -> list[ModelSource]:
    """The packaged zoo's models in measuring order (`zoo_order`), built into `root` (default `transfer_root()`)
    where missing or stale; building an up-to-date zoo only compares bytes."""
    config = read_zoo(paths.PACKAGED_ZOO_CONFIG)
    root = Path(root) if root is not None else transfer_root()
    for _ in ensure_zoo(config, root):
        pass
    return zoo_order(root / config.name)


def transfer_sources(dirs: Sequence[str] | None, say: Callable[[str], None] | None = None) -> list[ModelSource]:
    """`--models DIR ...` of `hase adapt` and `hase host survey`: every .onnx of each folder (a family per folder),
    else the packaged transfer set (`transfer_set`, built where missing; `say` is told where)."""
    if dirs:
        return [s for d in dirs for s in dir_sources(d, Path(d).name)]
    if say is not None:
        say(f"building the transfer set where missing ({transfer_root()})")
    return transfer_set()


def zoo_order(zoo: Path) -> list[ModelSource]:
    """A built zoo's models, one family after another in turn (round robin), each family's smallest first."""
    sized: list[tuple[int, ModelSource]] = []
    with (zoo / INDEX_NAME).open(newline="") as f:
        for row in csv.DictReader(f):
            sized.append((int(row.get("size_bytes") or 0), ModelSource(row["name"], row["family"], zoo / row["file"])))
    sized.sort(key=lambda t: (t[1].family, t[0]))  # families by name, then by size (stable: file order on ties)
    return round_robin([src for _, src in sized])
