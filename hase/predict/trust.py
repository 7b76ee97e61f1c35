"""Which measurements training trusts: rows measured on a busy host, or noisy, are dropped or down-weighted.

A row is *suspect* when the host was not as quiet as the rest of the run (`docs/measurement.md`):

- a kernel's standalone rows (warm, cold): the canary found the host busy before its job (`host_busy`);
- a model: `host_busy`, or `noisy` (its block medians varied more than the noise bound);
- a node span: a node of a suspect model (its profiled runs were on the same host, at the same time).

The policy (`[training] busy`, `busy_weight` in configs/predictor.toml):

- ``"drop"`` (default): a suspect row is left out where a clean measurement of the same thing is there to
  learn from — a span of a kernel that also runs in a clean model; where there is none, it is kept at
  `busy_weight`. (A kernel's standalone rows and a model's latency are measured once per device, so a suspect
  one has no clean twin: it is down-weighted.)
- ``"weight"``: every suspect row is kept at `busy_weight` (a span row: the mean weight of its occurrences).
- ``"keep"``: the flags are ignored; every row weighs 1 (training as before the canary).

    >>> y, w, counts = training_rows(data, "span", BusyPolicy("drop", 0.2), model_ids)
    >>> counts.to_dict()
    {'rows': 412, 'suspect': 9, 'dropped': 31, 'weighted': 9}
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.predict import dataset

MODES = ("drop", "weight", "keep")
SUSPECT, WEIGHT = "suspect", "weight"


@dataclass(frozen=True)
class BusyPolicy:
    """What training does with suspect rows: `mode` (one of MODES) and the weight a kept suspect row gets."""

    mode: str = "drop"
    weight: float = 0.2

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise HaseError(f"busy = {self.mode!r} is not a policy for rows measured on a busy host: use one of "
                            f"{list(MODES)}")
        if not 0 < self.weight <= 1:
            raise HaseError(f"busy_weight = {self.weight!r} is out of range: use a number over 0 and at most 1")

    def weight_of(self, suspect: pd.Series) -> pd.Series:
        """1.0 for a clean row, `weight` for a suspect one (1.0 for every row under "keep")."""
        if self.mode == "keep":
            return pd.Series(1.0, index=suspect.index)
        return suspect.map({True: self.weight, False: 1.0}).astype(float)


KEEP = BusyPolicy("keep")


@dataclass(frozen=True)
class RowCounts:
    """How many training rows there were, how many suspect, how many left out and how many down-weighted.

    For span rows `suspect` and `dropped` count node occurrences (a kernel's span is the median of them);
    `rows` and `weighted` count kernels.
    """

    rows: int
    suspect: int
    dropped: int
    weighted: int

    def to_dict(self) -> dict[str, int]:
        """The counts as a plain dict (for the manifest)."""
        return dataclasses.asdict(self)


def suspect_models(data: dataset.DeviceData) -> pd.Series:
    """Per model (index model_id): measured on a busy host or noisy."""
    m = data.models.set_index(dataset.MODEL_ID)
    out: pd.Series = (m[dataset.HOST_BUSY].astype(bool) | m[dataset.NOISY].astype(bool)).rename(SUSPECT)
    return out


def model_weights(data: dataset.DeviceData, policy: BusyPolicy, model_ids: Iterable[str]) -> pd.Series:
    """The calibration weight of each model of `model_ids`, in that order (index model_id)."""
    return policy.weight_of(suspect_models(data).reindex(pd.Index(list(model_ids),
                                                                  name=dataset.MODEL_ID))).rename(WEIGHT)


def model_counts(data: dataset.DeviceData, policy: BusyPolicy) -> dict[str, int]:
    """The models of the calibration: how many, busy, noisy, and down-weighted (none dropped: see module doc)."""
    m = data.models
    suspect = suspect_models(data)
    return {"rows": len(m), "host_busy": int(m[dataset.HOST_BUSY].sum()), "noisy": int(m[dataset.NOISY].sum()),
            "suspect": int(suspect.sum()), "dropped": 0,
            "weighted": 0 if policy.mode == "keep" else int(suspect.sum())}


def training_rows(data: dataset.DeviceData, target: str, policy: BusyPolicy, models: Iterable[str] | None = None
                  ) -> tuple[pd.Series, pd.Series, RowCounts]:
    """The kernels a forest trains on for `target` over `models` (all when None): measured latency, weight, counts.

    Under "keep" the latencies are exactly `dataset.kernel_targets`'s; the weights share their index.
    """
    if dataset.check_target(target) == "span":
        return _span_rows(data, policy, models)
    y = dataset.kernel_targets(data, target, models)
    suspect = data.kernels.set_index(dataset.KERNEL_ID)[dataset.HOST_BUSY].reindex(y.index).fillna(False).astype(bool)
    w = policy.weight_of(suspect).rename(WEIGHT)
    return y, w, RowCounts(len(y), int(suspect.sum()), 0, int((w < 1).sum()))


def _span_rows(data: dataset.DeviceData, policy: BusyPolicy, models: Iterable[str] | None
               ) -> tuple[pd.Series, pd.Series, RowCounts]:
    """Span per kernel: the median over its occurrences, without suspect ones where a clean one exists ("drop")."""
    nodes = data.nodes if models is None else data.nodes[data.nodes[dataset.MODEL_ID].isin(set(models))]
    occ = nodes.loc[nodes[dataset.SPAN_MS].notna(), [dataset.KERNEL_ID, dataset.MODEL_ID, dataset.SPAN_MS]]
    occ = occ.assign(**{SUSPECT: occ[dataset.MODEL_ID].map(suspect_models(data)).fillna(False).astype(bool)})
    n_suspect = int(occ[SUSPECT].sum())
    dropped = 0
    if policy.mode == "drop":
        has_clean = (~occ[SUSPECT]).groupby(occ[dataset.KERNEL_ID]).transform("any")
        leave = occ[SUSPECT] & has_clean
        dropped = int(leave.sum())
        occ = occ[~leave]
    occ = occ.assign(**{WEIGHT: policy.weight_of(occ[SUSPECT])})
    g = occ.groupby(dataset.KERNEL_ID)
    y, w = g[dataset.SPAN_MS].median(), g[WEIGHT].mean()
    keep = np.isfinite(y) & (y > 0)
    y, w = y[keep].rename(dataset.SPAN_MS), w[keep].rename(WEIGHT)
    return y, w, RowCounts(len(y), n_suspect, dropped, int((w < 1).sum()))


def summary(policy: BusyPolicy, models: Mapping[str, int], kernels: Mapping[str, RowCounts]) -> dict[str, Any]:
    """The manifest's record of the policy and what it did: models of the calibration, kernels per target."""
    return {"policy": policy.mode, "busy_weight": policy.weight, "models": dict(models),
            "kernels": {target: counts.to_dict() for target, counts in kernels.items()}}
