"""How busy the store a predictor was trained on was, read from its manifest (no pandas: `hase predict` uses it).

`busy_share` reads the share of jobs measured on a busy host from a manifest's `noise` record
(`hase.predict.provenance.store_noise`), else from the busy counts of older manifests; `busy_note` is the one line
a predictor trained on a mostly busy store carries in `hase predict` and `hase predictors`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MOSTLY_BUSY = 0.5  # a store with more than this share of its jobs measured on a busy host is "mostly busy"


def busy_share(noise: Mapping[str, Any], busy: Mapping[str, Any]) -> float | None:
    """The share of a predictor's training jobs measured on a busy host: from its `noise` record, else from the busy
    counts of the models (`training_data.busy` of older manifests); None when neither says."""
    share = noise.get("busy_share")
    if isinstance(share, (int, float)):
        return float(share)
    models = busy.get("models") if isinstance(busy, Mapping) else None
    if isinstance(models, Mapping) and models.get("rows"):
        return float(models.get("host_busy", 0)) / float(models["rows"])
    return None


def busy_note(share: float | None) -> str:
    """One line for a predictor trained on a mostly busy store (more than MOSTLY_BUSY), else ''."""
    if share is None or share <= MOSTLY_BUSY:
        return ""
    return (f"trained on a mostly busy store: {share:.0%} of its jobs were measured while the canary found the host "
            f"busy, so its figures carry that load; collect again on a quiet host")
