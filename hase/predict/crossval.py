"""Leave-family-out cross-validation: fit predictors without a model family, predict it, calibrate.

Held-out means leave-family-out: each model family in turn is removed from training (its kernels'
measurements and its models' latencies), predicted, and scored, so a family is never judged by a
predictor that saw it. Rows measured on a busy host are dropped or down-weighted in every fit as the
`BusyPolicy` says (`hase.predict.trust`; none given: every row weighs 1); scoring uses every model.
Training uses these folds to choose the target and calibration; evaluation reports them. Two long-format
frames come out, with the column names below:

- model rows:  model_id, family, measured_ms, n_kernels, sum_pred_ms, sum_low_ms, sum_high_ms, pred_ms,
               calibration, alpha, beta, gamma, delta, target, split (held_out | train), fold (the held-out family);
               a saved predictor's cv_models.csv leaves out sum_low_ms and sum_high_ms (`SAVED_WITHOUT`)
- kernel rows: kernel_id, key, source, pred_ms, op_type, y_ms, target, fold (kernels the fold never saw)
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from hase.predict import dataset, residency
from hase.predict.calibration import BALANCES, CANDIDATES, Calibration, fit_calibration, size_balance
from hase.predict.metrics import grouped_metrics, rmspe
from hase.predict.predictor import KEY, PRED_MS, SOURCE, KernelPredictor
from hase.predict.trust import KEEP, BusyPolicy, model_weights, training_rows
from hase.zoo import families as zoo_families
from hase.zoo.blocks import is_sampled

TARGET, SPLIT, CALIBRATION, FOLD = "target", "split", "calibration", "fold"
HELD_OUT, TRAIN = "held_out", "train"
SUM_PRED_MS, SUM_LOW_MS, SUM_HIGH_MS = "sum_pred_ms", "sum_low_ms", "sum_high_ms"
SAVED_WITHOUT = (SUM_LOW_MS, SUM_HIGH_MS)  # no reader needs the trees' spread of held-out sums, and the two columns
# were a quarter of the shipped predictors' cv_models.csv (10 calibration candidates x 3 targets x 183 models)
Y_MS = "y_ms"
ALPHA, BETA, GAMMA, DELTA = "alpha", "beta", "gamma", "delta"
MakePredictor = Callable[[], KernelPredictor]
Progress = Callable[[str], None]


def scored_families(data: dataset.DeviceData) -> list[str]:
    """The families leave-family-out holds out and scores: every family but the sampled blocks (kernel data for
    every fold's forests, never held out, never a calibration point, never scored: one-kernel blocks, not models
    users run)."""
    return [f for f in data.families if not is_sampled(f)]


def real_families(data: dataset.DeviceData) -> list[str]:
    """The scored families whose models a zoo generator did not write (exported models, dev-set families)."""
    generated = {f.name for f in zoo_families()}
    return [f for f in scored_families(data) if f not in generated]


def scored_ids(data: dataset.DeviceData, model_ids: Iterable[str]) -> list[str]:
    """`model_ids` without the sampled blocks (what calibration is fitted on and scores are computed over)."""
    fam = data.models.set_index(dataset.MODEL_ID)[dataset.FAMILY]
    return [m for m in model_ids if not is_sampled(str(fam[m]))]


def unique_kernel_predictions(data: dataset.DeviceData, predictor: KernelPredictor, kernel_ids: Iterable[str],
                              n_draws: int = 64) -> tuple[pd.DataFrame, NDArray[np.float64]]:
    """Predictions for a set of kernels (index kernel_id) and their per-tree draws, batched per forest."""
    ids = list(dict.fromkeys(kernel_ids))
    frame, draws = predictor.predict_detail([data.specs[k] for k in ids], n_draws)
    frame.index = pd.Index(ids, name=dataset.KERNEL_ID)
    return frame, draws


def model_predictions(data: dataset.DeviceData, predictor: KernelPredictor, model_ids: Iterable[str],
                      n_draws: int = 64, streaming: residency.Streaming = residency.NO_STREAMING) -> pd.DataFrame:
    """Per model: predicted kernel sum and the p10/p90 of its per-tree sums (index model_id); with `streaming`, each
    node with its weight streaming (`hase.predict.residency`), as `compose` predicts a model."""
    nodes = data.nodes[data.nodes[dataset.MODEL_ID].isin(set(model_ids))]
    frame, draws = unique_kernel_predictions(data, predictor, nodes[dataset.KERNEL_ID], n_draws)
    pos = frame.index.get_indexer(pd.Index(nodes[dataset.KERNEL_ID]))
    pred = frame[PRED_MS].to_numpy()
    kernel_ids = nodes[dataset.KERNEL_ID].to_numpy()
    out = {}
    for mid, rows in nodes.groupby(dataset.MODEL_ID).indices.items():
        p = pos[rows]
        node_pred, node_draws = pred[p], draws[p]
        if streaming.kappa and data.peaks is not None:
            stream = residency.stream_ms([data.specs[k] for k in kernel_ids[rows]], data.peaks)
            node_pred = streaming.apply(node_pred, stream)
            node_draws = streaming.apply(node_draws, stream[:, None])
        sums = node_draws.sum(axis=0)
        out[mid] = (node_pred.sum(), *np.percentile(sums, [10, 90]))
    return pd.DataFrame.from_dict(out, orient="index", columns=[SUM_PRED_MS, SUM_LOW_MS, SUM_HIGH_MS])


def measured_sum(data: dataset.DeviceData, target: str, model_ids: Iterable[str]) -> pd.Series:
    """Per model, the measured kernel sum of a target (what calibration is fitted on with calibrate_on=measured)."""
    sums = dataset.model_sums(data).set_index(dataset.MODEL_ID)
    return sums.loc[list(model_ids), dataset.SUM_COLUMNS[target]]


def calibration_sums(data: dataset.DeviceData, target: str, predictor: KernelPredictor, model_ids: list[str],
                     calibrate_on: str) -> pd.Series:
    """The kernel sums a calibration is fitted on, in the order of `model_ids`: measured, or the predictor's."""
    sums = (measured_sum(data, target, model_ids) if calibrate_on == "measured"
            else model_predictions(data, predictor, model_ids)[SUM_PRED_MS])
    return sums.reindex(pd.Index(model_ids, name=dataset.MODEL_ID))


def fit_predictor(data: dataset.DeviceData, target: str, model_ids: Iterable[str], make: MakePredictor,
                  busy: BusyPolicy = KEEP) -> KernelPredictor:
    """A predictor fitted on the target's measured kernels of `model_ids`, suspect rows as `busy` says."""
    y, w, _ = training_rows(data, target, busy, model_ids)
    specs, predictor = [data.specs[k] for k in y.index], make()
    if bool((w == 1.0).all()):
        return predictor.fit(specs, y.to_numpy())
    return predictor.fit(specs, y.to_numpy(), sample_weight=w.to_numpy())


def calibrated_rows(part: pd.DataFrame, cal: Calibration) -> pd.DataFrame:
    """Model rows (index model_id, with sum_pred_ms and n_kernels) with their calibrated pred_ms and coefficients."""
    out = part.copy()
    out[PRED_MS] = cal.apply(out[SUM_PRED_MS], out[dataset.N_KERNELS])
    return tag(out, {CALIBRATION: cal.name, ALPHA: cal.alpha, BETA: cal.beta, GAMMA: cal.gamma, DELTA: cal.delta})


def tag(frame: pd.DataFrame, values: dict[str, str | float]) -> pd.DataFrame:
    """`frame` with one constant column per item of `values`, in order (e.g. target, split, fold)."""
    out = frame.copy()
    for col, value in values.items():
        out[col] = value
    return out


def fold_frames(data: dataset.DeviceData, target: str, held: str, make: MakePredictor,
                calibrate_on: str = "measured", busy: BusyPolicy = KEEP,
                streaming: residency.Streaming = residency.NO_STREAMING,
                balance: str = "none", calibration_busy: BusyPolicy | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One fold: train without family `held`; model rows (per calibration candidate, fitted with
    `calibration_weights` under `calibration_busy`, default `busy`; the held-out models' nodes with their weight
    `streaming`) and unseen-kernel rows."""
    models = data.models
    train_ids = list(models.loc[models[dataset.FAMILY] != held, dataset.MODEL_ID])
    test = models[models[dataset.FAMILY] == held].set_index(dataset.MODEL_ID)
    predictor = fit_predictor(data, target, train_ids, make, busy)  # sampled blocks' kernels included
    cal_ids = scored_ids(data, train_ids)
    fit_sums = calibration_sums(data, target, predictor, cal_ids, calibrate_on)
    train = models.set_index(dataset.MODEL_ID).loc[cal_ids]
    weight = calibration_weights(data, busy if calibration_busy is None else calibration_busy, cal_ids, balance)
    part = test[[dataset.FAMILY, dataset.MEASURED_MS, dataset.N_KERNELS]].join(
        model_predictions(data, predictor, test.index, streaming=streaming))
    rows = [calibrated_rows(part, fit_calibration(fit_sums, train[dataset.N_KERNELS], train[dataset.MEASURED_MS],
                                                  form, fitter, weight))
            for form, fitter in CANDIDATES]
    model_rows = tag(pd.concat(rows).reset_index(), {TARGET: target, SPLIT: HELD_OUT, FOLD: held})
    return model_rows, unseen_kernels(data, target, predictor, train_ids, test.index, held)


def calibration_weights(data: dataset.DeviceData, busy: BusyPolicy, model_ids: Iterable[str],
                        balance: str = "none") -> pd.Series:
    """Each calibration model's weight, in the order of `model_ids` (index model_id): its trust weight (busy host,
    noisy: `hase.predict.trust`), times its size balance (`calibration.size_balance` of the measured latency) when
    `balance` is "size"."""
    if balance not in BALANCES:
        raise ValueError(f"unknown calibration balance {balance!r}: {list(BALANCES)}")
    ids = list(model_ids)
    weight = model_weights(data, busy, ids)
    if balance == "size":
        measured = data.models.set_index(dataset.MODEL_ID).loc[ids, dataset.MEASURED_MS]
        weight = weight * size_balance(measured.to_numpy())
    return weight


def unseen_kernels(data: dataset.DeviceData, target: str, predictor: KernelPredictor, train_ids: Iterable[str],
                   test_ids: Iterable[str], held: str) -> pd.DataFrame:
    """Held-out kernels the fold's predictor never saw: measured vs predicted, with key and source."""
    seen = set(dataset.kernel_targets(data, target, train_ids).index)
    y = dataset.kernel_targets(data, target, test_ids)
    y = y[~y.index.isin(seen)]
    if y.empty:
        return pd.DataFrame(columns=[dataset.KERNEL_ID, dataset.OP_TYPE, KEY, SOURCE, Y_MS, PRED_MS, TARGET, FOLD])
    frame, _ = unique_kernel_predictions(data, predictor, y.index, n_draws=1)
    frame[dataset.OP_TYPE] = [data.specs[k].op_type for k in frame.index]
    frame[Y_MS] = y
    return tag(frame.reset_index(), {TARGET: target, FOLD: held})


def leave_family_out(data: dataset.DeviceData, target: str, make: MakePredictor, calibrate_on: str = "measured",
                     progress: Progress | None = None, busy: BusyPolicy = KEEP,
                     streaming: residency.Streaming = residency.NO_STREAMING,
                     balance: str = "none",
                     calibration_busy: BusyPolicy | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every family held out in turn: (model rows for every calibration candidate, unseen-kernel rows)."""
    models, kernels = [], []
    families = scored_families(data)
    for i, fam in enumerate(families, 1):
        if progress:
            progress(f"{target}: holding out {fam} (fold {i}/{len(families)})"
                     + (f", {streaming.describe()}" if streaming.kappa else ""))
        m, k = fold_frames(data, target, fam, make, calibrate_on, busy, streaming, balance, calibration_busy)
        models.append(m)
        kernels.append(k)
    return pd.concat(models, ignore_index=True), pd.concat([k for k in kernels if len(k)], ignore_index=True)


def in_sample(data: dataset.DeviceData, target: str, predictor: KernelPredictor,
              calibration: Calibration) -> pd.DataFrame:
    """Model rows of the final predictor on its own training models (split `train`)."""
    ids = scored_ids(data, data.models[dataset.MODEL_ID])
    preds = model_predictions(data, predictor, ids, streaming=calibration.streaming)
    part = data.models.set_index(dataset.MODEL_ID).loc[ids,
                                                       [dataset.FAMILY, dataset.MEASURED_MS,
                                                        dataset.N_KERNELS]].join(preds)
    return tag(calibrated_rows(part, calibration).reset_index(), {TARGET: target, SPLIT: TRAIN, FOLD: ""})


def held_out_streaming(data: dataset.DeviceData, kernels: pd.DataFrame) -> residency.Streaming:
    """The weight streaming (`hase.predict.residency.fit_streaming`) of a target's unseen-kernel rows: each held-out
    kernel's prediction against its measured time, its streaming time the mean over its nodes in the models of
    the family held out (none where the store has no host peaks)."""
    forms = held_out_streaming_forms(data, kernels)
    return forms[0] if forms else residency.NO_STREAMING


def held_out_streaming_forms(data: dataset.DeviceData, kernels: pd.DataFrame) -> list[residency.Streaming]:
    """As `held_out_streaming`, the best kappa of each form (`residency.fit_streaming_forms`), best fit first."""
    if data.peaks is None or kernels.empty:
        return []
    nodes = data.nodes[[dataset.MODEL_ID, dataset.KERNEL_ID]].copy()
    nodes[FOLD] = nodes[dataset.MODEL_ID].map(data.models.set_index(dataset.MODEL_ID)[dataset.FAMILY])
    nodes = nodes[nodes[FOLD].isin(set(kernels[FOLD]))]
    streams = []
    for _, rows in nodes.groupby(dataset.MODEL_ID).indices.items():
        part = nodes.iloc[rows]
        streams.append(part.assign(stream=residency.stream_ms([data.specs[k] for k in part[dataset.KERNEL_ID]],
                                                              data.peaks)))
    per_kernel = pd.concat(streams).groupby([FOLD, dataset.KERNEL_ID])["stream"].mean()
    stream = per_kernel.reindex(pd.MultiIndex.from_frame(kernels[[FOLD, dataset.KERNEL_ID]])).fillna(0.0)
    return residency.fit_streaming_forms(kernels[PRED_MS], kernels[Y_MS], stream.to_numpy())


RMSPE_BY_SIZE = "rmspe_by_size"  # RMSPE with the models weighted by calibration.size_balance (every half-decade of
# latency counting alike): what `hase train` chooses a calibration by under calibration_balance = "size"


def candidate_scores(cv_models: pd.DataFrame) -> pd.DataFrame:
    """Held-out metrics of every (target, calibration) candidate, best RMSPE first, with RMSPE_BY_SIZE."""
    held = cv_models[cv_models[SPLIT] == HELD_OUT]
    scores = grouped_metrics(held, [TARGET, CALIBRATION], dataset.MEASURED_MS, PRED_MS)
    by_size = {key: _rmspe_by_size(g[dataset.MEASURED_MS].to_numpy(), g[PRED_MS].to_numpy())
               for key, g in held.groupby([TARGET, CALIBRATION])}
    scores[RMSPE_BY_SIZE] = [by_size[k] for k in zip(scores[TARGET], scores[CALIBRATION], strict=True)]
    return scores.sort_values("rmspe")


def _rmspe_by_size(y: NDArray[np.float64], yhat: NDArray[np.float64]) -> float:
    """RMSPE (%) with each model weighted by `size_balance` of its measured latency; non-finite pairs dropped."""
    ok = np.isfinite(y) & np.isfinite(yhat) & (y > 0)
    return rmspe(y[ok], yhat[ok], size_balance(y[ok]))
