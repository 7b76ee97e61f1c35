"""`hase train`: measurements of one device -> cross-validated, calibrated kernel predictors on disk.

Steps: read the device's measurements; for every target, hold out each model family in turn
(`hase.predict.crossval`) to score every calibration candidate; pick the default target and each
target's calibration by held-out RMSPE; fit the final forests on all families; fit the FLOPs
baselines; for a one-thread CPU device whose store also holds the host's spans at more threads, fit the thread model
(`hase.predict.store_threads`); write the predictor directory (.npz arrays + JSON per target, CSV tables of the
folds, the thread model, manifest.json).
Every forest drops or down-weights the rows measured on a busy host (or noisy) as `[training] busy` says
(`hase.predict.trust`), the calibration its models as `calibration_busy` says (by default it weighs them alike:
it reads each model's quickest run over passes minutes apart); the manifest's `training_data.busy` counts what
that did.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hase.errors import HaseError
from hase.files import load_toml
from hase.measure.types import HostPeaks
from hase.predict import crossval, dataset, provenance, residency, store_threads, trust
from hase.predict.baselines import baseline_lofo, baseline_scores
from hase.predict.bundle import (
    BASELINES_CSV,
    CV_KERNELS_CSV,
    CV_MODELS_CSV,
    feature_schema,
    library_versions,
    read_manifest,
    save_bundle,
    schema_sha,
)
from hase.predict.calibration import BALANCES, FORMS, Calibration, fit_calibration
from hase.predict.manifest import CalibrationEntry, Manifest, Records, TargetEntry, TrainingData, device_meta_from_dict
from hase.predict.metrics import grouped_metrics, score
from hase.predict.predictor import KEY, PRED_MS, TREE_MEANS, KernelPredictor

EVALUATION = "leave-family-out: each family held out in turn (kernels and models), then scored"

log = logging.getLogger(__name__)


CHOOSE_ON = ("all", "real", "balanced")  # what picks the default target and calibrations (`_choice_set`)
CALIBRATION_BUSY = ("keep", "follow")  # [training] calibration_busy: busy/noisy models weigh 1, or as `busy` says


@dataclass(frozen=True)
class TrainConfig:
    """The [training] table of configs/predictor.toml plus the forest tables."""

    targets: tuple[str, ...] = dataset.TARGETS
    save_targets: str = "default"
    log_target: bool = True
    min_samples: int = 8
    random_state: int = 0
    n_jobs: int = 1
    calibrate_on: str = "measured"
    cv_tree_scale: float = 0.3
    tree_scale: float = 1.0
    base: bool = True
    weight_power: float = 0.0
    busy: str = "drop"
    busy_weight: float = 0.2
    family_exclude: tuple[str, ...] = ()
    tree_mean: str = "arithmetic"
    roofline: bool = False
    clamp: bool = True
    band_margin: float = 2.0
    choose_on: str = "all"
    min_real_models: int = 20
    weight_streaming: bool = True  # the span target's kernels pay for streaming weights a model's tensors push out
    # of cache, with a kappa fitted on held-out spans (`hase.predict.residency`); false: kappa 0
    calibration_forms: tuple[str, ...] = ("raw", "scale", "per_kernel")  # the forms the choice may take (every
    # form of calibration.FORMS is still scored and reported)
    thread_model: bool = True  # a one-thread device whose store also holds the host's spans at more threads gets
    # its thread model trained beside its forests (`hase.predict.store_threads`; `hase predict --threads` uses it)
    model_latency: str = "quickest"  # what a model's measured latency is in training (dataset.LATENCIES): its
    # quickest single run over its passes, or "robust", the minimum of its block medians
    calibration_busy: str = "keep"  # how the calibration weighs a model flagged busy or noisy (CALIBRATION_BUSY):
    # "keep": like any other (its quickest run over passes minutes apart is what the fit reads, and the flag is the
    # first pass's canary check); "follow": as `busy` says for the forests (busy_weight)
    calibration_balance: str = "none"  # "size": every half-decade of model latency weighs alike in the calibration's
    # fit and in its choice (crossval.calibration_weights, RMSPE_BY_SIZE); "none": every model alike
    forest: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def predictor(self, cv: bool, peaks: HostPeaks | None = None, target: str = "warm") -> KernelPredictor:
        """A fresh, unfitted predictor with these settings (smaller forests inside cross-validation); with the
        host's `peaks`, its kernels have a roofline and (with `clamp`) a band (`hase.predict.roofline`), whose
        overhead is a node's for the span target and a session.run's for the standalone ones."""
        return KernelPredictor(self.forest, self.log_target, self.min_samples,
                               self.cv_tree_scale if cv else self.tree_scale, self.random_state, self.n_jobs,
                               self.aliases, self.base, self.weight_power, self.family_exclude,
                               self.tree_mean, peaks.to_dict() if peaks is not None else None, self.roofline,
                               self.band_margin, self.clamp, "node" if target == "span" else "call")

    def busy_policy(self) -> trust.BusyPolicy:
        """What training does with rows measured on a busy host or noisy (`hase.predict.trust`)."""
        return trust.BusyPolicy(self.busy, self.busy_weight)

    def calibration_policy(self) -> trust.BusyPolicy:
        """What the calibration does with models measured on a busy host or noisy: `calibration_busy`."""
        return trust.KEEP if self.calibration_busy == "keep" else self.busy_policy()


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read configs/predictor.toml; unknown keys and bad values are HaseErrors naming the fix."""
    raw = load_toml(path, "predictor config")
    training = dict(raw.get("training", {}))
    known = {f.name for f in dataclasses.fields(TrainConfig)} - {"forest", "aliases"}
    unknown = set(training) - known
    if unknown:
        raise HaseError(f"{path}: unknown [training] keys {sorted(unknown)}: use {sorted(known)}")
    training.update({k: v for k, v in overrides.items() if v is not None})
    training["targets"] = tuple(dataset.check_target(t) for t in training.get("targets", dataset.TARGETS))
    exclude = training.get("family_exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(k, str) for k in exclude):
        raise HaseError(f"{path}: [training] family_exclude must be a list of op types, e.g. [\"Resize\"]")
    training["family_exclude"] = tuple(exclude)
    forms = training.get("calibration_forms", list(TrainConfig.calibration_forms))
    if not isinstance(forms, (list, tuple)) or not forms or not set(forms) <= set(FORMS):
        raise HaseError(f"{path}: [training] calibration_forms must be a non-empty list of {list(FORMS)}, "
                        f"not {forms!r}")
    training["calibration_forms"] = tuple(forms)
    cfg = TrainConfig(**training, forest=raw.get("forest", {}), aliases=raw.get("keys", {}))
    if cfg.save_targets not in ("default", "all"):
        raise HaseError(f"{path}: save_targets must be 'default' or 'all', not {cfg.save_targets!r}")
    if cfg.tree_mean not in TREE_MEANS:
        raise HaseError(f"{path}: [training] tree_mean must be one of {list(TREE_MEANS)}, not {cfg.tree_mean!r}")
    if cfg.choose_on not in CHOOSE_ON:
        raise HaseError(f"{path}: [training] choose_on must be one of {list(CHOOSE_ON)}, not {cfg.choose_on!r}")
    if cfg.model_latency not in dataset.LATENCIES:
        raise HaseError(f"{path}: [training] model_latency must be one of {list(dataset.LATENCIES)}, "
                        f"not {cfg.model_latency!r}")
    if cfg.calibration_busy not in CALIBRATION_BUSY:
        raise HaseError(f"{path}: [training] calibration_busy must be one of {list(CALIBRATION_BUSY)}, "
                        f"not {cfg.calibration_busy!r}")
    if cfg.calibration_balance not in BALANCES:
        raise HaseError(f"{path}: [training] calibration_balance must be one of {list(BALANCES)}, "
                        f"not {cfg.calibration_balance!r}")
    if cfg.calibrate_on not in ("measured", "predicted"):
        raise HaseError(f"{path}: calibrate_on must be 'measured' or 'predicted', not {cfg.calibrate_on!r}")
    _check_values(cfg, path)
    try:
        cfg.busy_policy()
    except HaseError as exc:
        raise HaseError(f"{path}: [training] {exc}") from None
    return cfg


# value checks of the config, before any training: name -> (accepted types, lowest, highest)
_TRAINING_VALUES: dict[str, tuple[tuple[type, ...], float, float]] = {
    "log_target": ((bool,), 0, 1), "base": ((bool,), 0, 1), "min_samples": ((int,), 1, 1e9),
    "roofline": ((bool,), 0, 1), "clamp": ((bool,), 0, 1), "weight_streaming": ((bool,), 0, 1),
    "thread_model": ((bool,), 0, 1),
    "band_margin": ((int, float), 1, 1e6),
    "random_state": ((int,), 0, 2**32 - 1), "n_jobs": ((int,), -1, 4096), "cv_tree_scale": ((int, float), 1e-3, 100),
    "tree_scale": ((int, float), 1e-3, 100), "weight_power": ((int, float), 0, 10),
    "busy_weight": ((int, float), 1e-3, 1), "min_real_models": ((int,), 1, 1e9)}
_FOREST_VALUES: dict[str, tuple[tuple[type, ...], float, float]] = {
    "n_estimators": ((int,), 1, 100_000), "max_depth": ((int,), 1, 10_000), "max_features": ((int, float), 1e-9, 1e6),
    "min_samples_leaf": ((int,), 1, 1e9)}


def _check_values(cfg: TrainConfig, path: str | Path) -> None:
    """Types and ranges of every [training] and [forest.*] value: a HaseError naming the key, not a TypeError later."""
    for key, (types, lo, hi) in _TRAINING_VALUES.items():
        _check_value(getattr(cfg, key), f"[training] {key}", types, lo, hi, path)
    if cfg.n_jobs == 0:
        raise HaseError(f"{path}: [training] n_jobs = 0 is not a number of jobs: use 1 or more, or -1 for all cores")
    if not isinstance(cfg.forest, Mapping):
        raise HaseError(f"{path}: [forest] must hold tables such as [forest.default]")
    for name, table in cfg.forest.items():
        if not isinstance(table, Mapping):
            raise HaseError(f"{path}: [forest.{name}] must be a table of forest settings")
        for key, value in table.items():
            if key in _FOREST_VALUES and not (key == "max_depth" and value is None):
                _check_value(value, f"[forest.{name}] {key}", *_FOREST_VALUES[key], path)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _check_value(value: Any, where: str, types: tuple[type, ...], lo: float, hi: float, path: str | Path) -> None:
    if bool in types:
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, (int, float)) and isinstance(value, types) and not isinstance(value, bool) \
            and lo <= value <= hi
    if not ok:
        what = "an integer" if types == (int,) else "a number"
        kind = "true or false" if bool in types else f"{what} from {_num(lo)} to {_num(hi)}"
        raise HaseError(f"{path}: {where} = {value!r} is out of range or of the wrong type: use {kind}")


@dataclass(frozen=True)
class TrainResult:
    """What training produced: where, the default target, and the held-out scores behind the choice."""

    device: str
    out_dir: Path
    default_target: str
    chosen_on: str  # how the default target and calibrations were chosen: "all", "real" or "balanced" (_choice_set)
    scores: pd.DataFrame
    baselines: pd.DataFrame
    manifest: Manifest
    wall_s: float


def train(store_path: str | Path, out_root: str | Path, cfg: TrainConfig, device: str | None = None,
          progress: crossval.Progress | None = None) -> TrainResult:
    """Train, cross-validate (leave-family-out) and save the predictors of one device configuration.

    `progress`, when given, is called with a one-line message at the start of every stage once the store's data
    is loaded and checked (each fold of each target, the final forests, the baselines, saving); the library
    itself prints nothing.
    """
    t0 = time.perf_counter()
    data = dataset.load_device_data(store_path, device, cfg.model_latency)
    if len(crossval.scored_families(data)) < 2:
        raise HaseError(f"the store has one model family ({data.families}): leave-family-out evaluation needs two "
                        f"or more; collect more of the zoo with `make collect`")
    held, kernels, streaming = _cross_validate(data, cfg, progress)
    scores = crossval.candidate_scores(held)
    chosen_on, choice = _choice_set(data, cfg, held[held[crossval.CALIBRATION].map(_form).isin(
        cfg.calibration_forms)])
    best = choice.groupby(crossval.TARGET).head(1).set_index(crossval.TARGET)
    default_target = str(best["rmspe"].idxmin())
    finals, entries, train_rows, counts = {}, {}, [], {}
    for target in cfg.targets:
        if progress:
            progress(f"{target}: final forests on all families")
        pred, cal, fit_data = _final(data, target, cfg, str(best.loc[target, crossval.CALIBRATION]))
        if target == "span":
            cal = dataclasses.replace(cal, kappa=streaming.kappa, stream_power=streaming.power)
        counts[target] = trust.training_rows(data, target, cfg.busy_policy())[2]
        finals[target] = pred
        train_rows.append(crossval.in_sample(data, target, pred, cal))
        entries[target] = _target_entry(target, pred, CalibrationEntry(cal, _records(fit_data)), scores, held,
                                        kernels, train_rows[-1])
    threads = store_threads.fit_store_threads(store_path, data.device) if cfg.thread_model else None
    if progress and threads is not None:
        progress(f"thread model: {threads.kernels} kernels of {threads.models} models at 1 and {threads.threads} "
                 f"threads ({threads.partner})")
    if progress:
        progress("FLOPs baselines (leave-family-out)")
    baselines = baseline_lofo(data)
    busy = trust.summary(cfg.busy_policy(), trust.model_counts(data, cfg.calibration_policy()), counts)
    log.debug("%s: rows measured on a busy host or noisy: %s", data.device, busy)
    manifest = dataclasses.replace(_manifest(data, store_path, cfg, default_target, entries, baselines, busy),
                                   threads=threads.describe() if threads is not None else {})
    saved = {t: p for t, p in finals.items() if cfg.save_targets == "all" or t == default_target}
    all_models = pd.concat([held, *train_rows], ignore_index=True).drop(columns=list(crossval.SAVED_WITHOUT))
    if progress:
        progress(f"saving to {Path(out_root) / data.device}")
    out = save_bundle(Path(out_root) / data.device, manifest, saved,
                      {CV_MODELS_CSV: all_models, CV_KERNELS_CSV: kernels, BASELINES_CSV: baselines},
                      threads.model if threads is not None else None)
    return TrainResult(data.device, out, default_target, chosen_on, scores, baseline_scores(baselines),
                       read_manifest(out), time.perf_counter() - t0)  # the manifest as written, verified once


def _cross_validate(data: dataset.DeviceData, cfg: TrainConfig,
                    progress: crossval.Progress | None) -> tuple[pd.DataFrame, pd.DataFrame, residency.Streaming]:
    """Leave-family-out model rows and unseen-kernel rows of every target, each concatenated, and the span
    target's weight streaming (`hase.predict.residency`): each form's kappa fitted on the span's unseen kernels,
    the span folds run again with each, and the form whose held-out models score best kept (its rows), so the
    held-out figures are those of the predictor as it predicts (none: kappa 0). The unseen kernels that stream
    are mostly weight-bound, where adding and a smooth maximum fit alike; the models, whose convolutions and
    GEMMs over many rows also stream, tell them apart (on 56e9708810e3, 2026-11-29, the kernels chose adding with
    kappa 2.4, which put real CNNs over 100 MB 6-15 % slow)."""
    models, kernels, streaming = [], [], residency.NO_STREAMING
    for target in cfg.targets:
        def make(t: str = target) -> KernelPredictor:
            return cfg.predictor(True, data.peaks, t)

        m, k = crossval.leave_family_out(data, target, make, cfg.calibrate_on, progress, cfg.busy_policy(),
                                         balance=cfg.calibration_balance, calibration_busy=cfg.calibration_policy())
        if target == "span" and cfg.weight_streaming:
            tried = [(s, crossval.leave_family_out(data, target, make, cfg.calibrate_on, progress,
                                                   cfg.busy_policy(), s, cfg.calibration_balance,
                                                   cfg.calibration_policy())[0])
                     for s in crossval.held_out_streaming_forms(data, k)]
            if tried:
                streaming, m = min(tried, key=lambda sm: crossval.candidate_scores(sm[1])["rmspe"].min())
        models.append(m)
        kernels.append(k)
    return (pd.concat(models, ignore_index=True), pd.concat([k for k in kernels if len(k)], ignore_index=True),
            streaming)


def _final(data: dataset.DeviceData, target: str, cfg: TrainConfig,
           candidate: str) -> tuple[KernelPredictor, Calibration, pd.DataFrame]:
    """The predictor on all families, its calibration `candidate` (form/fitter) and the calibration's fit data."""
    form, _, fitter = candidate.partition("/")
    pred = crossval.fit_predictor(data, target, list(data.models[dataset.MODEL_ID]),  # the sampled blocks' kernels too
                            lambda: cfg.predictor(False, data.peaks, target), cfg.busy_policy())
    ids = crossval.scored_ids(data,
                              data.models[dataset.MODEL_ID])  # calibration: models users run, not one-kernel blocks
    sums = crossval.calibration_sums(data, target, pred, ids, cfg.calibrate_on)
    m = data.models.set_index(dataset.MODEL_ID).loc[ids]
    weight = crossval.calibration_weights(data, cfg.calibration_policy(), ids, cfg.calibration_balance)
    cal = fit_calibration(sums, m[dataset.N_KERNELS], m[dataset.MEASURED_MS], form, fitter or "none", weight)
    fit = pd.DataFrame({dataset.FAMILY: m[dataset.FAMILY], "sum_ms": sums, dataset.N_KERNELS: m[dataset.N_KERNELS],
                        dataset.MEASURED_MS: m[dataset.MEASURED_MS], trust.WEIGHT: weight})
    fit["fitted_ms"] = cal.apply(fit["sum_ms"], fit[dataset.N_KERNELS])
    fit["residual_pct"] = (fit["fitted_ms"] / fit[dataset.MEASURED_MS] - 1) * 100
    return pred, cal, fit.reset_index()


def _records(frame: pd.DataFrame) -> Records:
    """A table as manifest records, numbers rounded to 6 decimals."""
    return tuple({str(k): v for k, v in row.items()} for row in frame.round(6).to_dict("records"))


def _target_entry(target: str, pred: KernelPredictor, cal: CalibrationEntry, scores: pd.DataFrame,
                  held: pd.DataFrame, kernels: pd.DataFrame, train_rows: pd.DataFrame) -> TargetEntry:
    """A target's manifest entry: its calibration, held-out and in-sample scores, and its forests."""
    mine = held[(held[crossval.TARGET] == target) & (held[crossval.CALIBRATION] == cal.calibration.name)]
    kern = kernels[kernels[crossval.TARGET] == target]
    return TargetEntry(
        doc=dataset.TARGET_DOC[target], calibration=cal,
        calibration_candidates=_records(scores[scores[crossval.TARGET] == target].drop(columns=[crossval.TARGET])),
        held_out=score(mine[dataset.MEASURED_MS], mine[PRED_MS]),
        held_out_by_family=_records(grouped_metrics(mine, dataset.FAMILY, dataset.MEASURED_MS, PRED_MS)),
        held_out_raw_sum=score(mine[dataset.MEASURED_MS], mine[crossval.SUM_PRED_MS]),
        train=score(train_rows[dataset.MEASURED_MS], train_rows[PRED_MS]),
        kernels_held_out=score(kern[crossval.Y_MS], kern[PRED_MS]) if len(kern) else None,
        kernels_held_out_by_key=_records(grouped_metrics(kern, KEY, crossval.Y_MS, PRED_MS)) if len(kern) else (),
        predictor=pred.summary())


def _form(name: str) -> str:
    """The form of a calibration candidate's name ("per_kernel/relative" -> "per_kernel", "raw" -> "raw")."""
    return name.split("/", 1)[0]


def _choice_set(data: dataset.DeviceData, cfg: TrainConfig, held: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """What the default target and each target's calibration are chosen on: per (target, calibration) candidate,
    an `rmspe` column, best first, and the name of the rule used.

    `choose_on = "all"`: RMSPE over every held-out model. With enough real models in the store (`min_real_models`
    of families no zoo generator wrote: exported models, dev-set families), `"real"`: over theirs alone, and
    `"balanced"`: the mean of the real families' RMSPE and the generated families' (101 small zoo models would
    outweigh 74 real ones over all rows, and they track their kernel sums more closely than real graphs do; the
    real ones alone favour an absolute-error fit that is 27 % off on small models). Too few real models: "all".
    Under `calibration_balance = "size"` every RMSPE is `crossval.RMSPE_BY_SIZE`."""
    real = crossval.real_families(data)
    is_real = held[dataset.FAMILY].isin(real)
    n_real = int(data.models[dataset.FAMILY].isin(real).sum())

    def ranked(part: pd.DataFrame) -> pd.DataFrame:
        scores = crossval.candidate_scores(part)
        if cfg.calibration_balance == "size":
            scores["rmspe"] = scores[crossval.RMSPE_BY_SIZE]
        return scores.sort_values("rmspe").reset_index(drop=True)

    if cfg.choose_on == "all" or n_real < cfg.min_real_models:
        return "all", ranked(held)
    if cfg.choose_on == "real" or is_real.all():
        return "real", ranked(held[is_real])
    key = [crossval.TARGET, crossval.CALIBRATION]
    both = [ranked(held[part]).set_index(key)["rmspe"] for part in (is_real, ~is_real)]
    mean = ((both[0] + both[1]) / 2).rename("rmspe").dropna().reset_index()
    return "balanced", mean.sort_values("rmspe").reset_index(drop=True)


def _manifest(data: dataset.DeviceData, store_path: str | Path, cfg: TrainConfig, default_target: str,
              entries: Mapping[str, TargetEntry], baselines: pd.DataFrame, busy: Mapping[str, Any]) -> Manifest:
    """The manifest of a freshly trained device (its file hashes are added when it is saved)."""
    schema = feature_schema()
    return Manifest(
        device=data.device, device_meta=device_meta_from_dict(data.meta), fixed_cost_ms=data.fixed_cost_ms,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), library_versions=library_versions(),
        feature_schema=schema, feature_schema_sha=schema_sha(schema), default_target=default_target,
        training_data=TrainingData(str(store_path), len(data.models), tuple(data.families), len(data.kernels),
                                   len(data.nodes), busy),
        config=dataclasses.asdict(cfg), evaluation=EVALUATION, targets=dict(entries),
        baselines_held_out=_records(baseline_scores(baselines)),
        peaks=data.peaks.to_dict() if data.peaks is not None else None, **_provenance(store_path, data.device))


def _provenance(store_path: str | Path, device: str) -> dict[str, Any]:
    """The measuring machine's fingerprint and speed signature, and the store's noise (`hase.predict.noise`)."""
    host, signature = provenance.store_host(store_path, device)
    return {"host": host, "signature": signature, "noise": provenance.store_noise(store_path, device)}
