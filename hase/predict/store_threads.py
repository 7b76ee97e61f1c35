"""The thread model a one-thread predictor's store can give: its in-model spans at one intra-op thread paired with
the same host's spans of the same models at more threads (ORT's default, `cpu-mt`), so `hase train` ships the
one-thread forests and the host's thread model (`hase.predict.threads`) side by side in one bundle and `hase predict
--threads` needs no separate `hase host threads` run.

A partner device is one of the store's other configurations on the same execution provider (the CPU EP),
optimization level and host (fingerprint digest) with another intra-op thread count; 0 (ORT's default) means the
host's physical cores. Of several, the one with the most spans is taken.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hase.measure.store import Store
from hase.predict.threads import ALL, ThreadModel, fit_thread_model, pairs_with_specs, store_spans

DEVICE_COLUMNS = ["device", "execution_provider", "opt_level", "intra_op_threads", "host_fp"]
MIN_PAIRS = 50  # fewer kernels measured at both counts: no thread model (the forest needs rows of many shapes)


@dataclass(frozen=True)
class StoreThreads:
    """A thread model fitted from a store and what it was fitted on (the manifest's `threads` entry)."""

    model: ThreadModel
    partner: str  # the many-thread device configuration paired with the one-thread one
    threads: int
    models: int
    kernels: int
    kernel_speedup: float  # the paired kernels' summed time at one thread over their sum at `threads`

    def describe(self) -> dict[str, Any]:
        """The manifest entry: partner device, thread count, models and kernels paired, speed-up, fork/join."""
        return {"partner": self.partner, "threads": self.threads, "models": self.models, "kernels": self.kernels,
                "kernel_speedup": round(self.kernel_speedup, 4),
                "sigma_us": round(self.model.sigma_ms[ALL] * 1e3, 3)}


def partner_device(store_path: str | Path, device: str) -> tuple[str, int] | None:
    """The store's many-thread partner of one-thread `device` and its thread count, or None: `device` is not a
    one-thread CPU configuration, or no other configuration of its EP, level and host has spans."""
    with Store(store_path, readonly=True) as store:
        spans = store.table("node_spans")
        hosts = store.hosts()
    if spans.empty or not set(DEVICE_COLUMNS) <= set(spans.columns):
        return None
    configs = spans.groupby(DEVICE_COLUMNS, dropna=False).size().rename("n").reset_index()
    mine = configs[configs["device"] == device]
    if mine.empty or str(mine["execution_provider"].iloc[0]).lower() not in ("cpu", "cpuexecutionprovider") or int(
            mine["intra_op_threads"].iloc[0]) != 1:
        return None
    ref = mine.sort_values("n").iloc[-1]
    others = configs[(configs["device"] != device) & (configs["intra_op_threads"] != 1)
                     & (configs["execution_provider"] == ref["execution_provider"])
                     & (configs["opt_level"] == ref["opt_level"]) & (configs["host_fp"] == ref["host_fp"])]
    if others.empty:
        return None
    best = others.sort_values("n").iloc[-1]
    threads = int(best["intra_op_threads"])
    if threads == 0:
        host = hosts.get(str(ref["host_fp"]))
        threads = host.cores if host is not None else 0
    return (str(best["device"]), threads) if threads > 1 else None


def fit_store_threads(store_path: str | Path, device: str) -> StoreThreads | None:
    """The thread model of one-thread `device` and its partner in the store (`partner_device`), or None when there
    is no partner or fewer than MIN_PAIRS kernels were measured under both."""
    found = partner_device(store_path, device)
    if found is None:
        return None
    partner, threads = found
    one, specs = store_spans([store_path], device, 1)
    many, more = store_spans([store_path], partner, threads)
    pairs, signatures, share = pairs_with_specs(pd.concat([one, many], ignore_index=True), {**more, **specs})
    if len(pairs) < MIN_PAIRS:
        return None
    with Store(store_path, readonly=True) as store:
        digest = str(store.table("node_spans").query("device == @device")["host_fp"].mode().iloc[0])
        host = store.hosts().get(digest)
    meta = {"cores": host.cores if host is not None else threads, "fingerprint": host.summary() if host else "",
            "ort": host.ort_version if host else "", "models": int(pairs["model"].nunique()), "kernels": len(pairs),
            "joined": round(share, 4), "store": str(store_path), "devices": [device, partner]}
    model = fit_thread_model(pairs, signatures, host=digest, meta=meta)
    speedup = float(pairs["t1_ms"].sum() / pairs["t_ms"].sum())
    return StoreThreads(model, partner, threads, int(pairs["model"].nunique()), len(pairs), speedup)
