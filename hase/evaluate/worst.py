"""The worst-predicted models and the kernels that carry their error: predicted vs in-model time per node.

A model's error is made of its kernels' errors; a 115 ms prediction for a 7×7 pooler that runs in 0.1 ms is one
node, and shows as one row here, first in the report. For the store's models the in-model time is each node's
profiled span (`node_spans`, median over the profiled runs) and the prediction is the one leave-family-out made
for a kernel its fold never saw (`cv_kernels.csv`), else the saved predictor's; for the real exported models
(`hase evaluate --devset`) the worst rows are profiled once more after the sweep (`estimate_kernel_rows`).

    model_id | family | measured_ms | predicted_ms | error_pct | node_name | op_type | kernel_pred_ms |
    in_model_ms | kernel_diff_ms | clamped | pred_from
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from hase.evaluate.ratios import CALIBRATED_HELD_OUT_MS
from hase.predict import dataset
from hase.predict.crossval import FOLD, TARGET
from hase.predict.estimate import ModelEstimate
from hase.predict.predictor import CLAMPED, PRED_MS, KernelPredictor

WORST_MODELS, WORST_KERNELS = 5, 5  # models shown, and kernels per model
KERNEL_PRED_MS, IN_MODEL_MS, KERNEL_DIFF_MS = "kernel_pred_ms", "in_model_ms", "kernel_diff_ms"
ERROR_PCT, PRED_FROM, PREDICTED_MS = "error_pct", "pred_from", "predicted_ms"
HELD_OUT, FINAL = "held out", "final"  # where a store kernel's prediction came from
KERNEL_COLUMNS = (dataset.NODE_NAME, dataset.OP_TYPE, KERNEL_PRED_MS, IN_MODEL_MS, KERNEL_DIFF_MS, CLAMPED)
STORE_COLUMNS = (dataset.MODEL_ID, dataset.FAMILY, dataset.MEASURED_MS, PREDICTED_MS, ERROR_PCT, *KERNEL_COLUMNS,
                 PRED_FROM)


def largest_differences(nodes: pd.DataFrame, k: int = WORST_KERNELS) -> pd.DataFrame:
    """The `k` rows of a node table (KERNEL_PRED_MS, IN_MODEL_MS) whose prediction is furthest from the in-model
    time, with KERNEL_DIFF_MS = predicted - in-model (a node without in-model time counts its whole prediction)."""
    out = nodes.assign(**{KERNEL_DIFF_MS: nodes[KERNEL_PRED_MS] - nodes[IN_MODEL_MS]})
    size = out[KERNEL_DIFF_MS].abs().fillna(out[KERNEL_PRED_MS].abs())
    return out.loc[size.sort_values(ascending=False, kind="stable").index[:k]]


def store_worst(data: dataset.DeviceData, table: pd.DataFrame, cv_kernels: pd.DataFrame, target: str,
                predictor: KernelPredictor | None, n: int = WORST_MODELS, k: int = WORST_KERNELS) -> pd.DataFrame:
    """The `n` held-out models furthest from their measured latency, each with its `k` nodes whose predicted time
    is furthest from their in-model span (STORE_COLUMNS; empty when no model was held out)."""
    held = table.dropna(subset=[CALIBRATED_HELD_OUT_MS])
    if held.empty:
        return pd.DataFrame(columns=list(STORE_COLUMNS))
    err = (held[CALIBRATED_HELD_OUT_MS] / held[dataset.MEASURED_MS] - 1) * 100
    worst = held.assign(**{ERROR_PCT: err}).loc[err.abs().sort_values(ascending=False).index[:n]]
    cv = cv_kernels[cv_kernels[TARGET] == target]
    parts = []
    for _, m in worst.iterrows():
        nodes = data.nodes[data.nodes[dataset.MODEL_ID] == m[dataset.MODEL_ID]]
        pred, source, clamped = _store_predictions(data, nodes[dataset.KERNEL_ID], cv[cv[FOLD] == m[dataset.FAMILY]],
                                                   predictor)
        frame = pd.DataFrame({dataset.NODE_NAME: nodes[dataset.NODE_NAME], dataset.OP_TYPE: nodes[dataset.OP_TYPE],
                              KERNEL_PRED_MS: pred,
                              IN_MODEL_MS: nodes[dataset.SPAN_MS].to_numpy(dtype=float), CLAMPED: clamped,
                              PRED_FROM: source})
        top = largest_differences(frame, k)
        parts.append(top.assign(**{dataset.MODEL_ID: m[dataset.MODEL_ID], dataset.FAMILY: m[dataset.FAMILY],
                                   dataset.MEASURED_MS: m[dataset.MEASURED_MS],
                                   PREDICTED_MS: m[CALIBRATED_HELD_OUT_MS], ERROR_PCT: m[ERROR_PCT]}))
    return pd.concat(parts, ignore_index=True)[list(STORE_COLUMNS)]


def _store_predictions(data: dataset.DeviceData, kernel_ids: pd.Series, fold: pd.DataFrame,
                       predictor: KernelPredictor | None) -> tuple[np.ndarray, list[str], list[str]]:
    """Per node: the prediction (held out where the fold never saw the kernel, else the saved predictor's; NaN
    without either), where it came from, and its clamp."""
    ids = list(kernel_ids)
    pred, source, clamped = np.full(len(ids), np.nan), [""] * len(ids), [""] * len(ids)
    if predictor is not None and ids:
        frame, _ = predictor.predict_detail([data.specs[k] for k in ids], n_draws=1)
        pred[:] = frame[PRED_MS].to_numpy()
        source, clamped = [FINAL] * len(ids), [str(c) for c in frame[CLAMPED]]
    once = fold.drop_duplicates(dataset.KERNEL_ID)
    held = {str(k): float(v) for k, v in zip(once[dataset.KERNEL_ID], once[PRED_MS], strict=True)}
    held_clamp = {str(k): str(v) for k, v in zip(once[dataset.KERNEL_ID], once[CLAMPED].astype(object).fillna(""),
                                                  strict=True)} \
        if CLAMPED in once else {}
    for i, kid in enumerate(ids):
        if kid in held:
            pred[i], source[i], clamped[i] = held[kid], HELD_OUT, held_clamp.get(kid, "")
    return pred, source, clamped


def estimate_kernel_rows(est: ModelEstimate, in_model_ms: Mapping[str, float],
                         k: int = WORST_KERNELS) -> pd.DataFrame:
    """A model estimate's `k` nodes furthest from their in-model time (KERNEL_COLUMNS)."""
    nodes = pd.DataFrame({dataset.NODE_NAME: [x.node_name for x in est.kernels],
                          dataset.OP_TYPE: [x.op_type for x in est.kernels],
                          KERNEL_PRED_MS: [x.pred_ms for x in est.kernels],
                          IN_MODEL_MS: [in_model_ms.get(x.node_name, np.nan) for x in est.kernels],
                          CLAMPED: [x.clamped for x in est.kernels]})
    return largest_differences(nodes, k)[list(KERNEL_COLUMNS)].reset_index(drop=True)
