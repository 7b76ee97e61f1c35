"""`hase train`: measurements of one device -> evaluated, calibrated kernel predictors on disk.

Steps: read the device's measurements; for every target, hold out each model family in turn
(leave-family-out) to score every calibration form; pick the default target and each target's
calibration by held-out RMSPE; fit the final forests on all families; fit the FLOPs baselines; write
the predictor directory (joblib files, CSV tables of the evaluation, manifest.json).
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hase.errors import HaseError
from hase.measure.collect import load_toml
from hase.predict import dataset as D
from hase.predict import evaluate as E
from hase.predict.estimate import Calibration, fit_calibration
from hase.predict.predictor import (
    KernelPredictor,
    feature_schema,
    library_versions,
    read_manifest,
    save_bundle,
    schema_sha,
)

log = logging.getLogger(__name__)

CV_MODELS, CV_KERNELS, BASELINES = "cv_models.csv", "cv_kernels.csv", "baselines.csv"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class TrainConfig:
    """The [training] table of configs/predictor.toml plus the forest tables."""

    targets: tuple[str, ...] = D.TARGETS
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
    forest: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def predictor(self, cv: bool) -> KernelPredictor:
        """A fresh, unfitted predictor with these settings (smaller forests inside cross-validation)."""
        return KernelPredictor(self.forest, self.log_target, self.min_samples,
                               self.cv_tree_scale if cv else self.tree_scale, self.random_state, self.n_jobs,
                               self.aliases, self.base, self.weight_power)


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read configs/predictor.toml; unknown keys and bad values are HaseErrors naming the fix."""
    raw = load_toml(path)
    training = dict(raw.get("training", {}))
    known = {f.name for f in dataclasses.fields(TrainConfig)} - {"forest", "aliases"}
    unknown = set(training) - known
    if unknown:
        raise HaseError(f"{path}: unknown [training] keys {sorted(unknown)}: use {sorted(known)}")
    training.update({k: v for k, v in overrides.items() if v is not None})
    training["targets"] = tuple(D.check_target(t) for t in training.get("targets", D.TARGETS))
    cfg = TrainConfig(**training, forest=raw.get("forest", {}), aliases=raw.get("keys", {}))
    if cfg.save_targets not in ("default", "all"):
        raise HaseError(f"{path}: save_targets must be 'default' or 'all', not {cfg.save_targets!r}")
    if cfg.calibrate_on not in ("measured", "predicted"):
        raise HaseError(f"{path}: calibrate_on must be 'measured' or 'predicted', not {cfg.calibrate_on!r}")
    return cfg


@dataclass(frozen=True)
class TrainResult:
    """What training produced: where, the default target, and the held-out scores behind the choice."""

    device: str
    out_dir: Path
    default_target: str
    scores: pd.DataFrame
    baselines: pd.DataFrame
    manifest: dict[str, Any]
    wall_s: float


def train(store_path: str | Path, out_root: str | Path, cfg: TrainConfig, device: str | None = None,
          progress: Progress | None = None) -> TrainResult:
    """Train, evaluate (leave-family-out) and save the predictors of one device configuration."""
    t0 = time.perf_counter()
    data = D.load_device_data(store_path, device)
    if len(data.families) < 2:
        raise HaseError(f"the store has one model family ({data.families}): leave-family-out evaluation needs two "
                        f"or more; collect more of the zoo with `make collect`")
    cv_models, cv_kernels = [], []
    for target in cfg.targets:
        m, k = E.leave_family_out(data, target, lambda: cfg.predictor(cv=True), cfg.calibrate_on, progress)
        cv_models.append(m)
        cv_kernels.append(k)
    held = pd.concat(cv_models, ignore_index=True)
    scores = E.candidate_scores(held)
    best = scores.groupby(E.TARGET).head(1).set_index(E.TARGET)
    default_target = str(best["rmspe"].idxmin())
    finals, entries, train_rows = {}, {}, []
    for target in cfg.targets:
        if progress:
            progress(f"{target}: final forests on all families")
        form, _, fitter = str(best.loc[target, E.CALIBRATION]).partition("/")
        pred, cal, fit_data = _final(data, target, cfg, form, fitter or "none")
        finals[target] = pred
        train_rows.append(E.in_sample(data, target, pred, cal))
        entries[target] = _target_entry(target, pred, cal, fit_data, scores, held, cv_kernels, train_rows[-1])
    baselines = E.baseline_lofo(data)
    all_models = pd.concat([held, *train_rows], ignore_index=True)
    kernels = pd.concat([k for k in cv_kernels if len(k)], ignore_index=True)
    manifest = _manifest(data, store_path, cfg, default_target, entries, baselines)
    saved = {t: p for t, p in finals.items() if cfg.save_targets == "all" or t == default_target}
    out = save_bundle(Path(out_root) / data.device, manifest, saved,
                      {CV_MODELS: all_models, CV_KERNELS: kernels, BASELINES: baselines})
    manifest = read_manifest(out)  # as written, with file hashes (and verified once)
    return TrainResult(data.device, out, default_target, scores, E.baseline_scores(baselines), manifest,
                       time.perf_counter() - t0)


def _final(data: D.DeviceData, target: str, cfg: TrainConfig, form: str,
           fitter: str) -> tuple[KernelPredictor, Calibration, pd.DataFrame]:
    ids = data.models[D.MODEL_ID]
    pred = E.fit_predictor(data, target, ids, lambda: cfg.predictor(cv=False))
    sums = (E.measured_sum(data, target, ids) if cfg.calibrate_on == "measured"
            else E.model_predictions(data, pred, ids)[E.SUM_PRED_MS])
    m = data.models.set_index(D.MODEL_ID)
    sums = sums.reindex(m.index)
    cal = fit_calibration(sums.to_numpy(), m[D.N_KERNELS], m[D.MEASURED_MS], form, fitter)
    fit = pd.DataFrame({D.FAMILY: m[D.FAMILY], "sum_ms": sums, D.N_KERNELS: m[D.N_KERNELS],
                        D.MEASURED_MS: m[D.MEASURED_MS]})
    fit["fitted_ms"] = cal.apply(fit["sum_ms"], fit[D.N_KERNELS])
    fit["residual_pct"] = (fit["fitted_ms"] / fit[D.MEASURED_MS] - 1) * 100
    return pred, cal, fit.reset_index()


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.round(6).to_dict("records")


def _target_entry(target: str, pred: KernelPredictor, cal: Calibration, fit: pd.DataFrame, scores: pd.DataFrame,
                  held: pd.DataFrame, cv_kernels: list[pd.DataFrame], train_rows: pd.DataFrame) -> dict[str, Any]:
    mine = held[(held[E.TARGET] == target) & (held[E.CALIBRATION] == cal.name)]
    kern = pd.concat([k for k in cv_kernels if len(k) and k[E.TARGET].iloc[0] == target] or [pd.DataFrame()])
    per_key = E.grouped_metrics(kern, "key", E.Y_MS, "pred_ms") if len(kern) else pd.DataFrame()
    return {
        "doc": D.TARGET_DOC[target],
        "calibration": {**cal.to_dict(), "name": cal.name, "fit_data": _records(fit)},
        "calibration_candidates": _records(scores[scores[E.TARGET] == target].drop(columns=[E.TARGET])),
        "held_out": E.metrics(mine[D.MEASURED_MS], mine["pred_ms"]),
        "held_out_by_family": _records(E.grouped_metrics(mine, D.FAMILY, D.MEASURED_MS, "pred_ms")),
        "held_out_raw_sum": E.metrics(mine[D.MEASURED_MS], mine[E.SUM_PRED_MS]),
        "train": E.metrics(train_rows[D.MEASURED_MS], train_rows["pred_ms"]),
        "kernels_held_out": E.metrics(kern[E.Y_MS], kern["pred_ms"]) if len(kern) else {},
        "kernels_held_out_by_key": _records(per_key),
        "predictor": pred.summary(),
    }


def _manifest(data: D.DeviceData, store_path: str | Path, cfg: TrainConfig, default_target: str,
              entries: dict[str, Any], baselines: pd.DataFrame) -> dict[str, Any]:
    schema = feature_schema()
    return {
        "device": data.device, "device_meta": data.meta, "fixed_cost_ms": data.fixed_cost_ms,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "library_versions": library_versions(),
        "feature_schema": schema, "feature_schema_sha": schema_sha(schema), "default_target": default_target,
        "training_data": {"store": str(store_path), "n_models": len(data.models), "families": data.families,
                          "n_kernels": len(data.kernels), "n_nodes": len(data.nodes)},
        "config": {k: v for k, v in dataclasses.asdict(cfg).items()},
        "evaluation": "leave-family-out: each family held out in turn (kernels and models), then scored",
        "targets": entries,
        "baselines_held_out": _records(E.baseline_scores(baselines)),
    }
