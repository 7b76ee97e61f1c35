"""What a store says about the machine and the quiet it was measured in, for a trained predictor's manifest.

`store_noise` counts a device's jobs measured on a busy host (the canary's `host_busy`) and its models whose block
medians varied more than the noise bound (`noisy`), with the spread of the model measurements (median and p90
of `block_spread`); `store_host` finds the fingerprint and speed signature of the machine that measured most of
the device's models.

    >>> store_noise("data/hase.sqlite", "cpu-1t")
    {'jobs': 3061, 'busy_jobs': 2392, 'busy_share': 0.78, 'models': 101, 'noisy_models': 9, 'noisy_share': 0.09,
     'model_spread_median': 0.03, 'model_spread_p90': 0.21}
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hase.measure.store import Store
from hase.runtime.host import HostFingerprint
from hase.runtime.types import HOST_FP


def store_noise(store_path: str | Path, device: str) -> dict[str, Any]:
    """A device's jobs and how many were measured on a busy host, its noisy models, and the models' block spread."""
    with Store(store_path, readonly=True) as store:
        km = store.table("kernel_measurements")
        mm = store.table("model_measurements")
    km, mm = km[km["device"] == device], mm[mm["device"] == device]
    kernel_busy = km.groupby("kernel_id")["host_busy"].max() if len(km) else km["host_busy"]
    jobs = len(kernel_busy) + len(mm)
    busy = int(kernel_busy.fillna(0).astype(bool).sum()) + int(mm["host_busy"].fillna(0).astype(bool).sum())
    noisy = int(mm["noisy"].fillna(0).astype(bool).sum())
    spread = mm["block_spread"].dropna().to_numpy(dtype=float)
    return {"jobs": jobs, "busy_jobs": busy, "busy_share": round(busy / jobs, 4) if jobs else 0.0,
            "models": len(mm), "noisy_models": noisy, "noisy_share": round(noisy / len(mm), 4) if len(mm) else 0.0,
            "model_spread_median": round(float(np.median(spread)), 4) if spread.size else None,
            "model_spread_p90": round(float(np.percentile(spread, 90)), 4) if spread.size else None}


def store_host(store_path: str | Path, device: str) -> tuple[HostFingerprint | None, dict[str, Any] | None]:
    """The fingerprint of the machine that measured most of the device's models and the device's speed signature
    on it; (None, None) for a store older than fingerprints."""
    with Store(store_path, readonly=True) as store:
        mm = store.table("model_measurements")
        hosts = store.hosts()
        mm = mm[mm["device"] == device]
        digests = mm[HOST_FP].dropna() if HOST_FP in mm else mm.iloc[0:0]
        if not len(digests):
            return None, None
        digest = str(digests.value_counts().index[0])
        return hosts.get(digest), store.signature(device, digest)
