"""Whole-model prediction: split the model, predict every kernel (batched per forest), sum, calibrate.

    latency = alpha * sum(kernel) + beta                        form "scale"
    latency = alpha * sum(kernel) + gamma * n_kernels + beta    form "per_kernel"

The per-kernel term exists because a standalone kernel run pays a fixed invocation cost that a node
inside a model does not. alpha, beta, gamma are fitted per device and target on measured models
(least squares, relative least squares, or the robust Huber loss); `hase train` keeps the form that
wins on held-out families and stores its fit data in the manifest.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.kernels.split import KernelSpec
from hase.predict.predictor import KEY, PRED_MS, SOURCE, SOURCE_OP, KernelPredictor, PredictorBundle

log = logging.getLogger(__name__)

FORMS = ("raw", "scale", "per_kernel")
FITTERS = ("none", "ols", "relative", "huber")
CANDIDATES = (("raw", "none"), ("scale", "ols"), ("scale", "relative"), ("scale", "huber"),
              ("per_kernel", "ols"), ("per_kernel", "relative"), ("per_kernel", "huber"))
NODE_NAME, OP_TYPE, KERNEL_ID, LOW_MS, HIGH_MS = "node_name", "op_type", "kernel_id", "low_ms", "high_ms"
INTERVAL = (10.0, 90.0)  # percentiles of the trees' spread reported as the interval


@dataclass(frozen=True)
class Calibration:
    """latency = alpha * sum + gamma * n_kernels + beta (gamma is 0 for the `scale` form, all trivial for `raw`)."""

    form: str = "raw"
    fitter: str = "none"
    alpha: float = 1.0
    beta: float = 0.0
    gamma: float = 0.0

    @property
    def name(self) -> str:
        """form/fitter, or "raw"."""
        return self.form if self.form == "raw" else f"{self.form}/{self.fitter}"

    def apply(self, sum_ms: np.ndarray | float, n_kernels: np.ndarray | float) -> np.ndarray:
        """Calibrated latency (ms) from kernel sums and kernel counts."""
        return self.alpha * np.asarray(sum_ms, float) + self.gamma * np.asarray(n_kernels, float) + self.beta

    def to_dict(self) -> dict[str, Any]:
        """The coefficients as a plain dict (for the manifest)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        """A calibration from its manifest entry."""
        return cls(**{k: d[k] for k in ("form", "fitter", "alpha", "beta", "gamma")})


def _design(sum_ms: np.ndarray, n_kernels: np.ndarray, form: str) -> np.ndarray:
    cols = [sum_ms, np.ones_like(sum_ms)] if form == "scale" else [sum_ms, np.ones_like(sum_ms), n_kernels]
    return np.column_stack(cols)


def fit_calibration(sum_ms: Sequence[float], n_kernels: Sequence[float], measured_ms: Sequence[float],
                    form: str = "scale", fitter: str = "relative") -> Calibration:
    """Fit a calibration form on models' kernel sums against their measured latency.

    ols minimises squared ms (large models dominate); relative minimises squared relative error
    (what RMSPE measures); huber is relative with the robust Huber loss (a few odd models cannot
    pull the fit). Fewer models than coefficients + 1 falls back to `raw`.
    """
    if form not in FORMS or fitter not in FITTERS:
        raise HaseError(f"unknown calibration {form}/{fitter}: forms {list(FORMS)}, fitters {list(FITTERS)}")
    s, n, y = (np.asarray(a, float) for a in (sum_ms, n_kernels, measured_ms))
    ok = np.isfinite(s) & np.isfinite(y) & (y > 0)
    s, n, y = s[ok], n[ok], y[ok]
    if form == "raw" or fitter == "none":
        return Calibration()
    X = _design(s, n, form)
    if len(y) < X.shape[1] + 1:
        log.warning("only %d models to fit a %s calibration: using the raw sum", len(y), form)
        return Calibration()
    if fitter == "ols":
        coef = np.linalg.lstsq(X, y, rcond=None)[0]
    elif fitter == "relative":
        coef = np.linalg.lstsq(X / y[:, None], np.ones_like(y), rcond=None)[0]
    else:
        from sklearn.linear_model import HuberRegressor

        coef = HuberRegressor(fit_intercept=False, epsilon=1.35, alpha=0.0, max_iter=1000).fit(
            X / y[:, None], np.ones_like(y)).coef_
    gamma = float(coef[2]) if form == "per_kernel" else 0.0
    return Calibration(form, fitter, float(coef[0]), float(coef[1]), gamma)


# ---------------------------------------------------------------------- composing kernels into a model


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
    uniq: dict[str, int] = {}
    for s in specs:
        uniq.setdefault(s.kernel_id, len(uniq))
    uspecs = [None] * len(uniq)
    for s in specs:
        uspecs[uniq[s.kernel_id]] = s
    detail, draws = predictor.predict_detail(uspecs, n_draws)
    rows = np.array([uniq[s.kernel_id] for s in specs], dtype=int)
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
    """Predict a model file's latency on the bundle's device: ORT kernel graph -> kernels -> forests -> alpha*sum+beta."""
    from hase.kernels import graph, split

    t0 = time.perf_counter()
    target = bundle.target(target)
    kg = graph.file_kernel_graph(path, bundle.ep_config(), input_shapes, with_weights=False)
    nodes = split.split(kg)
    if not nodes:
        raise HaseError(f"{path}: ONNX Runtime's optimized graph has no nodes to predict")
    t1 = time.perf_counter()
    cal = Calibration.from_dict(bundle.calibration(target))
    frame, total, latency, low, high = compose([n.spec for n in nodes], bundle.predictors[target], cal)
    frame.insert(0, NODE_NAME, [n.node_name for n in nodes])
    t2 = time.perf_counter()
    return ModelEstimate(str(path), bundle.device, target, latency, low, high, total, len(nodes), cal, frame,
                         {"graph_s": t1 - t0, "predict_s": t2 - t1})


def predict_model_latency(path: Path, device: str = "cpu-1t", predictors_dir: str | Path | None = None) -> float:
    """Calibrated predicted latency (ms) of an ONNX model on `device`, with its default target."""
    from hase.predict.predictor import load_bundle, predictor_dir

    bundle = load_bundle(predictor_dir(device, predictors_dir), ["default"])
    return estimate_model(path, bundle).latency_ms
