"""The evaluation of a trained predictor: its leave-family-out rows, the ratio table, baselines, headline figures.

Nothing is retrained: the held-out rows come from the cross-validation `hase train` stored next to the
forests, the measured sums from the store. Everything here is DataFrames and typed records; rendering
is `hase.evaluate.report`'s job.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.evaluate.ratios import CALIBRATED_HELD_OUT_MS, CALIBRATED_TRAIN_MS, EXPORTED, ratio_summary, ratio_table
from hase.evaluate.worst import store_worst
from hase.predict import dataset
from hase.predict.baselines import baseline_results, baseline_scores
from hase.predict.bundle import BASELINES_CSV, CV_KERNELS_CSV, CV_MODELS_CSV, load_bundle, read_manifest
from hase.predict.calibration import COEFFICIENTS, Calibration
from hase.predict.crossval import TARGET, Y_MS, candidate_scores
from hase.predict.manifest import Manifest
from hase.predict.metrics import Scores, grouped_metrics, score
from hase.predict.predictor import KEY, PRED_MS, KernelPredictor
from hase.predict.provenance import store_noise

TARGET_ACC10, TARGET_RMSPE = 0.90, 8.0  # the accuracy Hase aims for on held-out families


@dataclass(frozen=True)
class Headline:
    """The figures the README quotes for one device's predictor (written as headline.json)."""

    device: str
    target: str
    calibration: Calibration
    n_models: int
    n_families: int
    held_out: Scores
    held_out_exported: Scores
    train: Scores
    baselines: Mapping[str, Scores]
    kernels_held_out: Scores

    @property
    def targets_met(self) -> dict[str, bool]:
        """Whether the held-out accuracy reaches ±10 % for 90 % of models and an RMSPE of 8 % or less."""
        return {"acc10_ge_90": self.held_out.acc10 >= TARGET_ACC10, "rmspe_le_8": self.held_out.rmspe <= TARGET_RMSPE}

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of headline.json and `hase evaluate --json`: a figure that could not be computed (no
        exported models to score: NaN) is null, so the file is valid JSON."""
        coefficients = {k: v for k, v in dataclasses.asdict(self.calibration).items() if k in COEFFICIENTS}
        return dict(json_ready({"device": self.device, "target": self.target, "calibration": self.calibration.name,
                "n_models": self.n_models, "n_families": self.n_families, "held_out": self.held_out.to_dict(),
                "held_out_exported": self.held_out_exported.to_dict(), "train": self.train.to_dict(),
                "baselines": {name: s.to_dict() for name, s in self.baselines.items()},
                "kernels_held_out": self.kernels_held_out.to_dict(), "calibration_coefficients": coefficients,
                "targets_met": self.targets_met}))


def json_ready(value: Any) -> Any:
    """A JSON-able copy of nested dicts, lists and numbers: NumPy scalars as Python numbers, NaN and ±inf as None
    (JSON has no NaN: `json.dumps` would write the invalid token `NaN`).

        >>> json_ready({"acc10": float("nan"), "n": np.int64(0), "xs": [np.float64(1.5)]})
        {'acc10': None, 'n': 0, 'xs': [1.5]}
    """
    if isinstance(value, Mapping):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class Evaluation:
    """Everything `hase evaluate` reports for one device's predictor, as DataFrames plus headline figures."""

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
    headline: Headline
    worst: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # `hase.evaluate.worst.store_worst`
    #: the store's busy/noisy jobs and model spread (`hase.predict.provenance.store_noise`), the report's first lines
    noise: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def evaluate_predictor(store_path: str | Path, predictor_path: str | Path, target: str | None = None) -> Evaluation:
    """The evaluation tables of a trained predictor against the store's measurements (no retraining).

    Held-out figures come from the leave-family-out run `hase train` stored next to the forests
    (cv_models.csv, cv_kernels.csv, baselines.csv); measured sums come from the store.
    """
    root = Path(predictor_path)
    manifest = read_manifest(root)
    data = dataset.load_device_data(store_path, manifest.device)
    target = target or manifest.default_target
    if target not in manifest.targets:
        raise HaseError(f"{root} has no evaluation of target {target!r}: it has {sorted(manifest.targets)}")
    cal = manifest.targets[target].calibration.calibration
    cv_models = pd.read_csv(root / CV_MODELS_CSV)
    cv_kernels = pd.read_csv(root / CV_KERNELS_CSV)
    baselines = pd.read_csv(root / BASELINES_CSV)
    table = ratio_table(data, cv_models, target, cal.name)
    held = table.dropna(subset=[CALIBRATED_HELD_OUT_MS])
    if held.empty:
        raise HaseError(f"no model of {store_path} was held out when {root} was trained (it was trained on another "
                        f"store): train on this store first (`hase train --store {store_path}`)")
    kern = cv_kernels[cv_kernels[TARGET] == target]
    by_key = grouped_metrics(kern, KEY, Y_MS, PRED_MS).sort_values("rmse_ms", ascending=False)
    fams = grouped_metrics(held, dataset.FAMILY, dataset.MEASURED_MS, CALIBRATED_HELD_OUT_MS)
    exported = held[held[dataset.FAMILY] == EXPORTED]
    headline = Headline(
        device=data.device, target=target, calibration=cal, n_models=len(table),
        n_families=table[dataset.FAMILY].nunique(),
        held_out=score(held[dataset.MEASURED_MS], held[CALIBRATED_HELD_OUT_MS]),
        held_out_exported=score(exported[dataset.MEASURED_MS], exported[CALIBRATED_HELD_OUT_MS]),
        train=score(table[dataset.MEASURED_MS], table[CALIBRATED_TRAIN_MS]), baselines=baseline_results(baselines),
        kernels_held_out=score(kern[Y_MS], kern[PRED_MS]))
    worst = store_worst(data, table, cv_kernels, target, _saved_predictor(root, manifest, target))
    return Evaluation(data.device, target, cal.name, table, ratio_summary(table), candidate_scores(cv_models),
                      baselines, baseline_scores(baselines), by_key, fams, headline, worst,
                      store_noise(store_path, data.device))


def _saved_predictor(root: Path, manifest: Manifest, target: str) -> KernelPredictor | None:
    """The target's saved forests (None where training saved only another target's)."""
    if f"{target}.npz" not in manifest.files:
        return None
    return load_bundle(root, [target]).predictors[target]
