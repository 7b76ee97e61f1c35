"""Build zoo models deterministically and keep an on-disk zoo folder in step with its config.

``ensure_zoo`` writes each missing model with ``hase.files.write_atomic`` (a temporary file renamed into place),
so an interrupted run never leaves a half-written ``.onnx``; a rerun builds only what is missing and rewrites
``index.csv``.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from hase.errors import HaseError
from hase.files import write_atomic
from hase.zoo.config import ZooConfig, read_zoo_config
from hase.zoo.layers import GraphBuilder
from hase.zoo.registry import ModelSpec, get_family

log = logging.getLogger(__name__)

INDEX_NAME = "index.csv"
INDEX_COLUMNS = ("name", "family", "params", "file", "n_nodes", "n_params", "size_bytes", "opset", "seed")
_INT_COLUMNS = ("n_nodes", "n_params", "size_bytes", "opset", "seed")


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


def ensure_zoo(config_path: str | Path, out_dir: str | Path) -> Iterator[ZooEntry]:
    """Yield every model of the config, building and writing only missing files; index.csv is written last.

    Models are built one at a time as the iterator is consumed, so memory holds at most one model.
    The index is only rewritten when the iteration runs to the end.
    """
    config = read_zoo_config(config_path)
    folder = Path(out_dir) / config.name
    folder.mkdir(parents=True, exist_ok=True)
    previous = _read_index(folder / INDEX_NAME)
    rows = []
    for spec in config.specs:
        path = folder / f"{spec.name}.onnx"
        built = not path.exists()
        row = _build_file(spec, path, config) if built else _existing_row(spec, path, previous, config)
        rows.append(row)
        yield ZooEntry(spec, path, built)
    _write_index(folder / INDEX_NAME, rows)


def _build_file(spec: ModelSpec, path: Path, config: ZooConfig) -> dict[str, Any]:
    """Build one model, write it atomically and return its index row (the model is freed on return)."""
    log.debug("building %s", spec.name)
    model = build_model(spec, config.seed, config.opset)
    data = model.SerializeToString()
    write_atomic(path, data)
    return _index_row(spec, path, model, len(data), config.opset, config.seed)


def _existing_row(spec: ModelSpec, path: Path, previous: dict[str, dict[str, Any]],
                  config: ZooConfig) -> dict[str, Any]:
    """Index row of a model already on disk: reused from the old index when the file size matches."""
    size = path.stat().st_size
    row = previous.get(spec.name)
    if row is None or row.get("size_bytes") != size or row.get("file") != path.name:
        model = _load_existing(path)
        row = _index_row(spec, path, model, size, _opset_of(model), config.seed)
    if (row["opset"], row["seed"]) != (config.opset, config.seed):
        log.warning("%s was built with opset %s / seed %s, the config says %s / %s: delete it to rebuild",
                    path, row["opset"], row["seed"], config.opset, config.seed)
    return row


def _load_existing(path: Path) -> onnx.ModelProto:
    """An ONNX file already in the zoo folder; an unreadable one is a HaseError saying to delete it."""
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises its own DecodeError types
        raise HaseError(f"{path} is not a readable ONNX model ({exc}): delete it and rerun to rebuild it") from exc


def _index_row(spec: ModelSpec, path: Path, model: onnx.ModelProto, size: int, opset: int,
               seed: int) -> dict[str, Any]:
    """The index.csv row of one model file (INDEX_COLUMNS)."""
    n_params = sum(int(np.prod(t.dims, dtype=np.int64)) for t in model.graph.initializer)
    return {"name": spec.name, "family": spec.family, "params": _params_json(spec), "file": path.name,
            "n_nodes": len(model.graph.node), "n_params": n_params, "size_bytes": size, "opset": opset,
            "seed": seed}


def _opset_of(model: onnx.ModelProto) -> int:
    """The model's default-domain opset, -1 when it imports none."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), -1)


def _params_json(spec: ModelSpec) -> str:
    """The spec's parameters as compact JSON (stored in the model's metadata and the index)."""
    return json.dumps(spec.kwargs(), separators=(",", ":"))


def _read_index(path: Path) -> dict[str, dict[str, Any]]:
    """Rows of an existing index.csv by model name; an unreadable index is ignored (it is rebuilt)."""
    if not path.exists():
        return {}
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            for col in _INT_COLUMNS:
                row[col] = int(row[col])
    except (OSError, csv.Error, KeyError, TypeError, ValueError) as exc:
        log.warning("ignoring unreadable %s (%s); it will be rewritten", path, exc)
        return {}
    return {row["name"]: row for row in rows}


def _write_index(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write index.csv atomically, one row per model in config order."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=INDEX_COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buf.getvalue())
