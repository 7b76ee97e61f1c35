"""Accuracy metrics, leave-family-out evaluation, FLOPs baselines and the kernel-sum/model ratio table.

Everything here returns DataFrames (column names below); rendering is `hase.predict.report`'s job.
Held-out means leave-family-out: each model family in turn is removed from training (its kernels'
measurements and its models' latencies), predicted, and scored, so a family is never judged by a
predictor that saw it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.predict import dataset as D
from hase.predict import features as F
from hase.predict.estimate import CANDIDATES, Calibration, fit_calibration
from hase.predict.predictor import KEY, PRED_MS, SOURCE, KernelPredictor

log = logging.getLogger(__name__)

TARGET, SPLIT, CALIBRATION, FOLD = "target", "split", "calibration", "fold"
HELD_OUT, TRAIN = "held_out", "train"
SUM_PRED_MS, SUM_LOW_MS, SUM_HIGH_MS, SUM_FIT_MS = "sum_pred_ms", "sum_low_ms", "sum_high_ms", "sum_fit_ms"
Y_MS, FLOPS, BYTES = "y_ms", "flops", "bytes"
BASELINES = {"flops": (FLOPS,), "flops+bytes": (FLOPS, BYTES)}
# a model's total FLOPs and bytes in baseline tables (not FLOPS/BYTES: the "flops" baseline's column
# holds its predicted latency)
MODEL_FLOPS, MODEL_BYTES = "model_flops", "model_bytes"
MakePredictor = Callable[[], KernelPredictor]


# ---------------------------------------------------------------------- metrics


def rmspe(y: Sequence[float], yhat: Sequence[float]) -> float:
    """Root mean squared percentage error: sqrt(mean(((y - yhat) / y)^2)) * 100."""
    y, yhat = np.asarray(y, float), np.asarray(yhat, float)
    return float(np.sqrt(np.mean(((y - yhat) / y) ** 2)) * 100) if len(y) else float("nan")


def within(y: Sequence[float], yhat: Sequence[float], bound: float) -> float:
    """Share of samples with |y - yhat| / y <= bound (nn-Meter's ±bound accuracy)."""
    y, yhat = np.asarray(y, float), np.asarray(yhat, float)
    return float(np.mean(np.abs(y - yhat) / y <= bound + 1e-12)) if len(y) else float("nan")


def metrics(y: Sequence[float], yhat: Sequence[float]) -> dict[str, float]:
    """n, RMSE (ms), RMSPE (%), ±5 % and ±10 % accuracy, mean and median ratio yhat / y."""
    y, yhat = np.asarray(y, float), np.asarray(yhat, float)
    ok = np.isfinite(y) & np.isfinite(yhat) & (y > 0)
    y, yhat = y[ok], yhat[ok]
    ratio = yhat / y if len(y) else np.array([np.nan])
    return {"n": len(y), "rmse_ms": float(np.sqrt(np.mean((y - yhat) ** 2))) if len(y) else float("nan"),
            "rmspe": rmspe(y, yhat), "acc5": within(y, yhat, 0.05), "acc10": within(y, yhat, 0.10),
            "mean_ratio": float(np.mean(ratio)), "median_ratio": float(np.median(ratio))}


def grouped_metrics(frame: pd.DataFrame, by: str | list[str], y: str, yhat: str) -> pd.DataFrame:
    """`metrics` per group, one row per group."""
    rows = [{**(dict(zip(by, k)) if isinstance(by, list) else {by: k}), **metrics(g[y], g[yhat])}
            for k, g in frame.groupby(by)]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- predicting models from store data


def unique_kernel_predictions(data: D.DeviceData, predictor: KernelPredictor, kernel_ids: Iterable[str],
                              n_draws: int = 64) -> tuple[pd.DataFrame, np.ndarray]:
    """Predictions for a set of kernels (index kernel_id) and their per-tree draws, batched per forest."""
    ids = list(dict.fromkeys(kernel_ids))
    frame, draws = predictor.predict_detail([data.specs[k] for k in ids], n_draws)
    frame.index = pd.Index(ids, name=D.KERNEL_ID)
    return frame, draws


def model_predictions(data: D.DeviceData, predictor: KernelPredictor, model_ids: Iterable[str],
                      n_draws: int = 64) -> pd.DataFrame:
    """Per model: predicted kernel sum and the p10/p90 of its per-tree sums (index model_id)."""
    nodes = data.nodes[data.nodes[D.MODEL_ID].isin(set(model_ids))]
    frame, draws = unique_kernel_predictions(data, predictor, nodes[D.KERNEL_ID], n_draws)
    pos = frame.index.get_indexer(nodes[D.KERNEL_ID])
    out = {}
    for mid, rows in nodes.groupby(D.MODEL_ID).indices.items():
        p = pos[rows]
        sums = draws[p].sum(axis=0)
        out[mid] = (frame[PRED_MS].to_numpy()[p].sum(), *np.percentile(sums, [10, 90]))
    return pd.DataFrame.from_dict(out, orient="index", columns=[SUM_PRED_MS, SUM_LOW_MS, SUM_HIGH_MS])


def measured_sum(data: D.DeviceData, target: str, model_ids: Iterable[str]) -> pd.Series:
    """Per model, the measured kernel sum of a target (what calibration is fitted on with calibrate_on=measured)."""
    sums = D.model_sums(data).set_index(D.MODEL_ID)
    return sums.loc[list(model_ids), D.SUM_COLUMNS[target]]


def fit_predictor(data: D.DeviceData, target: str, model_ids: Iterable[str], make: MakePredictor) -> KernelPredictor:
    """A predictor fitted on the target's measured kernels of `model_ids`."""
    y = D.kernel_targets(data, target, model_ids)
    return make().fit([data.specs[k] for k in y.index], y.to_numpy())


# ---------------------------------------------------------------------- leave-family-out


def fold_frames(data: D.DeviceData, target: str, held: str, make: MakePredictor,
                calibrate_on: str = "measured") -> tuple[pd.DataFrame, pd.DataFrame]:
    """One fold: train without family `held`; model rows (per calibration candidate) and unseen-kernel rows."""
    models = data.models
    train_ids = models.loc[models[D.FAMILY] != held, D.MODEL_ID]
    test = models[models[D.FAMILY] == held].set_index(D.MODEL_ID)
    predictor = fit_predictor(data, target, train_ids, make)
    fit_sums = (measured_sum(data, target, train_ids) if calibrate_on == "measured"
                else model_predictions(data, predictor, train_ids)[SUM_PRED_MS])
    train = models.set_index(D.MODEL_ID).loc[train_ids]
    fit_sums = fit_sums.reindex(train.index)
    preds = model_predictions(data, predictor, test.index)
    rows = []
    for form, fitter in CANDIDATES:
        cal = fit_calibration(fit_sums.to_numpy(), train[D.N_KERNELS], train[D.MEASURED_MS], form, fitter)
        part = test[[D.FAMILY, D.MEASURED_MS, D.N_KERNELS]].join(preds)
        part[PRED_MS] = cal.apply(part[SUM_PRED_MS], part[D.N_KERNELS])
        rows.append(part.assign(**{CALIBRATION: cal.name, "alpha": cal.alpha, "beta": cal.beta, "gamma": cal.gamma}))
    model_rows = pd.concat(rows).reset_index().assign(**{TARGET: target, SPLIT: HELD_OUT, FOLD: held})
    return model_rows, unseen_kernels(data, target, predictor, train_ids, test.index, held)


def unseen_kernels(data: D.DeviceData, target: str, predictor: KernelPredictor, train_ids: Iterable[str],
                   test_ids: Iterable[str], held: str) -> pd.DataFrame:
    """Held-out kernels the fold's predictor never saw: measured vs predicted, with key and source."""
    seen = set(D.kernel_targets(data, target, train_ids).index)
    y = D.kernel_targets(data, target, test_ids)
    y = y[~y.index.isin(seen)]
    if y.empty:
        return pd.DataFrame(columns=[D.KERNEL_ID, D.OP_TYPE, KEY, SOURCE, Y_MS, PRED_MS, TARGET, FOLD])
    frame, _ = unique_kernel_predictions(data, predictor, y.index, n_draws=1)
    frame[D.OP_TYPE] = [data.specs[k].op_type for k in frame.index]
    frame[Y_MS] = y
    return frame.reset_index().assign(**{TARGET: target, FOLD: held})


def leave_family_out(data: D.DeviceData, target: str, make: MakePredictor, calibrate_on: str = "measured",
                     progress: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every family held out in turn: (model rows for every calibration candidate, unseen-kernel rows)."""
    models, kernels = [], []
    for fam in data.families:
        if progress:
            progress(f"{target}: holding out {fam}")
        m, k = fold_frames(data, target, fam, make, calibrate_on)
        models.append(m)
        kernels.append(k)
    return pd.concat(models, ignore_index=True), pd.concat([k for k in kernels if len(k)], ignore_index=True)


def in_sample(data: D.DeviceData, target: str, predictor: KernelPredictor, calibration: Calibration) -> pd.DataFrame:
    """Model rows of the final predictor on its own training models (split `train`)."""
    preds = model_predictions(data, predictor, data.models[D.MODEL_ID])
    part = data.models.set_index(D.MODEL_ID)[[D.FAMILY, D.MEASURED_MS, D.N_KERNELS]].join(preds)
    part[PRED_MS] = calibration.apply(part[SUM_PRED_MS], part[D.N_KERNELS])
    return part.reset_index().assign(**{CALIBRATION: calibration.name, "alpha": calibration.alpha,
                                        "beta": calibration.beta, "gamma": calibration.gamma, TARGET: target,
                                        SPLIT: TRAIN, FOLD: ""})


def candidate_scores(cv_models: pd.DataFrame) -> pd.DataFrame:
    """Held-out metrics of every (target, calibration) candidate, best RMSPE first."""
    held = cv_models[cv_models[SPLIT] == HELD_OUT]
    return grouped_metrics(held, [TARGET, CALIBRATION], D.MEASURED_MS, PRED_MS).sort_values("rmspe")


# ---------------------------------------------------------------------- FLOPs baselines


def model_costs(data: D.DeviceData) -> pd.DataFrame:
    """Per model: total FLOPs and bytes moved over its nodes (index model_id)."""
    ids = list(data.specs)
    costs = F.cost_frame([data.specs[k] for k in ids]).set_index(pd.Index(ids, name=D.KERNEL_ID))
    nodes = data.nodes.join(costs[[FLOPS, BYTES]], on=D.KERNEL_ID)
    return nodes.groupby(D.MODEL_ID)[[FLOPS, BYTES]].sum()


def baseline_lofo(data: D.DeviceData) -> pd.DataFrame:
    """Held-out predictions of linear fits of model latency on FLOPs, and on FLOPs + bytes (relative LS)."""
    m = data.models.set_index(D.MODEL_ID).join(model_costs(data))
    out = m[[D.FAMILY, D.MEASURED_MS, FLOPS, BYTES]].rename(columns={FLOPS: MODEL_FLOPS, BYTES: MODEL_BYTES})
    for name, cols in BASELINES.items():
        out[name] = np.nan
        for fam in data.families:
            tr, te = m[m[D.FAMILY] != fam], m[D.FAMILY] == fam
            out.loc[te, name] = _linear_predict(tr, m[te], cols)
    return out.reset_index()


def _linear_predict(train: pd.DataFrame, test: pd.DataFrame, cols: tuple[str, ...]) -> np.ndarray:
    y = train[D.MEASURED_MS].to_numpy()
    X = np.column_stack([train[c].to_numpy() for c in cols] + [np.ones(len(train))])
    coef = np.linalg.lstsq(X / y[:, None], np.ones_like(y), rcond=None)[0]
    Xt = np.column_stack([test[c].to_numpy() for c in cols] + [np.ones(len(test))])
    return Xt @ coef


def baseline_scores(baselines: pd.DataFrame) -> pd.DataFrame:
    """Held-out metrics of each baseline, one row per baseline."""
    return pd.DataFrame([{"baseline": name, **metrics(baselines[D.MEASURED_MS], baselines[name])}
                         for name in BASELINES])


# ---------------------------------------------------------------------- the four-way ratio table


def ratio_table(data: D.DeviceData, cv_models: pd.DataFrame, target: str, calibration: str) -> pd.DataFrame:
    """Per model: measured latency, each kernel-sum source and the predictions, and each as a ratio to measured.

    Sources: sum of ORT kernel_time, sum of in-model spans, sum of standalone warm / cold (measured),
    sum predicted (held-out), calibrated held-out, and calibrated in-sample (train).
    """
    sums = D.model_sums(data).set_index(D.MODEL_ID)
    sel = cv_models[(cv_models[TARGET] == target) & (cv_models[CALIBRATION] == calibration)]
    held = sel[sel[SPLIT] == HELD_OUT].set_index(D.MODEL_ID)
    train = sel[sel[SPLIT] == TRAIN].set_index(D.MODEL_ID)
    t = sums[[D.FAMILY, D.MEASURED_MS, D.N_KERNELS, *D.SUM_COLUMNS.values()]].copy()
    t["sum_pred_held_out_ms"] = held[SUM_PRED_MS]
    t["calibrated_held_out_ms"] = held[PRED_MS]
    t["calibrated_train_ms"] = train[PRED_MS]
    for col in [*D.SUM_COLUMNS.values(), "sum_pred_held_out_ms", "calibrated_held_out_ms", "calibrated_train_ms"]:
        t[col.replace("_ms", "_ratio")] = t[col] / t[D.MEASURED_MS]
    return t.reset_index().sort_values([D.FAMILY, D.MODEL_ID]).reset_index(drop=True)


SOURCE_KIND = {"sum_pred_held_out_ms": HELD_OUT, "calibrated_held_out_ms": HELD_OUT, "calibrated_train_ms": TRAIN}


def ratio_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per source and scope (all models / zoo families / exported models): mean and median ratio to the
    measured latency, RMSPE, ±5 % and ±10 % accuracy; `split` says measured, held_out or train."""
    rows = []
    scopes = {"all": table, "zoo": table[table[D.FAMILY] != "exported"], "exported": table[table[D.FAMILY] == "exported"]}
    for col in [c for c in table.columns if c.endswith("_ratio")]:
        src = col[: -len("_ratio")] + "_ms"
        for scope, t in scopes.items():
            if len(t):
                rows.append({"source": src, SPLIT: SOURCE_KIND.get(src, "measured"), "scope": scope,
                             **metrics(t[D.MEASURED_MS], t[src])})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- the evaluation of a trained predictor


@dataclass(frozen=True)
class Evaluation:
    """Everything `hase evaluate` reports for one device's predictor, as DataFrames plus headline numbers."""

    device: str
    target: str
    calibration: str
    models: pd.DataFrame
    summary: pd.DataFrame
    candidates: pd.DataFrame
    baselines: pd.DataFrame
    baseline_scores: pd.DataFrame
    kernels: pd.DataFrame
    families: pd.DataFrame
    headline: dict[str, Any] = field(default_factory=dict)


def evaluate_predictor(store_path: str | Path, predictor_path: str | Path, target: str | None = None) -> Evaluation:
    """The evaluation tables of a trained predictor against the store's measurements (no retraining).

    Held-out figures come from the leave-family-out run `hase train` stored next to the forests
    (cv_models.csv, cv_kernels.csv, baselines.csv); measured sums come from the store.
    """
    from hase.predict.predictor import read_manifest

    root = Path(predictor_path)
    manifest = read_manifest(root)
    data = D.load_device_data(store_path, manifest["device"])
    target = target or manifest["default_target"]
    if target not in manifest["targets"]:
        raise HaseError(f"{root} has no evaluation of target {target!r}: it has {sorted(manifest['targets'])}")
    cal = manifest["targets"][target]["calibration"]["name"]
    cv_models = pd.read_csv(root / "cv_models.csv")
    cv_kernels = pd.read_csv(root / "cv_kernels.csv")
    baselines = pd.read_csv(root / "baselines.csv")
    table = ratio_table(data, cv_models, target, cal)
    held = table.dropna(subset=["calibrated_held_out_ms"])
    kern = cv_kernels[cv_kernels[TARGET] == target]
    by_key = grouped_metrics(kern, KEY, Y_MS, PRED_MS).sort_values("rmse_ms", ascending=False)
    fams = grouped_metrics(held, D.FAMILY, D.MEASURED_MS, "calibrated_held_out_ms")
    bscores = baseline_scores(baselines)
    hm = metrics(held[D.MEASURED_MS], held["calibrated_held_out_ms"])
    headline = {"device": data.device, "target": target, "calibration": cal, "n_models": len(table),
                "n_families": len(data.families), "held_out": hm,
                "held_out_exported": metrics(*_exported(held)),
                "train": metrics(table[D.MEASURED_MS], table["calibrated_train_ms"]),
                "baselines": bscores.set_index("baseline").to_dict("index"), "kernels_held_out": metrics(kern[Y_MS], kern[PRED_MS]),
                "calibration_coefficients": {k: manifest["targets"][target]["calibration"][k] for k in ("alpha", "beta", "gamma")},
                "targets_met": {"acc10_ge_90": hm["acc10"] >= 0.90, "rmspe_le_8": hm["rmspe"] <= 8.0}}
    return Evaluation(data.device, target, cal, table, ratio_summary(table), candidate_scores(cv_models), baselines,
                      bscores, by_key, fams, headline)


def _exported(held: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    ex = held[held[D.FAMILY] == "exported"]
    return ex[D.MEASURED_MS], ex["calibrated_held_out_ms"]
