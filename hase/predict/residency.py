"""Weights that do not stay in cache between runs: the time a kernel inside a large model spends streaming them.

A sampled block or a small zoo model keeps its weights in the caches from one run to the next, so the in-model spans
the forests learn from rarely pay for reading weights from memory. A model whose tensors outgrow the caches reads
every weight from memory again on each run, and its weight-heavy kernels (convolutions and GEMMs over few rows:
7x7 planes, a token or a sequence of 128) run slower than the same kernel in a small model. Per node:

    stream_ms = cold_share x weight_bytes / DRAM bandwidth
    cold_share = max(0, 1 - cache / footprint)   (footprint: the weights and outputs one run touches)
    pred_ms'  = (pred_ms^p + (kappa x stream_ms)^p)^(1/p)

with p = 1 (streaming adds to the kernel's time) or p = 2 (a smooth maximum: streaming overlaps compute and becomes
the time of a kernel that is mostly weights). Cache sizes and the DRAM bandwidth are the host's peaks measured by
`collect`; kappa and p are fitted at training on the zoo's held-out in-model spans (`fit_streaming`): zoo models
over 16 MB of tensors showed the effect there (their weight-heavy kernels predicted 4-60 % fast), kernels of
smaller ones none. On 2026-11-27 the fit chose p = 1 over p = 2 (mean squared log error 0.0154 against 0.0171), as
the real models' spans do: their GEMMs with 0.25-4 MB of weights ran 7-9 % over the forests' time, about their
weights read at 25 GB/s on top of it, where a smooth maximum adds well under 1 %. Since 2026-11-29 the form is chosen
on held-out models (`fit_streaming_forms`, `hase.predict.train`): the kernels that stream are mostly weight-bound and
fit both forms alike, and adding put real CNNs' convolutions 6-15 % slow on 56e9708810e3.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hase.kernels.types import KernelSpec
from hase.measure.types import HostPeaks
from hase.predict import features
from hase.predict.features.common import tensor_bytes

STREAM_FAMILIES = ("conv", "matmul", "recurrent")  # families whose kernels read all their weights on every run
KAPPA_GRID = np.round(np.arange(0.0, 8.0001, 0.1), 1)
POWERS = (1.0, 2.0)  # additive, smooth maximum


@dataclass(frozen=True)
class Streaming:
    """How a node's weight streaming joins its predicted time: kappa (0: not at all) and the power p above."""

    kappa: float = 0.0
    power: float = 2.0

    def apply(self, pred_ms: ArrayLike, stream: ArrayLike) -> NDArray[np.float64]:
        """Predictions with their weight streaming (`with_streaming`)."""
        return with_streaming(pred_ms, stream, self.kappa, self.power)

    def describe(self) -> str:
        """E.g. "κ=1.1, added" or "κ=2.2, smooth maximum"."""
        return f"κ={self.kappa:.1f}, " + ("added" if self.power == 1.0 else f"power {self.power:g}")


NO_STREAMING = Streaming()


def weight_bytes(spec: KernelSpec) -> float:
    """Bytes of a kernel's constant inputs (its weights)."""
    return float(sum(tensor_bytes(t) for t in spec.inputs if t.name and t.const))


def footprint_bytes(specs: Sequence[KernelSpec]) -> float:
    """What one run of a model touches: every node's weights and outputs."""
    return sum(weight_bytes(s) + sum(tensor_bytes(t) for t in s.outputs if t.name) for s in specs)


def cold_share(footprint: float, peaks: HostPeaks) -> float:
    """The share of a run's tensors the host's caches cannot hold from one run to the next."""
    cache = sum(level.capacity_bytes for level in peaks.levels if level.capacity_bytes > 0)
    return max(0.0, 1.0 - cache / footprint) if footprint > 0 else 0.0


def stream_ms(specs: Sequence[KernelSpec], peaks: HostPeaks) -> NDArray[np.float64]:
    """Per node of a model (all its nodes, in order): the time to stream its weights from memory on each run,
    0 for kernels of families that do not read all their weights per run and in models that fit in cache."""
    share = cold_share(footprint_bytes(specs), peaks)
    dram = peaks.levels[-1].bytes_per_s
    if share == 0.0 or dram <= 0:
        return np.zeros(len(specs))
    return np.array([share * weight_bytes(s) / dram * 1e3 if features.family_of(s.op_type).name in STREAM_FAMILIES
                     else 0.0 for s in specs], dtype=np.float64)


def with_streaming(pred_ms: ArrayLike, stream: ArrayLike, kappa: float, power: float = 2.0) -> NDArray[np.float64]:
    """Predictions with their weight streaming: (pred^p + (kappa x stream)^p)^(1/p), p = `power` (`pred_ms` may have
    a trailing axis of per-tree draws when `stream` is shaped to broadcast)."""
    p = np.asarray(pred_ms, dtype=np.float64)
    if kappa == 0.0:
        return p
    s = kappa * np.asarray(stream, dtype=np.float64)
    if power == 2.0:
        return np.asarray(np.hypot(p, s), dtype=np.float64)
    return np.asarray((p**power + s**power) ** (1.0 / power), dtype=np.float64)


def _losses(pred_ms: ArrayLike, measured_ms: ArrayLike, stream: ArrayLike) -> dict[tuple[float, float], float]:
    """Mean squared log error of every (kappa of `KAPPA_GRID`, power of `POWERS`) over the kernels that stream
    (empty when none does)."""
    p, y, s = (np.asarray(a, dtype=np.float64) for a in (pred_ms, measured_ms, stream))
    ok = (s > 0) & (p > 0) & (y > 0)
    if not ok.any():
        return {}
    p, y, s = p[ok], y[ok], s[ok]
    return {(float(k), pw): float(np.mean(np.log(with_streaming(p, s, float(k), pw) / y) ** 2))
            for pw in POWERS for k in KAPPA_GRID}


def fit_streaming(pred_ms: ArrayLike, measured_ms: ArrayLike, stream: ArrayLike) -> Streaming:
    """The kappa of `KAPPA_GRID` and power of `POWERS` with the least mean squared log error over the kernels that
    stream (held-out predictions against their measured spans); no streaming when none does."""
    losses = _losses(pred_ms, measured_ms, stream)
    if not losses:
        return NO_STREAMING
    kappa, power = min(losses, key=lambda kp: (losses[kp], kp[1] != 2.0))  # a tie keeps the smooth maximum
    return Streaming(kappa, power) if kappa else NO_STREAMING


def fit_streaming_forms(pred_ms: ArrayLike, measured_ms: ArrayLike, stream: ArrayLike) -> list[Streaming]:
    """For each power of `POWERS`, its kappa of least mean squared log error (as `fit_streaming`), best fit first;
    those whose kappa is 0 left out. The kernels that stream are mostly weight-bound (GEMVs, the classifier of a
    large model), where adding and a smooth maximum fit alike; the kernels' fit cannot tell the forms apart on the
    compute-bound ones, so `hase train` chooses between them on held-out models (`hase.predict.train`)."""
    losses = _losses(pred_ms, measured_ms, stream)
    best = [min(((k, pw) for k, pw2 in losses if pw2 == pw), key=lambda kp: losses[kp]) for pw in POWERS] \
        if losses else []
    return [Streaming(k, pw) for k, pw in sorted(best, key=lambda kp: (losses[kp], kp[1] != 2.0)) if k]
