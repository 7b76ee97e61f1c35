"""Whole-model prediction: split the model, predict every kernel (batched per forest), sum, calibrate.

    latency = alpha * sum(kernel) + gamma * n_kernels + beta     (see `hase.predict.calibration`)

The interval is the calibrated spread of the per-tree sums: draw d of every kernel comes from tree d
of its forest, so a draw summed over the model's nodes is one sample of the model total.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase import paths
from hase.errors import HaseError
from hase.kernels.types import KernelSpec
from hase.predict.bundle import PredictorBundle, load_bundle, predictor_dir
from hase.predict.calibration import Calibration
from hase.predict.predictor import KEY, PRED_MS, SOURCE, SOURCE_OP, KernelPredictor

NODE_NAME, OP_TYPE, KERNEL_ID, LOW_MS, HIGH_MS = "node_name", "op_type", "kernel_id", "low_ms", "high_ms"
INTERVAL = (10.0, 90.0)  # percentiles of the trees' spread reported as the interval


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
    kernels: pd.DataFrame = field(repr=False)
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def fallback(self) -> pd.DataFrame:
        """Kernels not predicted by their own op's forest (family or generic forest instead)."""
        return self.kernels[self.kernels[SOURCE] != SOURCE_OP]

    def by_op(self) -> pd.DataFrame:
        """Per op type: kernels, predicted ms and share of the sum, largest first."""
        g = self.kernels.groupby(OP_TYPE)[PRED_MS].agg(["size", "sum"]).rename(columns={"size": "n", "sum": PRED_MS})
        g["share"] = g[PRED_MS] / max(self.sum_ms, 1e-12)
        return g.sort_values(PRED_MS, ascending=False).reset_index()

    def top(self, n: int = 10) -> pd.DataFrame:
        """The n nodes with the largest predicted time."""
        return self.kernels.nlargest(n, PRED_MS)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """Everything `hase predict --json` prints for one model."""
        fb = self.fallback
        return {
            "model": self.model, "device": self.device, "target": self.target, "latency_ms": self.latency_ms,
            "interval_ms": [self.low_ms, self.high_ms], "interval": f"p{INTERVAL[0]:g}-p{INTERVAL[1]:g} of the trees",
            "sum_kernel_ms": self.sum_ms, "n_kernels": self.n_kernels, "calibration": self.calibration.to_dict(),
            "by_op": self.by_op().to_dict("records"), "top_kernels": self.top(top).to_dict("records"),
            "fallback": fb[[NODE_NAME, OP_TYPE, KEY, SOURCE]].to_dict("records"), "n_fallback": len(fb),
            "timings_s": self.timings_s,
        }


def compose(specs: Sequence[KernelSpec], predictor: KernelPredictor, calibration: Calibration,
            n_draws: int = 64) -> tuple[pd.DataFrame, float, float, float, float]:
    """Predict every node's kernel once per unique kernel and sum over nodes.

    Returns (per-node frame, raw sum, calibrated latency, low, high); the interval is the calibrated
    spread of the per-tree sums.
    """
    unique: dict[str, KernelSpec] = {}
    for s in specs:
        unique.setdefault(s.kernel_id, s)  # one kernel_id is one signature: any occurrence will do
    detail, draws = predictor.predict_detail(list(unique.values()), n_draws)
    position = {kernel_id: i for i, kernel_id in enumerate(unique)}
    rows = np.array([position[s.kernel_id] for s in specs], dtype=int)
    frame = detail.iloc[rows].reset_index(drop=True)
    frame.insert(0, KERNEL_ID, [s.kernel_id for s in specs])
    frame.insert(1, OP_TYPE, [s.op_type for s in specs])
    total = float(frame[PRED_MS].sum())
    sums = draws[rows].sum(axis=0)
    n = len(specs)
    latency = float(calibration.apply(total, n))
    low, high = (float(v) for v in calibration.apply(np.percentile(sums, INTERVAL), n))
    return frame, total, latency, min(low, latency), max(high, latency)


def estimate_model(path: str | Path, bundle: PredictorBundle, target: str | None = None,
                   input_shapes: Mapping[str, tuple[int, ...]] | None = None) -> ModelEstimate:
    """A model file's latency on the bundle's device: ORT kernel graph -> kernels -> forests -> alpha*sum+beta."""
    from hase.kernels import graph, split

    t0 = time.perf_counter()
    target = bundle.target(target)
    kg = graph.file_kernel_graph(path, bundle.ep_config(), input_shapes, with_weights=False)
    nodes = split.split(kg)
    if not nodes:
        raise HaseError(f"{path}: ONNX Runtime's optimized graph has no nodes to predict")
    t1 = time.perf_counter()
    cal = bundle.calibration(target)
    frame, total, latency, low, high = compose([n.spec for n in nodes], bundle.predictors[target], cal)
    frame.insert(0, NODE_NAME, [n.node_name for n in nodes])
    t2 = time.perf_counter()
    return ModelEstimate(str(path), bundle.device, target, latency, low, high, total, len(nodes), cal, frame,
                         {"graph_s": t1 - t0, "predict_s": t2 - t1})


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
                    input_shapes: Mapping[str, tuple[int, ...]] | None = None) -> list[ModelResult]:
    """`estimate_model` for each file, in order; a file that fails with a HaseError becomes a PredictFailure."""
    results: list[ModelResult] = []
    for path in paths:
        try:
            results.append(estimate_model(path, bundle, target, input_shapes))
        except HaseError as exc:
            results.append(PredictFailure(str(path), str(exc)))
    return results


def predict_model_latency(path: Path, device: str = paths.DEFAULT_DEVICE,
                          predictors_dir: str | Path | None = None) -> float:
    """Calibrated predicted latency (ms) of an ONNX model on `device`, with its default target."""
    bundle = load_bundle(predictor_dir(device, predictors_dir), ["default"])
    return estimate_model(path, bundle).latency_ms
