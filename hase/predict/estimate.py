"""Whole-model prediction: split the model, predict every kernel (batched per forest), sum, calibrate.

    latency = alpha * sum(kernel) + gamma * n_kernels + beta     (see `hase.predict.calibration`)

The interval is the calibrated spread of the per-tree sums: draw d of every kernel comes from tree d
of its forest, so a draw summed over the model's nodes is one sample of the model total.

Nothing here imports pandas: `hase predict` starts in a fraction of the time (`ModelEstimate.frame()`
gives a DataFrame to whoever wants one).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from hase import paths
from hase.errors import HaseError
from hase.kernels.types import KernelSpec
from hase.predict.bundle import PredictorBundle, load_bundle, predictor_dir
from hase.predict.calibration import Calibration
from hase.predict.predictor import KEY, SOURCE, SOURCE_OP, KernelPredictor

if TYPE_CHECKING:  # pragma: no cover - pandas loads only for `ModelEstimate.frame`
    import pandas as pd

NODE_NAME, OP_TYPE, KERNEL_ID, LOW_MS, HIGH_MS = "node_name", "op_type", "kernel_id", "low_ms", "high_ms"
INTERVAL = (10.0, 90.0)  # percentiles of the trees' spread reported as the interval


@dataclass(frozen=True)
class KernelPrediction:
    """One node of ORT's kernel graph: its kernel, the forest that predicted it (`key`, from its own op's
    forest, its family's or the generic one: `source`) and the predicted time."""

    node_name: str
    kernel_id: str
    op_type: str
    key: str
    source: str
    pred_ms: float


@dataclass(frozen=True)
class OpTotal:
    """Predicted time of one op type: kernels, sum and share of the model's kernel sum."""

    op_type: str
    n: int
    pred_ms: float
    share: float


@dataclass(frozen=True)
class ModelEstimate:
    """A model's predicted latency with its interval, the raw kernel sum and what it is made of."""

    model: str
    device: str
    target: str
    latency_ms: float
    low_ms: float
    high_ms: float
    sum_ms: float
    n_kernels: int
    calibration: Calibration
    kernels: tuple[KernelPrediction, ...] = field(repr=False)
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def fallback(self) -> list[KernelPrediction]:
        """Kernels not predicted by their own op's forest (family or generic forest instead)."""
        return [k for k in self.kernels if k.source != SOURCE_OP]

    def fallback_counts(self) -> list[tuple[str, str, int]]:
        """(op type, source, kernels) of the fallbacks, sorted by op type and source."""
        counts: dict[tuple[str, str], int] = {}
        for k in self.fallback:
            counts[k.op_type, k.source] = counts.get((k.op_type, k.source), 0) + 1
        return [(op, source, n) for (op, source), n in sorted(counts.items())]

    def by_op(self) -> list[OpTotal]:
        """Per op type: kernels, predicted ms and share of the sum, largest first."""
        groups: dict[str, list[float]] = {}
        for k in self.kernels:
            groups.setdefault(k.op_type, []).append(k.pred_ms)
        totals = [OpTotal(op, len(v), float(np.sum(v)), float(np.sum(v)) / max(self.sum_ms, 1e-12))
                  for op, v in sorted(groups.items())]
        return sorted(totals, key=lambda t: -t.pred_ms)

    def top(self, n: int = 10) -> list[KernelPrediction]:
        """The n nodes with the largest predicted time (the earlier node first among equals)."""
        return sorted(self.kernels, key=lambda k: -k.pred_ms)[:max(n, 0)]

    def frame(self) -> pd.DataFrame:
        """The kernels as a DataFrame: node_name, kernel_id, op_type, key, source, pred_ms."""
        import pandas as pd

        columns = [f.name for f in dataclasses.fields(KernelPrediction)]
        return pd.DataFrame([dataclasses.astuple(k) for k in self.kernels], columns=columns)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """Everything `hase predict --json` prints for one model."""
        fb = self.fallback
        return {
            "model": self.model, "device": self.device, "target": self.target, "latency_ms": self.latency_ms,
            "interval_ms": [self.low_ms, self.high_ms], "interval": f"p{INTERVAL[0]:g}-p{INTERVAL[1]:g} of the trees",
            "sum_kernel_ms": self.sum_ms, "n_kernels": self.n_kernels, "calibration": self.calibration.to_dict(),
            "by_op": [dataclasses.asdict(t) for t in self.by_op()],
            "top_kernels": [dataclasses.asdict(k) for k in self.top(top)],
            "fallback": [{NODE_NAME: k.node_name, OP_TYPE: k.op_type, KEY: k.key, SOURCE: k.source} for k in fb],
            "n_fallback": len(fb), "timings_s": self.timings_s,
        }


@dataclass(frozen=True)
class Composition:
    """Per-node predictions of a kernel sequence (`keys`, `sources`, `pred_ms` in node order) and the
    calibrated total with its interval."""

    keys: list[str]
    sources: list[str]
    pred_ms: NDArray[np.float64]
    sum_ms: float
    latency_ms: float
    low_ms: float
    high_ms: float


def compose(specs: Sequence[KernelSpec], predictor: KernelPredictor, calibration: Calibration,
            n_draws: int = 64) -> Composition:
    """Predict every node's kernel once per unique kernel and sum over nodes; the interval is the calibrated
    spread of the per-tree sums."""
    unique: dict[str, KernelSpec] = {}
    for s in specs:
        unique.setdefault(s.kernel_id, s)  # one kernel_id is one signature: any occurrence will do
    keys, sources, pred, draws = predictor.predict_routes(list(unique.values()), n_draws)
    position = {kernel_id: i for i, kernel_id in enumerate(unique)}
    rows = np.array([position[s.kernel_id] for s in specs], dtype=int)
    per_node = pred[rows]
    total = float(per_node.sum())
    sums = draws[rows].sum(axis=0)
    n = len(specs)
    latency = float(calibration.apply(total, n))
    low, high = (float(v) for v in calibration.apply(np.percentile(sums, INTERVAL), n))
    return Composition([keys[i] for i in rows], [sources[i] for i in rows], per_node, total, latency,
                       min(low, latency), max(high, latency))


def estimate_model(path: str | Path, bundle: PredictorBundle, target: str | None = None,
                   input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                   free_dims: Mapping[str, int] | None = None) -> ModelEstimate:
    """A model file's latency on the bundle's device: ORT kernel graph -> kernels -> forests -> alpha*sum+beta.
    `input_shapes` (by input) and `free_dims` (by symbolic dimension) fix symbolic input shapes."""
    from hase.kernels import graph, split

    t0 = time.perf_counter()
    target = bundle.target(target)
    kg = graph.file_kernel_graph(path, bundle.ep_config(), input_shapes, with_weights=False, free_dims=free_dims)
    nodes = split.split(kg)
    if not nodes:
        raise HaseError(f"{path}: ONNX Runtime's optimized graph has no nodes to predict")
    t1 = time.perf_counter()
    cal = bundle.calibration(target)
    c = compose([n.spec for n in nodes], bundle.predictors[target], cal)
    kernels = tuple(KernelPrediction(n.node_name, n.spec.kernel_id, n.spec.op_type, key, source, float(ms))
                    for n, key, source, ms in zip(nodes, c.keys, c.sources, c.pred_ms, strict=True))
    t2 = time.perf_counter()
    return ModelEstimate(str(path), bundle.device, target, c.latency_ms, c.low_ms, c.high_ms, c.sum_ms, len(nodes),
                         cal, kernels, {"graph_s": t1 - t0, "predict_s": t2 - t1})


@dataclass(frozen=True)
class PredictFailure:
    """A model that could not be predicted, with the one-line reason (batch prediction reports it and goes on)."""

    model: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        """What `hase predict --json` prints for the model."""
        return {"model": self.model, "error": self.error}


ModelResult = ModelEstimate | PredictFailure


def estimate_models(paths: Sequence[str | Path], bundle: PredictorBundle, target: str | None = None,
                    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
                    free_dims: Mapping[str, int] | None = None) -> list[ModelResult]:
    """`estimate_model` for each file, in order; a file that fails with a HaseError becomes a PredictFailure."""
    results: list[ModelResult] = []
    for path in paths:
        try:
            results.append(estimate_model(path, bundle, target, input_shapes, free_dims))
        except HaseError as exc:
            results.append(PredictFailure(str(path), str(exc)))
    return results


def predict_model_latency(path: Path, device: str = paths.DEFAULT_DEVICE,
                          predictors_dir: str | Path | None = None) -> float:
    """Calibrated predicted latency (ms) of an ONNX model on `device`, with its default target."""
    bundle = load_bundle(predictor_dir(device, predictors_dir), ["default"])
    return estimate_model(path, bundle).latency_ms
