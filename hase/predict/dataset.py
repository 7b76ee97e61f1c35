"""Measurements of one device configuration, read from the store into the tables training and reports use.

Column names of these tables are the constants below (the one place they are defined). Three tables:

- kernels:  one row per unique kernel: KERNEL_ID, OP_TYPE, SIGNATURE, WARM_MS, COLD_MS (standalone medians),
            HOST_BUSY (the canary found the host busy before the kernel's job; False where not recorded)
- nodes:    one row per node of every measured model: MODEL_ID, FAMILY, NODE_IDX, NODE_NAME, KERNEL_ID,
            OP_TYPE, SPAN_MS, KERNEL_TIME_MS (in-model, median over profiled runs)
- models:   one row per measured model: MODEL_ID, FAMILY, MEASURED_MS, N_KERNELS, NOISY (block medians over
            the noise bound), HOST_BUSY (the canary found the host busy before the model's runs; False where
            not recorded), so evaluation can count them and training drop or down-weight them (`hase.predict.trust`)

MEASURED_MS, the ground truth training calibrates against and evaluation compares to, is the robust
session.run latency (`latency_ms`: the minimum of block medians, `hase.runtime.robust`, and over the model's
timing passes minutes apart, `hase.measure.retime`); rows measured before store version 2 have none, and fall back
to the median over all runs (`median_ms`). With `latency="quickest"` it is instead the model's quickest single run
over its passes (`min_ms`): the host's quietest moment seen, what training calibrates on by default ([training]
model_latency), as the truth it is judged by is the quickest of several timing passes.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.kernels.types import KernelSpec
from hase.measure.peaks import peaks_from_rows
from hase.measure.store import Store
from hase.measure.types import HostPeaks
from hase.runtime.types import DEVICE_META_COLS

KERNEL_ID, OP_TYPE, SIGNATURE = "kernel_id", "op_type", "signature_json"
WARM_MS, COLD_MS, SPAN_MS, KERNEL_TIME_MS = "warm_ms", "cold_ms", "span_ms", "kernel_time_ms"
MODEL_ID, FAMILY, NODE_IDX, NODE_NAME = "model_id", "family", "node_idx", "node_name"
MEASURED_MS, N_KERNELS = "measured_ms", "n_kernels"
LATENCIES = ("robust", "quickest")  # what MEASURED_MS is: the minimum of block medians, or the quickest single run
NOISY, HOST_BUSY = "noisy", "host_busy"

TARGETS = ("warm", "cold", "span")
TARGET_COLUMN = {"warm": WARM_MS, "cold": COLD_MS, "span": SPAN_MS}
TARGET_DOC = {
    "warm": "standalone kernel latency, warm cache (nn-Meter's label)",
    "cold": "standalone kernel latency, weights cold (round-robin over copies)",
    "span": "in-model node span from ORT's profiler (median over profiled runs)",
}
SUM_COLUMNS = {"warm": "sum_warm_ms", "cold": "sum_cold_ms", "span": "sum_span_ms", "kernel_time": "sum_kernel_time_ms"}
META_KEYS = DEVICE_META_COLS


@dataclass(frozen=True)
class DeviceData:
    """Everything measured on one device configuration, plus each kernel's parsed signature."""

    device: str
    meta: dict[str, Any]
    kernels: pd.DataFrame
    nodes: pd.DataFrame
    models: pd.DataFrame
    specs: dict[str, KernelSpec] = field(repr=False)
    fixed_cost_ms: float | None = None
    peaks: HostPeaks | None = None  # the host's peaks (`hase.measure.peaks`); None in stores collected before them

    @property
    def families(self) -> list[str]:
        """Model families with measurements, sorted."""
        return sorted(self.models[FAMILY].unique())


def check_target(target: str) -> str:
    """The target name, or a HaseError listing the known ones."""
    if target not in TARGETS:
        raise HaseError(f"unknown target {target!r}: use one of {list(TARGETS)}")
    return target


def store_devices(store_path: str | Path) -> list[str]:
    """Device configurations with at least one measured model in the store (none is a HaseError)."""
    with Store(store_path, readonly=True) as store:
        devices = sorted(store.table("model_measurements")["device"].unique())
    if not devices:
        raise HaseError(f"{store_path} holds no model measurements: run `make collect` first")
    return devices


def load_device_data(store_path: str | Path, device: str | None = None, latency: str = "robust") -> DeviceData:
    """Read one device's kernels, nodes and models from the store (the only device when `device` is None), each
    model's MEASURED_MS the `latency` statistic of LATENCIES."""
    if latency not in LATENCIES:
        raise HaseError(f"unknown model latency {latency!r}: use one of {list(LATENCIES)}")
    with Store(store_path, readonly=True) as store:
        mm = store.table("model_measurements")
        devices = sorted(mm["device"].unique())
        device = _pick_device(devices, device, store_path)
        mm = mm[mm["device"] == device]
        meta = {k: _plain(mm.iloc[0][k]) for k in META_KEYS}
        kernels = _kernels(store.table("kernels"), store.table("kernel_measurements"), device)
        nodes = _nodes(store.table("model_nodes"), store.table("node_spans"), mm, meta["opt_level"], device)
        fixed = store.table("fixed_costs")
        fixed = fixed[fixed["device"] == device]
        peaks = peaks_from_rows(device, store.table("device_peaks").to_dict("records"))
    measured = mm["latency_ms"].fillna(mm["median_ms"]) if "latency_ms" in mm else mm["median_ms"]
    if latency == "quickest":
        measured = mm["min_ms"].fillna(measured)
    flags = {c: mm[c].fillna(0).astype(bool) if c in mm else False for c in (NOISY, HOST_BUSY)}
    models = pd.DataFrame({MODEL_ID: mm["model_id"], FAMILY: mm["family"], MEASURED_MS: measured, **flags})
    models = models.merge(nodes.groupby(MODEL_ID).size().rename(N_KERNELS), on=MODEL_ID, how="inner")
    specs = {k: KernelSpec.from_json(s) for k, s in zip(kernels[KERNEL_ID], kernels[SIGNATURE], strict=True)}
    if models.empty:
        raise HaseError(f"the store has no measured model with its node list for device {device!r}: "
                        f"rerun `make collect`")
    return DeviceData(device, meta, kernels, nodes, models.reset_index(drop=True), specs,
                      float(fixed["median_ms"].iloc[0]) if len(fixed) else None, peaks)


def _pick_device(devices: list[str], device: str | None, store_path: Any) -> str:
    if not devices:
        raise HaseError(f"{store_path} holds no model measurements: run `make collect` first")
    if device is None:
        if len(devices) > 1:
            raise HaseError(f"{store_path} holds several devices {devices}: pick one with --device")
        return devices[0]
    if device not in devices:
        raise HaseError(f"no measurements for device {device!r} in {store_path}: it has {devices}")
    return device


def _kernels(kernels: pd.DataFrame, km: pd.DataFrame, device: str) -> pd.DataFrame:
    km = km[km["device"] == device]
    wide = km.pivot_table(index="kernel_id", columns="variant", values="median_ms", aggfunc="first")
    out = kernels[[KERNEL_ID, OP_TYPE, SIGNATURE]].copy()
    out[WARM_MS] = out[KERNEL_ID].map(wide["warm"]) if "warm" in wide else np.nan
    out[COLD_MS] = out[KERNEL_ID].map(wide["cold_weights"]) if "cold_weights" in wide else np.nan
    busy = km.groupby("kernel_id")["host_busy"].max() if "host_busy" in km else pd.Series(dtype=float)
    out[HOST_BUSY] = out[KERNEL_ID].map(busy).fillna(0).astype(bool)
    return out.reset_index(drop=True)


def _nodes(model_nodes: pd.DataFrame, spans: pd.DataFrame, mm: pd.DataFrame, opt_level: str,
           device: str) -> pd.DataFrame:
    mn = model_nodes[(model_nodes["opt_level"] == opt_level) & model_nodes["model_id"].isin(mm["model_id"])]
    sp = spans[spans["device"] == device][["model_id", "node_name", "span_ms", "kernel_time_ms"]]
    nodes = mn[[MODEL_ID, NODE_IDX, NODE_NAME, KERNEL_ID, OP_TYPE]].merge(sp, on=[MODEL_ID, NODE_NAME], how="left")
    nodes = nodes.merge(mm[["model_id", "family"]], on=MODEL_ID, how="left")
    cols = [MODEL_ID, FAMILY, NODE_IDX, NODE_NAME, KERNEL_ID, OP_TYPE, SPAN_MS, KERNEL_TIME_MS]
    return nodes[cols].sort_values([MODEL_ID, NODE_IDX]).reset_index(drop=True)


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def kernel_targets(data: DeviceData, target: str, models: Iterable[str] | None = None) -> pd.Series:
    """Measured target per kernel (index kernel_id) over the kernels of `models` (all when None).

    warm/cold come from the standalone measurements; span is the median over the kernel's node
    occurrences in those models only, so a held-out model's spans never reach training.
    """
    nodes = data.nodes if models is None else data.nodes[data.nodes[MODEL_ID].isin(set(models))]
    if check_target(target) == "span":
        y = nodes.groupby(KERNEL_ID)[SPAN_MS].median()
    else:
        ids = nodes[KERNEL_ID].unique()
        y = data.kernels.set_index(KERNEL_ID)[TARGET_COLUMN[target]].reindex(ids)
    y = y[np.isfinite(y) & (y > 0)]
    out: pd.Series = y.rename(TARGET_COLUMN[target])
    return out


def model_sums(data: DeviceData) -> pd.DataFrame:
    """Per model: measured latency and the measured sums of each kernel source over its nodes.

        model_id | family | measured_ms | n_kernels | sum_warm_ms | sum_cold_ms | sum_span_ms |
        sum_kernel_time_ms | n_missing_standalone
    """
    k = data.kernels.set_index(KERNEL_ID)
    nodes = data.nodes.assign(**{WARM_MS: data.nodes[KERNEL_ID].map(k[WARM_MS]),
                                 COLD_MS: data.nodes[KERNEL_ID].map(k[COLD_MS])})
    g = nodes.groupby(MODEL_ID)
    sums = pd.DataFrame({
        SUM_COLUMNS["warm"]: g[WARM_MS].sum(min_count=1), SUM_COLUMNS["cold"]: g[COLD_MS].sum(min_count=1),
        SUM_COLUMNS["span"]: g[SPAN_MS].sum(min_count=1),
        SUM_COLUMNS["kernel_time"]: g[KERNEL_TIME_MS].sum(min_count=1),
        "n_missing_standalone": g[WARM_MS].apply(lambda s: int(s.isna().sum())),
    })
    return data.models.merge(sums, left_on=MODEL_ID, right_index=True, how="left")


def model_specs(data: DeviceData, model_id: str) -> list[KernelSpec]:
    """The kernel spec of every node of a model, in execution order."""
    ids = data.nodes.loc[data.nodes[MODEL_ID] == model_id, KERNEL_ID]
    return [data.specs[k] for k in ids]
