"""A kernel's time at T intra-op threads from its time at one: the thread count as an explicit input.

    t(T) = t1 * (s + (1 - s) / T) + sigma * log2(T)

`s` is the kernel's serial share: the part ONNX Runtime does not split across its thread pool (work below the cost
model's grain, ops without a parallel loop: Transpose and BatchNormalization gained nothing from 2 to 16 threads on
a 16-core Xeon, small element-wise ops little). A random forest predicts it from the kernel's shape (generic
features: element counts, weight bytes, the output's last four dims, conv groups), its op type and its one-thread
time, since how MLAS splits a kernel follows its shape: a dense 3x3 conv (128 channels, 28x28) of 10 ms ran 11x
faster at 16 threads where other convs of the same one-thread time ran 2x (`benchmarks/thread_scaling.py`). Per op
type and bin of one-thread time alone, the same data left one model 2.7x off (its kernel sum at 16 threads; the
Xeon's truth was noisy, 13 % between passes); with the shapes the worst was +77 %, RMSPE 33.8 % -> 21.9 %. `sigma`
is the per-kernel cost of handing a kernel to the pool and joining it (fork/join), per op type, read off kernels too
small to split (their whole change is that cost); it grows with log2(T), as a tree of wake-ups does (2.0, 2.5, 5.0,
7.0 µs a small kernel at 2, 4, 8, 16 threads on that Xeon). Fitted from in-model spans of the same kernels at 1 and
at T > 1 threads (the host's default: ORT's one thread per physical core), one or several T; tested against the
thread counts it did not see (`benchmarks/thread_model.py`). At T = 1 it returns t1 unchanged.

In-model spans at T > 1 carry more of the profiler than spans at one thread: on `bd14ee861c62` (2026-12-08) six real
models' spans summed 0.4-2.7 µs a node over their unprofiled latency at one thread and 0.6-4.7 µs at two, so their
speed-up in spans (x1.01-1.26 for the four under 2 ms) fell far short of the one they ran (x1.37-1.69), and sigma,
read off such spans, took the difference in. `node_excess` measures it on whole models timed unprofiled beside their
profiles (`hase host threads` does both), and `predict` takes it off every kernel, per log2(T) like sigma:

    t(T) = max(t1 * (s + (1 - s) / T) + (sigma - excess) * log2(T), t1 / (2 T))

(the floor: no kernel below half its perfectly split time). A thread model fitted without latencies has excess 0.

Input (`fit_thread_model`): one row per kernel and thread count T > 1 with the kernel's signature, its one-thread
time and its time at T (`paired_spans` pairs a long table of in-model spans).
"""
from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from hase.errors import HaseError
from hase.files import write_atomic
from hase.kernels.types import KernelSpec
from hase.predict.features.common import attr, out0
from hase.predict.features.generic import generic_features
from hase.predict.forest import PackedForest, pack_forest

FORM = "t1*(s+(1-s)/T)+sigma*log2(T)"

#: Kernels quicker than this at one thread are taken as unsplit: their change with T is the fork/join cost.
SMALL_MS = 0.01
MIN_ROWS = 5  # the fewest small kernels behind an op type's own sigma; fewer fall back to all ops pooled
ALL = "*"  # the pooled sigma, used for op types the fit never saw
PAIR_COLUMNS = ("op_type", "t1_ms", "threads", "t_ms")
#: `node_excess`'s input: one row per model, thread count and pass, its unprofiled latency beside its spans' sum.
LATENCY_COLUMNS = ("model", "threads", "pass", "latency_ms", "span_sum_ms", "n_nodes")
FLOOR = 0.5  # of a kernel's perfectly split time t1 / T: the least `predict` gives once the excess is taken off
FEATURES = ("log_in_elems", "log_out_elems", "log_const_bytes", "log_out_d0", "log_out_d1", "log_out_d2",
            "log_out_d3", "log_group", "log_t1_ms", "op_code")
FOREST = {"n_estimators": 60, "min_samples_leaf": 8, "max_features": 0.5, "max_depth": 14, "random_state": 0}


@dataclass(frozen=True)
class ThreadModel:
    """Fork/join cost per log2(T) by op type (ms) and the serial-share forest, fitted on `threads`."""

    sigma_ms: Mapping[str, float]
    op_codes: tuple[str, ...]
    forest: PackedForest
    threads: tuple[int, ...]
    host: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)
    excess_ms: float = 0.0  # the profiler's extra per-node cost in spans at T over one thread, ms per log2(T)

    def serial_share(self, specs: Sequence[KernelSpec], t1_ms: ArrayLike) -> NDArray[np.float64]:
        """Each kernel's serial share in [0, 1]: the forest's mean over its trees."""
        X = thread_features(specs, t1_ms, self.op_codes)
        share: NDArray[np.float64] = np.clip(self.forest.predict_trees(X).mean(axis=0), 0.0, 1.0)
        return share

    def sigma_of(self, op_types: Sequence[str]) -> NDArray[np.float64]:
        """Each kernel's fork/join cost per log2(T), ms (the pooled one for op types never fitted)."""
        pooled = self.sigma_ms[ALL]
        return np.array([self.sigma_ms.get(o, pooled) for o in op_types], dtype=np.float64)

    def predict(self, specs: Sequence[KernelSpec], t1_ms: ArrayLike, threads: int) -> NDArray[np.float64]:
        """Each kernel's time at `threads` intra-op threads (ms) from its one-thread time."""
        if threads < 1:
            raise HaseError(f"threads must be at least 1, got {threads}: give the intra-op thread count the model "
                            "will run with (ORT's default is one per physical core)")
        t1 = np.asarray(t1_ms, dtype=np.float64)
        if threads == 1:
            return t1.copy()
        s = self.serial_share(specs, t1)
        sigma = self.sigma_of([k.op_type for k in specs]) - self.excess_ms
        t: NDArray[np.float64] = np.maximum(t1 * (s + (1.0 - s) / threads) + sigma * math.log2(threads),
                                            FLOOR * t1 / threads)
        return t


def node_excess(latency: pd.DataFrame) -> float:
    """The profiler's extra cost per node and log2(T) in spans at T > 1 threads over one thread (ms): per model and
    pass, (spans' sum - unprofiled latency) / nodes at T less the same at 1, divided by log2(T); the median over
    them (`LATENCY_COLUMNS`). 0 without a model timed at 1 and at more threads."""
    missing = [c for c in LATENCY_COLUMNS if c not in latency.columns]
    if missing:
        raise HaseError(f"thread model: the latency table lacks columns {missing}")
    d = latency.astype({"threads": np.int64, "latency_ms": np.float64, "span_sum_ms": np.float64,
                        "n_nodes": np.int64})
    d = d[(d["latency_ms"] > 0) & (d["n_nodes"] > 0)]
    d = d.assign(per_node=(d["span_sum_ms"] - d["latency_ms"]) / d["n_nodes"])
    one = d[d["threads"] == 1].set_index(["model", "pass"])["per_node"]
    many = d[d["threads"] > 1]
    base = one.reindex(list(zip(many["model"], many["pass"], strict=True))).to_numpy()
    diff = (many["per_node"].to_numpy() - base) / np.log2(many["threads"].to_numpy(dtype=np.float64))
    diff = diff[np.isfinite(diff)]
    return float(np.median(diff)) if len(diff) else 0.0


def thread_features(specs: Sequence[KernelSpec], t1_ms: ArrayLike, op_codes: Sequence[str]) -> NDArray[np.float32]:
    """The forest's `FEATURES` of each kernel (op types not in `op_codes` get code -1)."""
    t1 = np.asarray(t1_ms, dtype=np.float64)
    if len(t1) != len(specs):
        raise HaseError(f"thread model: {len(specs)} kernels but {len(t1)} one-thread times")
    code = {op: i for i, op in enumerate(op_codes)}
    rows = []
    for spec, t in zip(specs, t1, strict=True):
        g = generic_features(spec)
        dims = [int(d) for d in out0(spec).shape][-4:]
        dims = [1] * (4 - len(dims)) + dims
        group = attr(spec, "group", 1)
        rows.append([math.log1p(g["in_elems"]), math.log1p(g["out_elems"]), math.log1p(g["const_bytes"]),
                     *(math.log1p(max(d, 0)) for d in dims),
                     math.log1p(group if isinstance(group, int) else 1), math.log(max(t, 1e-6)),
                     code.get(spec.op_type, -1)])
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(FEATURES))


def fit_thread_model(pairs: pd.DataFrame, specs: Sequence[KernelSpec], host: str = "",
                     meta: Mapping[str, Any] | None = None) -> ThreadModel:
    """Fit sigma per op type on the small kernels (the median of their change per log2(T)), then the forest on
    every kernel's serial share, weighted by its one-thread time (the time a share moves), from `pairs`
    (`PAIR_COLUMNS`, threads > 1) and each row's kernel signature in `specs`."""
    missing = [c for c in PAIR_COLUMNS if c not in pairs.columns]
    if missing:
        raise HaseError(f"thread model: pairs lack columns {missing}; make them with paired_spans")
    if len(specs) != len(pairs):
        raise HaseError(f"thread model: {len(pairs)} pairs but {len(specs)} kernel signatures")
    keep = ((pairs["threads"] > 1) & (pairs["t1_ms"] > 0) & (pairs["t_ms"] > 0)).to_numpy()
    if not keep.any():
        raise HaseError("thread model: no kernel measured at both 1 and more threads; measure spans at 1 and at "
                        "the default thread count first")
    p = pairs[keep]
    kept = [s for s, k in zip(specs, keep, strict=True) if k]
    t1, tt = p["t1_ms"].to_numpy(dtype=np.float64), p["t_ms"].to_numpy(dtype=np.float64)
    threads = p["threads"].to_numpy(dtype=np.float64)
    log2t = np.log2(threads)
    ops = p["op_type"].astype(str).to_numpy()
    extra = (tt - t1) / log2t
    small = t1 < SMALL_MS
    sigma = {ALL: max(0.0, float(np.median(extra[small]))) if small.sum() >= MIN_ROWS else 0.0}
    for op in np.unique(ops[small]):
        sel = small & (ops == op)
        if sel.sum() >= MIN_ROWS:
            sigma[str(op)] = max(0.0, float(np.median(extra[sel])))
    sig = np.array([sigma.get(o, sigma[ALL]) for o in ops])
    share = np.clip(((tt - sig * log2t) / t1 - 1.0 / threads) / (1.0 - 1.0 / threads), 0.0, 1.0)
    op_codes = tuple(sorted(set(ops)))
    X = thread_features(kept, t1, op_codes)
    from sklearn.ensemble import RandomForestRegressor  # training only: prediction reads the packed forest

    rf = RandomForestRegressor(**FOREST, n_jobs=1).fit(X, share, sample_weight=t1 * (1.0 - 1.0 / threads))
    return ThreadModel(sigma, op_codes, pack_forest(rf), tuple(sorted(int(t) for t in np.unique(threads))), host,
                       dict(meta or {}))


def save_thread_model(model: ThreadModel, path: str | Path) -> Path:
    """One .npz: the forest's arrays and a JSON header (sigma, op codes, threads, host, meta), written atomically
    (`hase.files.write_atomic`), so a failed save leaves nothing half-written."""
    path = Path(path)
    header = {"form": FORM, "features": list(FEATURES), "sigma_ms": dict(model.sigma_ms),
              "op_codes": list(model.op_codes), "threads": list(model.threads), "host": model.host,
              "meta": dict(model.meta), "depth": model.forest.depth, "n_features": model.forest.n_features,
              "excess_ms": model.excess_ms}
    arrays = {f"forest_{k}": v for k, v in model.forest.to_arrays().items()}
    arrays["header"] = np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds oddly
    return write_atomic(path, buf.getvalue())


def load_thread_model(path: str | Path) -> ThreadModel:
    """The model `save_thread_model` wrote; a missing or damaged file is one HaseError naming it."""
    try:
        with np.load(Path(path), allow_pickle=False) as z:
            header = json.loads(bytes(z["header"]).decode())
            arrays = {k.removeprefix("forest_"): z[k] for k in z.files if k.startswith("forest_")}
        if header.get("form") != FORM or tuple(header["features"]) != FEATURES:
            raise ValueError(f"form {header.get('form')!r} with features {header.get('features')} is not this "
                             "version's")
        forest = PackedForest.from_arrays(arrays, int(header["depth"]), int(header["n_features"]))
        sigma = {str(k): float(v) for k, v in header["sigma_ms"].items()}
        if ALL not in sigma:
            raise ValueError(f"no pooled sigma {ALL!r}")
        return ThreadModel(sigma, tuple(str(o) for o in header["op_codes"]), forest,
                           tuple(int(t) for t in header["threads"]), str(header.get("host", "")),
                           dict(header.get("meta", {})), float(header.get("excess_ms", 0.0)))
    except FileNotFoundError:
        raise HaseError(f"{path}: no such thread model; fit one with benchmarks/thread_model.py --save") from None
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise HaseError(f"{path}: not a thread model ({type(e).__name__}: {e}); fit it again") from None


def paired_spans(spans: pd.DataFrame) -> pd.DataFrame:
    """`PAIR_COLUMNS` (plus `model`, `node`) from a long table of in-model spans (`model`, `node`, `op_type`,
    `threads`, `span_ms`, optional `pass`): each kernel's quickest pass at each thread count, paired with its
    quickest one-thread pass."""
    best = spans.groupby(["model", "node", "op_type", "threads"], as_index=False)["span_ms"].min()
    one = best[best["threads"] == 1].rename(columns={"span_ms": "t1_ms"}).drop(columns="threads")
    many = best[best["threads"] > 1].rename(columns={"span_ms": "t_ms"})
    pairs: pd.DataFrame = many.merge(one, on=["model", "node", "op_type"], how="inner")
    return pairs[["model", "node", *PAIR_COLUMNS]]


def pairs_with_specs(spans: pd.DataFrame, specs: Mapping[tuple[str, str], KernelSpec]
                     ) -> tuple[pd.DataFrame, list[KernelSpec], float]:
    """`paired_spans(spans)` restricted to the kernels whose (model, node) has a signature in `specs`, the signatures
    in row order, and the share of pairs kept (the rest: nodes another ORT version names otherwise)."""
    pairs = paired_spans(spans)
    keys = list(zip(pairs["model"], pairs["node"], strict=True))
    has = np.array([k in specs for k in keys], dtype=bool)
    kept = pairs[has].reset_index(drop=True)
    return kept, [specs[k] for k, h in zip(keys, has, strict=True) if h], float(has.mean()) if len(has) else 0.0


def store_spans(stores: Sequence[str | Path], device: str, threads: int) -> tuple[pd.DataFrame, dict[tuple[str, str],
                                                                                                      KernelSpec]]:
    """`device`'s in-model spans of every store as the long sweep table (`threads` its thread count: a store says 0
    for ORT's default, which the caller knows as the host's cores), one pass per store, and every node's signature.
    A store's model ids name the same model in every store of the same zoo, so spans of one store at one thread and
    another at T pair up by (model, node)."""
    from hase.measure.store import Store  # noqa: PLC0415 - the store pulls sqlite; prediction never reads one

    frames, specs = [], {}
    for i, path in enumerate(stores):
        with Store(path, readonly=True) as s:
            spans = s.table("node_spans")
            kernels = s.table("kernels")
        spans = spans[spans["device"] == device]
        if spans.empty:
            raise HaseError(f"{path}: no in-model spans of {device!r}; collect them with `hase collect --device "
                            f"{device}`")
        by_id = dict(zip(kernels["kernel_id"], kernels["signature_json"], strict=True))
        frames.append(pd.DataFrame({"model": spans["model_id"], "node": spans["node_name"],
                                    "op_type": spans["op_type"], "threads": threads, "pass": i,
                                    "span_ms": spans["span_ms"]}))
        for model, node, kid in zip(spans["model_id"], spans["node_name"], spans["kernel_id"], strict=True):
            if kid in by_id and (model, node) not in specs:
                specs[(model, node)] = KernelSpec.from_json(by_id[kid])
    return pd.concat(frames, ignore_index=True).dropna(subset=["span_ms"]), specs
