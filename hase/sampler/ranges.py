"""Kernel ranges from real graphs: the sizes real models give each op family, as ONNX Runtime runs them.

A real model is split at a device configuration's level (`hase.kernels`: ORT's optimized graph, one kernel
per node) and each unique kernel of it adds one count to the value of every dimension that matters for its
op family (`DIMS`). The result is a long table, one row per (family, dim, value) with its count — the
empirical distribution the kernel sampler (`hase.sampler.draw`) draws from:

    family | dim  | value | count          e.g.  conv | c_in | 64 | 31

It is saved as CSV (`configs/kernel_ranges.csv`) with `#` lines of provenance above it: which models, the
ONNX Runtime version, the optimization level and the date.
"""
from __future__ import annotations

import csv
import io
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hase.errors import HaseError
from hase.kernels import graph, split
from hase.kernels.types import KernelSpec
from hase.runtime.types import EPConfig

log = logging.getLogger(__name__)

FAMILY, DIM, VALUE, COUNT = "family", "dim", "value", "count"
COLUMNS = (FAMILY, DIM, VALUE, COUNT)

#: the dimensions recorded per op family (the sampler reads the same names)
DIMS: dict[str, tuple[str, ...]] = {
    "conv": ("batch", "c_in", "c_out", "spatial", "kernel", "stride", "dilation", "groups", "group_width"),
    "matmul": ("rows", "k", "n"),  # constant B (weights): [rows, K] x [K, N]
    "batched_matmul": ("batch", "m", "k", "n"),  # non-constant B (attention): [batch, M, K] x [batch, K, N]
    "softmax": ("rows", "width"),
    "norm": ("rows", "hidden", "skip"),
    "gelu": ("rows", "width"),
    "pool": ("batch", "channels", "spatial", "kernel", "stride", "kind"),
    "eltwise": ("rows", "width", "op"),
    "movement": ("rows", "width", "op"),
}
CONV_OPS = frozenset({"Conv", "FusedConv"})
MATMUL_OPS = frozenset({"MatMul", "FusedMatMul", "Gemm", "FusedGemm"})
NORM_OPS = frozenset({"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
                      "SkipSimplifiedLayerNormalization"})
GELU_OPS = frozenset({"Gelu", "BiasGelu", "FastGelu", "QuickGelu"})
POOL_OPS = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
ELTWISE_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Clip", "HardSwish", "HardSigmoid",
                         "Erf", "Pow", "Sqrt", "Where", "Neg", "Exp", "Abs"})
MOVEMENT_OPS = frozenset({"Transpose", "Concat", "Split", "Slice", "Reshape", "Gather", "Expand",
                          "ReorderInput", "ReorderOutput"})


@dataclass
class KernelRanges:
    """Per (family, dim), how many real kernels had each value; `provenance` says where they came from."""

    counts: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)

    def add(self, family: str, values: Mapping[str, int | str]) -> None:
        """Count one kernel's dimensions under its family."""
        for dim, value in values.items():
            self.counts.setdefault((family, dim), Counter())[str(value)] += 1

    def values(self, family: str, dim: str) -> tuple[list[str], list[int]]:
        """The observed values of a dimension (as text) and their counts; a dim never seen is a HaseError."""
        seen = self.counts.get((family, dim))
        if not seen:
            raise HaseError(f"the kernel ranges hold no {family}.{dim} values: rebuild them with "
                            f"`hase zoo --ranges MODELS_DIR` (from real models that have {family} kernels)")
        items = sorted(seen.items(), key=lambda kv: _sort_key(kv[0]))
        return [v for v, _ in items], [c for _, c in items]

    def numeric(self, family: str, dim: str) -> tuple[list[int], list[int]]:
        """`values` of a numeric dimension, as integers."""
        values, counts = self.values(family, dim)
        try:
            return [int(v) for v in values], counts
        except ValueError:
            raise HaseError(f"kernel ranges: {family}.{dim} is not numeric ({values[:3]}): rebuild the table") from None

    def families(self) -> list[str]:
        """Families with at least one counted kernel."""
        return sorted({f for f, _ in self.counts})


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def _prod(dims: Sequence[int]) -> int:
    return int(math.prod(dims)) if dims else 1


def _attr(spec: KernelSpec, name: str, default: object) -> object:
    return dict(spec.attrs).get(name, default)


def _conv_dims(spec: KernelSpec) -> dict[str, int | str] | None:
    x, w, y = spec.inputs[0], spec.inputs[1], spec.outputs[0]
    if len(x.shape) != 4 or len(w.shape) != 4:
        return None  # 1-D and 3-D convolutions are not sampled
    groups = int(_attr(spec, "group", 1))  # type: ignore[call-overload]
    strides = _attr(spec, "strides", [1, 1]) or [1, 1]
    dilations = _attr(spec, "dilations", [1, 1]) or [1, 1]
    c_in, c_out = x.shape[1], y.shape[1]
    return {"batch": x.shape[0], "c_in": c_in, "c_out": c_out, "spatial": x.shape[2], "kernel": w.shape[2],
            "stride": int(strides[0]), "dilation": int(dilations[0]),  # type: ignore[index]
            "groups": "dense" if groups == 1 else "depthwise" if groups == c_in else "grouped",
            "group_width": c_in // groups}


def _matmul_dims(spec: KernelSpec) -> tuple[str, dict[str, int | str]] | None:
    a, b, y = spec.inputs[0], spec.inputs[1], spec.outputs[0]
    if len(a.shape) < 2 or len(b.shape) < 2 or len(y.shape) < 2:
        return None
    trans_a = bool(_attr(spec, "transA", 0))
    k = a.shape[-2] if trans_a else a.shape[-1]
    if b.const and len(b.shape) == 2:
        return "matmul", {"rows": _prod(y.shape[:-1]), "k": k, "n": y.shape[-1]}
    return "batched_matmul", {"batch": _prod(y.shape[:-2]), "m": y.shape[-2], "k": k, "n": y.shape[-1]}


def _rows_width(spec: KernelSpec) -> dict[str, int]:
    shape = spec.outputs[0].shape or (1,)
    return {"rows": _prod(shape[:-1]), "width": shape[-1]}


def _pool_dims(spec: KernelSpec) -> dict[str, int | str] | None:
    x = spec.inputs[0]
    if len(x.shape) != 4:
        return None
    is_global = spec.op_type.startswith("Global")
    k = x.shape[2] if is_global else int(_attr(spec, "kernel_shape", [1])[0])  # type: ignore[index]
    stride = 1 if is_global else int((_attr(spec, "strides", [1]) or [1])[0])  # type: ignore[index]
    kind = "global" if is_global else "max" if spec.op_type == "MaxPool" else "avg"
    if kind == "avg" and k >= x.shape[2]:
        kind = "window"  # global pooling written as an AveragePool over the whole plane (HF's EfficientNet pooler)
    return {"batch": x.shape[0], "channels": x.shape[1], "spatial": x.shape[2], "kernel": k, "stride": stride,
            "kind": kind}


def kernel_dims(spec: KernelSpec) -> tuple[str, dict[str, int | str]] | None:
    """The op family of a kernel and its recorded dimensions; None for kernels no family describes."""
    op = spec.op_type
    if not spec.outputs or not spec.inputs:
        return None
    rules: list[tuple[frozenset[str], Callable[[KernelSpec], tuple[str, dict[str, int | str]] | None]]] = [
        (CONV_OPS, lambda s: _tagged("conv", _conv_dims(s))),
        (MATMUL_OPS, _matmul_dims),
        (frozenset({"Softmax"}), lambda s: ("softmax", dict(_rows_width(s)))),
        (NORM_OPS, lambda s: ("norm", {"rows": _rows_width(s)["rows"], "hidden": _rows_width(s)["width"],
                                       "skip": int(s.op_type.startswith("Skip"))})),
        (GELU_OPS, lambda s: ("gelu", dict(_rows_width(s)))),
        (POOL_OPS, lambda s: _tagged("pool", _pool_dims(s))),
        (ELTWISE_OPS, lambda s: ("eltwise", {**_rows_width(s), "op": s.op_type})),
        (MOVEMENT_OPS, lambda s: ("movement", {**_rows_width(s), "op": s.op_type})),
    ]
    for ops, rule in rules:
        if op in ops:
            return rule(spec)
    return None


def _tagged(family: str, dims: dict[str, int | str] | None) -> tuple[str, dict[str, int | str]] | None:
    return None if dims is None else (family, dims)


def count_kernels(ranges: KernelRanges, specs: Iterable[KernelSpec]) -> int:
    """Count each kernel of one model once (by kernel_id) into `ranges`; returns how many were counted."""
    counted = 0
    for spec in {s.kernel_id: s for s in specs}.values():
        found = kernel_dims(spec)
        if found is not None:
            ranges.add(*found)
            counted += 1
    return counted


def extract_ranges(model_paths: Sequence[Path], opt_level: str = "all", sources: str = "",
                   progress: Callable[[str], None] | None = None) -> KernelRanges:
    """Split each model at `opt_level` (shapes only, weights never read) and count its kernels' dimensions.

    A model that cannot be split is logged and left out (its name is not in the provenance). `sources` says
    where the models came from, in the provenance.
    """
    import onnxruntime as ort


    ep = EPConfig("ranges", opt_level=opt_level)
    ranges, used = KernelRanges(), []
    for path in model_paths:
        if progress:
            progress(path.name)
        try:
            kg = graph.file_kernel_graph(path, ep, with_weights=False)
        except HaseError as exc:
            log.warning("left out of the kernel ranges: %s (%s)", path, exc)
            continue
        count_kernels(ranges, (n.spec for n in split.split(kg)))
        used.append(path.name)
    if not used:
        raise HaseError("no model could be split for the kernel ranges: pass folders with real .onnx models")
    ranges.provenance = {"sources": sources, "models": " ".join(used), "n_models": str(len(used)),
                         "onnxruntime": ort.__version__, "opt_level": opt_level,
                         "date": time.strftime("%Y-%m-%d", time.gmtime()),
                         "counted": "each unique kernel of a model once, split at opt_level (hase zoo --ranges)"}
    return ranges


def ranges_csv(ranges: KernelRanges) -> str:
    """The table as CSV text: `# key: value` provenance lines, then family,dim,value,count rows."""
    buf = io.StringIO()
    for key, value in ranges.provenance.items():
        buf.write(f"# {key}: {value}\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for family, dim in sorted(ranges.counts):
        values, counts = ranges.values(family, dim)
        writer.writerows((family, dim, v, c) for v, c in zip(values, counts, strict=True))
    return buf.getvalue()


def read_ranges(path: str | Path) -> KernelRanges:
    """Read a table written by `ranges_csv`; a missing or malformed file is a HaseError naming the fix."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HaseError(f"cannot read the kernel ranges {p} ({exc}): point [sampler] ranges at "
                        f"configs/kernel_ranges.csv") from None
    ranges = KernelRanges()
    for line in lines:
        if line.startswith("#") and ":" in line:
            key, _, value = line[1:].partition(":")
            ranges.provenance[key.strip()] = value.strip()
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    try:
        for row in rows:
            ranges.counts.setdefault((row[FAMILY], row[DIM]), Counter())[row[VALUE]] += int(row[COUNT])
    except (KeyError, TypeError, ValueError):
        raise HaseError(f"{p} is not a kernel ranges table (columns {list(COLUMNS)}): rebuild it with "
                        f"`hase zoo --ranges`") from None
    if not ranges.counts:
        raise HaseError(f"{p} holds no kernel ranges: rebuild it with `hase zoo --ranges`")
    return ranges
