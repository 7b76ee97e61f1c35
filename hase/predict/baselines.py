"""The baselines Hase must beat: model latency as a linear function of its FLOPs (and bytes moved).

Fitted by relative least squares and scored leave-family-out, like the kernel predictors, so the
comparison is fair. One row per model:

    model_id | family | measured_ms | model_flops | model_bytes | flops | flops+bytes
                                                                  (held-out predicted latency, ms)
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from hase.predict import dataset, features
from hase.predict.calibration import relative_lstsq
from hase.predict.metrics import Scores, score
from hase.zoo.blocks import is_sampled

FLOPS, BYTES = features.FLOPS, features.BYTES
BASELINES = {"flops": (FLOPS,), "flops+bytes": (FLOPS, BYTES)}
# a model's total FLOPs and bytes in baseline tables (not FLOPS/BYTES: the "flops" baseline's column
# holds its predicted latency)
MODEL_FLOPS, MODEL_BYTES = "model_flops", "model_bytes"
BASELINE = "baseline"


def model_costs(data: dataset.DeviceData) -> pd.DataFrame:
    """Per model: total FLOPs and bytes moved over its nodes (index model_id)."""
    ids = list(data.specs)
    costs = features.cost_frame([data.specs[k] for k in ids]).set_index(pd.Index(ids, name=dataset.KERNEL_ID))
    nodes = data.nodes.join(costs[[FLOPS, BYTES]], on=dataset.KERNEL_ID)
    return nodes.groupby(dataset.MODEL_ID)[[FLOPS, BYTES]].sum()


def baseline_lofo(data: dataset.DeviceData) -> pd.DataFrame:
    """Held-out predictions of linear fits of model latency on FLOPs, and on FLOPs + bytes (relative LS)."""
    m = data.models.set_index(dataset.MODEL_ID).join(model_costs(data))
    m = m[~m[dataset.FAMILY].map(is_sampled)]  # the sampled blocks are not models to score (crossval.scored_families)
    out = m[[dataset.FAMILY, dataset.MEASURED_MS, FLOPS, BYTES]].rename(columns={FLOPS: MODEL_FLOPS,
                                                                                 BYTES: MODEL_BYTES})
    for name, cols in BASELINES.items():
        out[name] = np.nan
        for fam in sorted(m[dataset.FAMILY].unique()):
            tr, te = m[m[dataset.FAMILY] != fam], m[dataset.FAMILY] == fam
            out.loc[te, name] = _linear_predict(tr, m[te], cols)
    return out.reset_index()


def _linear_predict(train: pd.DataFrame, test: pd.DataFrame, cols: tuple[str, ...]) -> NDArray[np.float64]:
    y = train[dataset.MEASURED_MS].to_numpy(dtype=np.float64)
    X = np.column_stack([train[c].to_numpy() for c in cols] + [np.ones(len(train))])
    coef = relative_lstsq(X, y)
    Xt = np.column_stack([test[c].to_numpy() for c in cols] + [np.ones(len(test))])
    pred: NDArray[np.float64] = Xt @ coef
    return pred


def baseline_results(baselines: pd.DataFrame) -> dict[str, Scores]:
    """Held-out scores of each baseline of a `baseline_lofo` table."""
    return {name: score(baselines[dataset.MEASURED_MS], baselines[name]) for name in BASELINES}


def baseline_scores(baselines: pd.DataFrame) -> pd.DataFrame:
    """Held-out metrics of each baseline, one row per baseline."""
    return pd.DataFrame([{BASELINE: name, **s.to_dict()} for name, s in baseline_results(baselines).items()])
