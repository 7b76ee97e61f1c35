"""Build zoo models deterministically and keep an on-disk zoo folder in step with its config.

``ensure_zoo`` writes each missing or stale model with ``hase.files.write_atomic`` (a temporary file renamed into
place), so an interrupted run never leaves a half-written ``.onnx``; a rerun builds every model in memory, rewrites
only the files whose bytes differ (missing, or written by an older builder) and rewrites ``index.csv``.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from hase.errors import HaseError
from hase.files import write_atomic
from hase.zoo.config import ZooConfig
from hase.zoo.layers import GraphBuilder
from hase.zoo.registry import ModelSpec, get_family

log = logging.getLogger(__name__)

INDEX_NAME = "index.csv"
INDEX_COLUMNS = ("name", "family", "params", "file", "n_nodes", "n_params", "size_bytes", "opset", "seed")


@dataclass(frozen=True)
class ZooEntry:
    """One model of a zoo on disk; `built` is True when this run wrote it, False when it already existed."""

    spec: ModelSpec
    path: Path
    built: bool = False


def build_model(spec: ModelSpec, seed: int = 0, opset: int = 17) -> onnx.ModelProto:
    """Build the ONNX model of `spec`; the same spec, seed and opset always give byte-identical models."""
    family = get_family(spec.family)
    if family.spec(spec.kwargs()) != spec:
        raise HaseError(
            f"model spec {spec.name!r} does not match family {spec.family!r}: create specs with "
            "load_zoo_config or get_family(...).spec(...)"
        )
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode("utf-8"))])
    g = GraphBuilder(spec.name, rng, opset)
    family.build(g, spec.kwargs())
    meta = {"hase.family": spec.family, "hase.params": _params_json(spec), "hase.seed": str(seed)}
    return g.to_model(doc=family.description, metadata=meta)


def zoo_dir(config_path: str | Path, out_dir: str | Path) -> Path:
    """Folder that holds the models of a config: `out_dir / <config file stem>`."""
    return Path(out_dir) / Path(config_path).stem


def ensure_zoo(config: ZooConfig, out_dir: str | Path, specs: Iterable[ModelSpec] | None = None
               ) -> Iterator[ZooEntry]:
    """Yield every model of a parsed zoo config (`hase.sampler.config.read_zoo` adds its sampled blocks), writing
    only missing or stale files into `out_dir / config.name`; index.csv is written last.

    Models are built one at a time as the iterator is consumed, so memory holds at most one model. `specs`: the
    config's models in another order, taken one at a time as they are built (`hase.sampler.active` chooses each
    next one from what was measured). The index is only rewritten when the iteration runs to the end.
    """
    folder = Path(out_dir) / config.name
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec in config.specs if specs is None else specs:
        path = folder / f"{spec.name}.onnx"
        row, built = _build_file(spec, path, config)
        rows.append(row)
        yield ZooEntry(spec, path, built)
    _write_index(folder / INDEX_NAME, rows)


def _build_file(spec: ModelSpec, path: Path, config: ZooConfig) -> tuple[dict[str, Any], bool]:
    """Build one model in memory and write it atomically unless the file already holds exactly these bytes; its
    index row and whether it was written (the model is freed on return).

    A file is compared with what the builder writes now, not trusted by its name: after a builder changes, the
    old file would otherwise be measured again and again under a name that promises the new model."""
    model = build_model(spec, config.seed, config.opset)
    data = model.SerializeToString()
    row = _index_row(spec, path, model, len(data), config.opset, config.seed)
    if path.exists():
        if _same_bytes(path, data):
            return row, False
        log.info("rebuilding %s: its builder now writes a different model", path)
    else:
        log.debug("building %s", spec.name)
    write_atomic(path, data)
    return row, True


def _same_bytes(path: Path, data: bytes) -> bool:
    """Whether the file holds exactly `data` (the size is checked before the file is read)."""
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _index_row(spec: ModelSpec, path: Path, model: onnx.ModelProto, size: int, opset: int,
               seed: int) -> dict[str, Any]:
    """The index.csv row of one model file (INDEX_COLUMNS)."""
    n_params = sum(int(np.prod(t.dims, dtype=np.int64)) for t in model.graph.initializer)
    return {"name": spec.name, "family": spec.family, "params": _params_json(spec), "file": path.name,
            "n_nodes": len(model.graph.node), "n_params": n_params, "size_bytes": size, "opset": opset,
            "seed": seed}


def _params_json(spec: ModelSpec) -> str:
    """The spec's parameters as compact JSON (stored in the model's metadata and the index)."""
    return json.dumps(spec.kwargs(), separators=(",", ":"))


def _write_index(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write index.csv atomically, one row per model in config order."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=INDEX_COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buf.getvalue())
