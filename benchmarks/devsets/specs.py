"""The later development sets' models as data: one table a set (specs/devNN.csv), read into `Spec` records.

Each row is one model: a timm model name (random weights, `pretrained=False`) or a transformers model class built from
its config class (random weights, nothing downloaded), an input signature with static shapes, its family and kind, the
part it goes to (`check` or `heldout`; only the second set has a check part) and whether the dynamo exporter may take
over a model the TorchScript exporter fails on (only the second set). Stdlib only: a table is read and checked without
torch (`python benchmarks/devsets/specs.py` checks them all).

Columns (a blank cell is the default):
  name             the model's name, unique in its set (its ONNX file is `<part>/<name>.onnx`)
  part             `check` or `heldout` (a family never straddles the two)
  family, kind     the architecture family, and its kind (cnn, hybrid, vit, mlp, text, decoder, speech, seg, det, ...)
  lib              `timm` or `hf` (transformers)
  model            a timm model name, or a transformers model class
  config           a transformers config class (hf only)
  inputs           `name:kind[shape]` joined by `;`: kind `f32` (normal noise), `mask` (int64 ones) or `ids<hi>`
                   (int64 token ids in [0, hi)), shape like `2x128`
  config_kwargs    a Python literal dict: the timm constructor's or the transformers config's arguments ({})
  call_kwargs      a Python literal dict of extra forward arguments ({}); `tensor([[224, 224]])` is a constant int64
                   tensor, made when the model is built
  attr             the output attribute taken from a transformers model (`last_hidden_state`; else its first output)
  sub              a method of the transformers model that returns the part to export (`get_encoder`, `get_decoder`)
  reparam          `true`: fuse train-time branches (timm `reparameterize_model`), as deployed models are
  dynamo_fallback  `true`: a model the TorchScript exporter (opset 17) fails on is tried with the dynamo one (opset 18)
  about            what the model is, and its nearest earlier model (not read by the exporter)
  note             why its configuration or inputs are as they are (not read by the exporter)
"""
from __future__ import annotations

import ast
import csv
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TABLES = Path(__file__).resolve().parent / "specs"
PARTS = ("check", "heldout")
COLUMNS = ["name", "part", "family", "kind", "lib", "model", "config", "inputs", "config_kwargs", "call_kwargs", "attr",
           "sub", "reparam", "dynamo_fallback", "about", "note"]
DEFAULT_ATTR = "last_hidden_state"
INPUT_KINDS = ("f32", "ids", "mask")

Input = tuple[str, tuple[int, ...], str, "int | None"]  # name, shape, kind, upper bound of the ids (ids only)


@dataclass(frozen=True)
class TensorLiteral:
    """A constant int64 tensor in a spec's `call_kwargs` (`tensor([[224, 224]])` in a table): made when the model is
    built, so reading a table needs no torch."""

    data: Any

    def __repr__(self) -> str:
        return f"tensor({self.data!r})"


@dataclass(frozen=True)
class Spec:
    name: str
    family: str
    kind: str
    lib: str  # "timm" or "hf"
    model: str  # timm model name, or transformers model class
    inputs: tuple[Input, ...]
    config: str = ""  # transformers config class
    config_kwargs: dict[str, Any] = field(default_factory=dict)
    attr: str = DEFAULT_ATTR  # the output attribute of a transformers model (else its first output)
    sub: str = ""  # a method of the transformers model that returns the part to export (e.g. get_encoder)
    call_kwargs: dict[str, Any] = field(default_factory=dict)
    reparam: bool = False  # fuse train-time branches (timm reparameterize_model) as deployed models are
    note: str = ""
    part: str = "heldout"
    dynamo_fallback: bool = False
    about: str = ""

    @property
    def source(self) -> str:
        if self.lib == "timm":
            kw = ",".join(f"{k}={v}" for k, v in self.config_kwargs.items())
            return f"timm {self.model}" + (f"({kw})" if kw else "") + (" (reparameterized)" if self.reparam else "")
        kw = ",".join(f"{k}={v}" for k, v in self.config_kwargs.items())
        return f"transformers {self.model}({self.config}({kw})){'.' + self.sub + '()' if self.sub else ''}"

    @property
    def batch(self) -> int:
        return self.inputs[0][1][0]

    @property
    def seq(self) -> str:
        """The sequence length of a token input, the audio/frames length of a speech input, else the resolution."""
        shape = self.inputs[0][1]
        return "x".join(map(str, shape[1:] if self.inputs[0][2] != "f32" or len(shape) != 4 else shape[2:]))


# ------------------------------------------------------------------ cells


_INPUT = re.compile(r"(\w+):(f32|mask|ids<(\d+)>)\[(\d+(?:x\d+)*)\]")


def parse_inputs(cell: str) -> tuple[Input, ...]:
    """`input_ids:ids<30522>[2x128];attention_mask:mask[2x128]` -> ((name, shape, kind, hi), ...)."""
    out: list[Input] = []
    for part in cell.split(";"):
        m = _INPUT.fullmatch(part.strip())
        if not m:
            raise ValueError(f"input {part!r} is not name:kind[AxB...] with kind f32, mask or ids<hi>")
        name, kind, hi, shape = m.groups()
        out.append((name, tuple(int(d) for d in shape.split("x")), kind.split("<")[0], int(hi) if hi else None))
    return tuple(out)


def format_inputs(inputs: tuple[Input, ...]) -> str:
    cells = []
    for name, shape, kind, hi in inputs:
        if kind not in INPUT_KINDS or (kind == "ids") != (hi is not None):
            raise ValueError(f"input {name}: kind {kind!r} with bound {hi!r}")
        cells.append(f"{name}:{kind}{f'<{hi}>' if kind == 'ids' else ''}[{'x'.join(map(str, shape))}]")
    return ";".join(cells)


def _literal(node: ast.AST) -> Any:
    """ast.literal_eval, plus `tensor(<literal>)` for a constant tensor."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "tensor" and len(node.args) == 1 and not node.keywords:
            return TensorLiteral(ast.literal_eval(node.args[0]))
        raise ValueError(f"only tensor(<literal>) may be called, not {ast.unparse(node)}")
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("no ** in a kwargs dict")
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    return ast.literal_eval(node)


def parse_kwargs(cell: str) -> dict[str, Any]:
    """A Python literal dict (`{'num_hidden_layers': 6, 'out_indices': (2, 5)}`); blank is {}."""
    if not cell.strip():
        return {}
    value = _literal(ast.parse(cell.strip(), mode="eval").body)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{cell[:60]!r}... is not a dict with string keys")
    return value


def _bool(cell: str, column: str) -> bool:
    if cell not in ("true", "false"):
        raise ValueError(f"{column} is {cell!r}, not true or false")
    return cell == "true"


# ------------------------------------------------------------------ rows and tables


def spec_from_row(row: dict[str, str]) -> Spec:
    for col in ("name", "part", "family", "kind", "lib", "model", "inputs"):
        if not row[col].strip():
            raise ValueError(f"{col} is empty")
    if row["part"] not in PARTS:
        raise ValueError(f"part {row['part']!r} is not one of {PARTS}")
    if row["lib"] not in ("timm", "hf"):
        raise ValueError(f"lib {row['lib']!r} is not timm or hf")
    if (row["lib"] == "hf") != bool(row["config"]):
        raise ValueError("a transformers (hf) model needs a config class, a timm model none")
    return Spec(name=row["name"], family=row["family"], kind=row["kind"], lib=row["lib"], model=row["model"],
                inputs=parse_inputs(row["inputs"]), config=row["config"],
                config_kwargs=parse_kwargs(row["config_kwargs"]), attr=row["attr"] or DEFAULT_ATTR, sub=row["sub"],
                call_kwargs=parse_kwargs(row["call_kwargs"]), reparam=_bool(row["reparam"], "reparam"),
                note=row["note"], part=row["part"], dynamo_fallback=_bool(row["dynamo_fallback"], "dynamo_fallback"),
                about=row["about"])


def row_of(s: Spec) -> dict[str, str]:
    """The table row of a spec (what spec_from_row reads back)."""
    for kw in (s.config_kwargs, s.call_kwargs):
        if repr(parse_kwargs(repr(kw))) != repr(kw):
            raise ValueError(f"{s.name}: {kw!r} does not read back as the same literal")
    if s.attr == "":
        raise ValueError(f"{s.name}: an empty attr cannot be written (blank is {DEFAULT_ATTR})")
    return dict(name=s.name, part=s.part, family=s.family, kind=s.kind, lib=s.lib, model=s.model, config=s.config,
                inputs=format_inputs(s.inputs), config_kwargs=repr(s.config_kwargs) if s.config_kwargs else "",
                call_kwargs=repr(s.call_kwargs) if s.call_kwargs else "",
                attr="" if s.attr == DEFAULT_ATTR else s.attr, sub=s.sub, reparam=str(s.reparam).lower(),
                dynamo_fallback=str(s.dynamo_fallback).lower(), about=s.about, note=s.note)


def read_table(path: str | Path) -> list[Spec]:
    """The specs of one table, in its order; raises ValueError naming the file and line of a bad row."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            raise ValueError(f"{path}: columns {reader.fieldnames} are not {COLUMNS}")
        specs = []
        for row in reader:
            try:
                specs.append(spec_from_row(row))
            except (ValueError, SyntaxError) as e:
                raise ValueError(f"{path}:{reader.line_num}: {row.get('name')}: {e}") from e
    names = [s.name for s in specs]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError(f"{path}: duplicate names {dups}")
    split = {}
    for s in specs:
        if split.setdefault(s.family, s.part) != s.part:
            raise ValueError(f"{path}: family {s.family} straddles the parts")
    return specs


def write_table(path: str | Path, specs: list[Spec]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        for s in specs:
            w.writerow(row_of(s))


def table_of(dev_set: int | str) -> Path:
    """specs/devNN.csv of set N (2 -> specs/dev02.csv); raises ValueError listing the sets there are."""
    try:
        n = int(dev_set)
    except ValueError:
        n = -1
    path = TABLES / f"dev{n:02d}.csv"
    if not path.is_file():
        known = ", ".join(str(int(p.stem[3:])) for p in sorted(TABLES.glob("dev*.csv")))
        raise ValueError(f"no dev set {dev_set!r}: {path} is missing (sets: {known})")
    return path


def repeats(tables: dict[str, list[Spec]]) -> list[str]:
    """The models that repeat an earlier one of these tables (given in set order): the same library model, sub-model,
    config but for its vocabulary (only the embedding `Gather` differs) and input shapes. Configs are compared as
    written (a default spelt out is not matched) and the first set has no table: a new set gets a fuller check too."""
    seen: dict[tuple[object, ...], str] = {}
    out = []
    for table, specs in tables.items():
        for s in specs:
            kw = {k: v for k, v in s.config_kwargs.items() if k not in ("vocab_size", "use_cache")}
            key = (s.lib, s.model, s.config, s.sub, repr(sorted(kw.items())), tuple(sh for _, sh, _, _ in s.inputs))
            if key in seen:
                out.append(f"{table} {s.name} repeats {seen[key]}")
            seen.setdefault(key, f"{table} {s.name}")
    return out


if __name__ == "__main__":  # check every table: python benchmarks/devsets/specs.py
    tables = {}
    for table in sorted(TABLES.glob("dev*.csv")):
        specs = tables[table.stem] = read_table(table)
        parts = {p: sum(s.part == p for s in specs) for p in PARTS}
        print(f"{table.name}: {len(specs)} specs, {len({s.family for s in specs})} families, {parts}")
    again = repeats(tables)
    print("\n".join(again) or "no model repeats an earlier one (model, config but vocabulary, input shapes)")
    sys.exit(1 if again else 0)
