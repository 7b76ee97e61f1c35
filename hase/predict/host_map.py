"""A source host's kernel predictions moved to another host: a multiplier that depends on the kernel's size.

Two hosts do not differ by one factor. Measured on a Zen 4 VM against a predictor trained on Zen 5, kernels the
source predicts at 1-3 µs ran 1.3-1.4x slower, those of 0.1-1 ms 2.1-2.2x, in every op type alike (per-call
overheads follow the clock, large kernels the vector units and memory). One scale per forest, the ratio of summed
times, is set by the large kernels, so it made small kernels, and with them small models, too slow; the
recalibration then bent α down to compensate, and large models came out too fast.

Nor do they differ by size alone. From that Zen 4 VM to a 2-core Xeon (family 6 model 207), kernels of the same
forest and size went opposite ways by their arithmetic intensity (FLOPs per byte moved): batch-1 classifier GEMMs and
convolutions under 1 FLOP/byte ran 1.6-2x slower, transformer GEMMs and large convolutions over 10 FLOPs/byte
0.7-0.9x (faster): the roofline's two slopes, compute and memory, moved apart (`benchmarks/host_ratios.py`). A size
curve fitted on the zoo's classifier heads made every real transformer's GEMMs 20-40 % too slow there.

So the map is `log(target / source) = curve(log10 source_ms) + ai_curve(log10 FLOPs/byte) + offset[forest]`: each
curve is the ratio of summed measured to summed predicted times of the kernels near each knot (triangular weights,
one knot apart), the other curve applied first (backfitted, `BACKFIT` rounds), shrunk by `shrink` pseudo-kernels
(the size curve toward the global ratio, the intensity curve toward 1) and flat past the values measured; each
forest's offset is its own ratio of sums once both curves are applied, shrunk toward 0 the same way. A map without an
intensity curve (written before it) applies the size curve alone. It is applied to a prediction after
its band clamp, so the bands, learned on the source host, stay in the source host's terms; a predictor adapted
again carries its maps in order, each fitted on what the ones before it predict.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

KNOTS: tuple[float, ...] = (-3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0)  # log10 ms: 1 µs to 10 ms
AI_KNOTS: tuple[float, ...] = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5)  # log10 FLOPs/byte: 0.1 to 316
AI_FLOOR = 0.1  # FLOPs/byte a kernel without arithmetic (a Reshape, a Concat) is put at: memory-bound
HALF_WIDTH = 0.5  # log10 units: a kernel weighs on the two knots around it
BACKFIT = 4  # rounds of fitting each curve with the other applied


def forest_label(key: str, source: str, family: str) -> str:
    """The name a forest goes by in a host map: its op key (`source` "op"), else family:source of a fallback."""
    return key if source == "op" else f"{family}:{source}"


@dataclass(frozen=True)
class HostMap:
    """log(target / source) of a kernel prediction: a curve over log10 of the source prediction (ms), linear
    between `knots` and flat past them, plus a log offset per forest label (0 for a forest not listed)."""

    knots: tuple[float, ...]
    curve: tuple[float, ...]
    offsets: Mapping[str, float] = field(default_factory=dict)
    ai_knots: tuple[float, ...] = ()  # the intensity curve over log10 FLOPs/byte; () for none
    ai_curve: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if len(self.knots) < 1 or len(self.knots) != len(self.curve):
            raise ValueError(f"host map: {len(self.knots)} knots and {len(self.curve)} curve values: give as many")
        if len(self.ai_knots) != len(self.ai_curve):
            raise ValueError(f"host map: {len(self.ai_knots)} intensity knots and {len(self.ai_curve)} curve values: "
                             f"give as many")
        if any(b <= a for k in (self.knots, self.ai_knots) for a, b in itertools.pairwise(k)):
            raise ValueError("host map: knots must increase")
        if not all(math.isfinite(v) for v in (*self.knots, *self.curve, *self.offsets.values(), *self.ai_knots,
                                              *self.ai_curve)):
            raise ValueError("host map: a knot, curve value or offset is not finite")

    def log_factor(self, source_ms: ArrayLike, labels: Sequence[str],
                   intensity: ArrayLike | None = None) -> NDArray[np.float64]:
        """Each prediction's log multiplier; `intensity` (FLOPs/byte per kernel) is needed when the map has an
        intensity curve."""
        x = np.log10(np.maximum(np.asarray(source_ms, dtype=np.float64), 1e-9))
        off = np.array([self.offsets.get(label, 0.0) for label in labels], dtype=np.float64)
        out = np.interp(x, self.knots, self.curve) + off
        if self.ai_knots:
            if intensity is None:
                raise ValueError("host map: this map has an intensity curve: give each kernel's FLOPs per byte")
            out = out + np.interp(log_intensity(intensity), self.ai_knots, self.ai_curve)
        return np.asarray(out, dtype=np.float64)

    def describe(self) -> str:
        """The curve in words, e.g. "×1.34 at 1 µs, ×1.61 at 3.2 µs, ..., ×2.15 at 10 ms"."""
        def size(k: float) -> str:
            ms = 10.0 ** k
            return f"{ms * 1e3:.3g} µs" if ms < 1 else f"{ms:.3g} ms"
        text = ", ".join(f"×{math.exp(v):.2f} at {size(k)}" for k, v in zip(self.knots, self.curve, strict=True))
        if self.ai_knots:
            text += "; by intensity " + ", ".join(f"×{math.exp(v):.2f} at {10 ** k:.3g} FLOP/B"
                                                  for k, v in zip(self.ai_knots, self.ai_curve, strict=True))
        return text

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"knots": list(self.knots), "curve": list(self.curve), "offsets": dict(self.offsets)}
        if self.ai_knots:
            d |= {"ai_knots": list(self.ai_knots), "ai_curve": list(self.ai_curve)}
        return d  # exact: a saved predictor predicts bit for bit what the fitted one did

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostMap:
        """The map `to_dict` wrote; ValueError names what is wrong."""
        try:
            offsets = d.get("offsets", {})
            return cls(tuple(float(v) for v in d["knots"]), tuple(float(v) for v in d["curve"]),
                       {str(k): float(v) for k, v in offsets.items()},
                       tuple(float(v) for v in d.get("ai_knots", ())), tuple(float(v) for v in d.get("ai_curve", ())))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"host map: {exc!r}: expected knots, curve and offsets") from None


def log_intensity(intensity: ArrayLike) -> NDArray[np.float64]:
    """log10 of FLOPs per byte, a kernel without arithmetic (or bytes) put at AI_FLOOR."""
    a = np.asarray(intensity, dtype=np.float64)
    return np.log10(np.maximum(np.where(np.isfinite(a), a, AI_FLOOR), AI_FLOOR))


def _knot_curve(x: NDArray[np.float64], y: NDArray[np.float64], moved: NDArray[np.float64], knots: Sequence[float],
                shrink: float, toward: float) -> tuple[float, ...]:
    """Per knot, the shrunk log ratio of summed `y` to summed `moved` of the kernels near it (triangular weights);
    a knot no kernel weighs on takes its nearest measured knot's value (flat past the values measured)."""
    est: dict[int, float] = {}
    for i, k in enumerate(knots):
        w = np.clip(1.0 - np.abs(x - k) / HALF_WIDTH, 0.0, None)
        n = float(w.sum())
        if n >= 1.0:
            est[i] = (n * math.log(float((w * y).sum() / (w * moved).sum())) + shrink * toward) / (n + shrink)
    if not est:
        return tuple(toward for _ in knots)
    return tuple(est[i] if i in est else est[min(est, key=lambda j: abs(j - i))] for i in range(len(knots)))


def fit_host_map(labels: Sequence[str], source_ms: ArrayLike, measured_ms: ArrayLike, shrink: float = 5.0,
                 knots: Sequence[float] = KNOTS, intensity: ArrayLike | None = None,
                 ai_knots: Sequence[float] = AI_KNOTS) -> HostMap:
    """The map from `source_ms` (a source predictor's kernel predictions) to `measured_ms` (the same kernels
    measured on the target host), each kernel routed to the forest `labels` names, with an intensity curve when
    `intensity` (each kernel's FLOPs per byte) is given (module docstring)."""
    p = np.asarray(source_ms, dtype=np.float64)
    y = np.asarray(measured_ms, dtype=np.float64)
    ok = np.isfinite(p) & np.isfinite(y) & (p > 0) & (y > 0)
    if not ok.any():
        raise ValueError("host map: no kernel has both a prediction and a measurement")
    p, y, lab = p[ok], y[ok], [label for label, keep in zip(labels, ok, strict=True) if keep]
    g = math.log(y.sum() / p.sum())
    x = np.log10(p)
    size_knots = tuple(float(k) for k in knots)
    curve = _knot_curve(x, y, p, size_knots, shrink, g)
    m = HostMap(size_knots, curve)
    if intensity is not None:
        a = log_intensity(np.asarray(intensity, dtype=np.float64)[ok])
        ai_k = tuple(float(k) for k in ai_knots)
        ai = tuple(0.0 for _ in ai_k)
        for _ in range(BACKFIT):
            ai = _knot_curve(a, y, p * np.exp(np.interp(x, size_knots, curve)), ai_k, shrink, 0.0)
            curve = _knot_curve(x, y, p * np.exp(np.interp(a, ai_k, ai)), size_knots, shrink, g)
        m = HostMap(size_knots, curve, {}, ai_k, ai)
    moved = p * np.exp(m.log_factor(p, lab, None if intensity is None else np.asarray(intensity)[ok]))
    offsets = {label: n * math.log(ys / ms) / (n + shrink) for label, ys, ms, n in label_sums(lab, y, moved)}
    return HostMap(m.knots, m.curve, offsets, m.ai_knots, m.ai_curve)


def label_sums(labels: Sequence[str], a: ArrayLike, b: ArrayLike) -> list[tuple[str, float, float, int]]:
    """Per distinct label (sorted): the sums of `a` and of `b` over its kernels, and their count."""
    names, inverse = np.unique(np.asarray(labels, dtype=str), return_inverse=True)
    sa = np.bincount(inverse, weights=np.asarray(a, dtype=np.float64), minlength=len(names))
    sb = np.bincount(inverse, weights=np.asarray(b, dtype=np.float64), minlength=len(names))
    n = np.bincount(inverse, minlength=len(names))
    return [(str(k), float(x), float(z), int(c)) for k, x, z, c in zip(names, sa, sb, n, strict=True)]
