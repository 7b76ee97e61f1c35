"""The ratio table: every way of summing kernels, and the predictions, as a ratio to the measured latency.

Per model the sources are: sum of ORT kernel_time, of in-model spans, of standalone warm / cold
kernels (all measured), the predicted sum (held-out), the calibrated held-out prediction and the
calibrated in-sample one. `ratio_summary` scores each source per scope (all models; zoo and exported models
apart when the store has both).
"""
from __future__ import annotations

import pandas as pd

from hase.predict import dataset
from hase.predict.crossval import CALIBRATION, HELD_OUT, SPLIT, SUM_PRED_MS, TARGET, TRAIN
from hase.predict.metrics import metrics
from hase.predict.predictor import PRED_MS
from hase.zoo.blocks import is_sampled

SUM_PRED_HELD_OUT_MS = "sum_pred_held_out_ms"
CALIBRATED_HELD_OUT_MS, CALIBRATED_TRAIN_MS = "calibrated_held_out_ms", "calibrated_train_ms"
SOURCE_KIND = {SUM_PRED_HELD_OUT_MS: HELD_OUT, CALIBRATED_HELD_OUT_MS: HELD_OUT, CALIBRATED_TRAIN_MS: TRAIN}
MEASURED = "measured"
EXPORTED = "exported"  # the family of the real exported models, reported as their own scope
ALL, ZOO = "all", "zoo"  # the other scopes: every model, the generated zoo families
SCOPE, SOURCE_COLUMN = "scope", "source"


def ratio_column(ms_column: str) -> str:
    """The ratio column of a latency column: sum_span_ms -> sum_span_ratio."""
    return ms_column.replace("_ms", "_ratio")


def ratio_table(data: dataset.DeviceData, cv_models: pd.DataFrame, target: str, calibration: str) -> pd.DataFrame:
    """Per model (the sampled kernel blocks left out): measured latency, each kernel-sum source and the
    predictions, and each as a ratio to measured.

        model_id | family | measured_ms | n_kernels | sum_warm_ms ... calibrated_train_ms | sum_warm_ratio ...
    """
    sums = dataset.model_sums(data).set_index(dataset.MODEL_ID)
    sums = sums[~sums[dataset.FAMILY].map(is_sampled)]  # sampled kernel blocks are training data, not models to score
    sel = cv_models[(cv_models[TARGET] == target) & (cv_models[CALIBRATION] == calibration)]
    held = sel[sel[SPLIT] == HELD_OUT].set_index(dataset.MODEL_ID)
    train = sel[sel[SPLIT] == TRAIN].set_index(dataset.MODEL_ID)
    t = sums[[dataset.FAMILY, dataset.MEASURED_MS, dataset.N_KERNELS, *dataset.SUM_COLUMNS.values()]].copy()
    t[SUM_PRED_HELD_OUT_MS] = held[SUM_PRED_MS]
    t[CALIBRATED_HELD_OUT_MS] = held[PRED_MS]
    t[CALIBRATED_TRAIN_MS] = train[PRED_MS]
    for col in [*dataset.SUM_COLUMNS.values(), *SOURCE_KIND]:
        t[ratio_column(col)] = t[col] / t[dataset.MEASURED_MS]
    return t.reset_index().sort_values([dataset.FAMILY, dataset.MODEL_ID]).reset_index(drop=True)


def scopes(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The model sets the summary scores: all models, and zoo / exported models apart only when the store has
    both (with one kind only, its scope would repeat the `all` rows)."""
    is_exported = table[dataset.FAMILY] == EXPORTED
    if is_exported.all() or not is_exported.any():
        return {ALL: table}
    return {ALL: table, ZOO: table[~is_exported], EXPORTED: table[is_exported]}


def ratio_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per source and scope (all models; zoo families and exported models when the store has both): mean and
    median ratio to the measured latency, RMSPE, ±5 % and ±10 % accuracy; `split` says measured, held_out or
    train."""
    rows = []
    for col in [c for c in table.columns if c.endswith("_ratio")]:
        src = col[: -len("_ratio")] + "_ms"
        for scope, t in scopes(table).items():
            rows.append({SOURCE_COLUMN: src, SPLIT: SOURCE_KIND.get(src, MEASURED), SCOPE: scope,
                         **metrics(t[dataset.MEASURED_MS], t[src])})
    return pd.DataFrame(rows)
