"""A kernel's roofline time on the host that trained the predictor, and the band its prediction must stay in.

    roofline_ms = max(flops / peak FLOP/s, bytes / bandwidth at the working set's level) + overhead

with the host's peaks measured by `collect` (`hase.measure.peaks`) and FLOPs and bytes from the kernel's own
feature family (its `flops` and `bytes` columns); the overhead is a session.run's for standalone kernels (the
warm and cold targets) and one node's inside a model for spans. No kernel runs faster than its roofline by much,
and none of a family runs slower than that family's slowest training kernel did by much, so a prediction is
clamped to
[lo · roofline, hi · roofline], lo and hi being the family's lowest and highest measured/roofline ratios in the
training data widened by a margin (`fit_bands`). A kernel far outside the training range (a 7×7 pooler over
1280×7×7 that a forest leaf says takes 115 ms) keeps the right order of magnitude, and every clamp is counted.

    >>> bands = fit_bands(families, ratios, margin=2.0)   # {"pool": (0.4, 22.0), ..., "*": (0.3, 60.0)}
    >>> low, high = band_ms(roofline, families, bands)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hase.measure.types import HostPeaks

ALL = "*"  # the band of every training kernel: what a family with no training kernel gets
CLAMP_LOW, CLAMP_HIGH = "low", "high"
OVERHEAD_CALL, OVERHEAD_NODE = "call", "node"  # which overhead a roofline adds: a session.run's, or a node's


def bandwidth(peaks: HostPeaks, working_set_bytes: ArrayLike) -> NDArray[np.float64]:
    """Bytes/s at the memory level each working set fits in (the last level, DRAM, beyond every cache)."""
    ws = np.asarray(working_set_bytes, dtype=np.float64)
    caps = [v.capacity_bytes for v in peaks.levels if v.capacity_bytes > 0]
    idx = np.searchsorted(np.asarray(caps, dtype=np.float64), ws, side="left")
    bw = np.asarray([v.bytes_per_s for v in peaks.levels], dtype=np.float64)
    return np.asarray(bw[np.minimum(idx, len(bw) - 1)], dtype=np.float64)


def roofline_ms(peaks: HostPeaks, flops: ArrayLike, nbytes: ArrayLike, overhead: str = "call") -> NDArray[np.float64]:
    """max(flops / peak FLOP/s, bytes / bandwidth at their level) + overhead, in ms, per kernel: the per-call
    overhead ("call": standalone kernels) or the per-node one ("node": spans inside a model)."""
    f = np.maximum(np.asarray(flops, dtype=np.float64), 0.0)
    b = np.maximum(np.asarray(nbytes, dtype=np.float64), 0.0)
    compute = f / peaks.gemm_flops_per_s
    memory = b / bandwidth(peaks, b)
    extra = peaks.node_overhead_ms if overhead == OVERHEAD_NODE else peaks.call_overhead_ms
    return np.asarray(np.maximum(compute, memory) * 1e3 + extra, dtype=np.float64)


def fit_bands(families: Sequence[str], ratios: ArrayLike, margin: float) -> dict[str, tuple[float, float]]:
    """Per family (and `ALL`), the range of measured/roofline ratios seen in training, widened by `margin` (a
    factor >= 1) each way."""
    r = np.asarray(ratios, dtype=np.float64)
    fam = np.asarray(families)
    ok = np.isfinite(r) & (r > 0)
    bands = {ALL: (float(r[ok].min()) / margin, float(r[ok].max()) * margin)} if ok.any() else {}
    for name in sorted(set(fam[ok].tolist())):
        sel = ok & (fam == name)
        bands[name] = (float(r[sel].min()) / margin, float(r[sel].max()) * margin)
    return bands


def band_ms(roofline: NDArray[np.float64], families: Sequence[str],
            bands: Mapping[str, tuple[float, float]]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(lowest, highest) plausible ms of each kernel: its family's band (`ALL`'s where the family has none). A kernel
    whose roofline is not positive (no FLOPs, no bytes and an overhead that measured 0 on a noisy host) has no
    band: (0, inf), as `fit_bands` leaves such kernels out."""
    lo = np.array([bands.get(f, bands[ALL])[0] for f in families], dtype=np.float64)
    hi = np.array([bands.get(f, bands[ALL])[1] for f in families], dtype=np.float64)
    roof = np.asarray(roofline, dtype=np.float64)
    ok = np.isfinite(roof) & (roof > 0)
    return np.where(ok, lo * roof, 0.0), np.where(ok, hi * roof, np.inf)


def clamp(pred: NDArray[np.float64], low: NDArray[np.float64],
          high: NDArray[np.float64]) -> tuple[NDArray[np.float64], list[str]]:
    """Predictions clipped to [low, high], and per kernel "low", "high" or "" (not clamped)."""
    flags = [CLAMP_LOW if p < lo else CLAMP_HIGH if p > hi else "" for p, lo, hi in zip(pred, low, high, strict=True)]
    return np.clip(pred, low, high), flags
