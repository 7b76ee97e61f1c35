"""The calibration from a model's kernel sum to its latency, and the least-squares fits behind it.

    latency = alpha * sum(kernel) + beta                        form "scale"
    latency = alpha * sum(kernel) + gamma * n_kernels + beta    form "per_kernel"
    latency = (alpha + delta * ln S) * sum(kernel) + gamma * n_kernels + beta    form "size"
              (S: the sum in ms, clipped to the smallest and largest sums the fit saw)
    latency = alpha * sum(kernel) + gamma * n_kernels           form "large"
              (gamma read off the small models, `node_term`; alpha fitted on the large ones alone, no beta)

The per-kernel term exists because a standalone kernel run pays a fixed invocation cost that a node
inside a model does not. The size term lets the scale grow with the model (inside a large model a kernel
finds the caches its standalone run had warm taken by other nodes' weights and activations); the clip keeps
it from extrapolating. It took the looked-at dev sets' median error from -4.4 % to -1.7 % and put a fresh
held-out set 3-7 % slow, so training scores it but does not choose it by default ([training]
calibration_forms; docs/predictor.md). alpha, beta, gamma, delta are fitted per device and target on measured models
(least squares, relative least squares, or the robust Huber loss); `hase train` keeps the candidate
that wins on held-out families and stores it in the manifest. `size_balance` weights the models so that every
half-decade of latency has the same say in the fit (the zoo's hundred small models would otherwise decide the
scale that real models of 10-300 ms are predicted with).

Fitted together, gamma trades against alpha: the zoo's calibration models run a median 23 kernels per ms of kernel
sum, real models about 1, so gamma is pinned where real models never are, and eight collects of one host fitted
alpha 0.85-1.02 from measurements that agreed within a few per cent (docs/results.md, "Why the six runs differ").
"large" splits the two: gamma is the median per-node excess of the small models (under NODE_SMALL_MS, where the
per-node cost is most of the latency), alpha is fitted with it on the models of LARGE_MS and more of kernel sum
(real models' size and kernels-per-ms), which a real model's prediction depends on. It has no intercept: a model's
fixed cost is what the small models' latency is made of, and gamma already reads it off them (the median residual
they leave is about 0 by construction); an intercept fitted on models of 5-300 ms is a fraction of a millisecond
they cannot tell from noise, and it absorbs whatever gamma is off by for their many kernels, then lands whole on
every small model (a noisy collect on `bd14ee861c62`, 2026-12-07: gamma -5.2 us/node from the small models, beta
+0.36 ms from the large ones, the small models a median 54 % off in-sample; with no intercept 15 %).
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hase.errors import HaseError
from hase.predict import residency

log = logging.getLogger(__name__)

FORMS = ("raw", "scale", "per_kernel", "size", "large")
FITTERS = ("none", "ols", "relative", "huber")
CANDIDATES = (("raw", "none"), ("scale", "ols"), ("scale", "relative"), ("scale", "huber"),
              ("per_kernel", "ols"), ("per_kernel", "relative"), ("per_kernel", "huber"),
              ("size", "ols"), ("size", "relative"), ("size", "huber"),
              ("large", "ols"), ("large", "relative"), ("large", "huber"))
COEFFICIENTS = ("alpha", "beta", "gamma", "delta", "sum_lo_ms", "sum_hi_ms", "kappa", "stream_power")
# absent from manifests written before the size form (delta, sum bounds) and weight streaming (kappa, and its
# power: a smooth maximum before it was fitted)
OPTIONAL = {"delta": 0.0, "sum_lo_ms": 1.0, "sum_hi_ms": 1.0, "kappa": 0.0, "stream_power": 2.0}
STREAMING_KEYS = ("kappa", "stream_power")
BALANCES = ("none", "size")  # [training] calibration_balance: how the calibration's models share its loss
BINS_PER_DECADE = 2  # size_balance's bins: half-decades of measured latency
NODE_SMALL_MS = 2.0  # `node_term` reads the per-node term off models quicker than this (their sums are mostly
NODE_MIN_MODELS = 3  # per-node costs) or, when fewer than NODE_MIN_MODELS are, off the NODE_MIN_MODELS quickest
LARGE_MS = 5.0  # the "large" form fits alpha on the models of this kernel sum (ms) and more, or, when fewer
LARGE_MIN_MODELS = 8  # than LARGE_MIN_MODELS are, on the LARGE_MIN_MODELS largest
MIN_SHARE = 0.05  # the least share of a kernel sum a calibration leaves: only a model far below the fitted sizes
# reaches it (standalone `warm` sums overshoot a model up to 13x, so a larger share would cut real predictions)


@dataclass(frozen=True)
class Calibration:
    """latency = (alpha + delta * ln clip(sum, sum_lo_ms, sum_hi_ms)) * sum + gamma * n_kernels + beta (delta is 0
    but for the `size` form, gamma 0 for `scale`, all trivial for `raw`); the sum is of kernel predictions with
    their weight streaming, kappa and stream_power (`hase.predict.residency`; kappa 0: none), which `compose`
    applies."""

    form: str = "raw"
    fitter: str = "none"
    alpha: float = 1.0
    beta: float = 0.0
    gamma: float = 0.0
    delta: float = 0.0
    sum_lo_ms: float = 1.0
    sum_hi_ms: float = 1.0
    kappa: float = 0.0
    stream_power: float = 2.0

    @property
    def streaming(self) -> residency.Streaming:
        """The weight streaming this calibration was fitted with."""
        return residency.Streaming(self.kappa, self.stream_power)

    @property
    def name(self) -> str:
        """form/fitter, or "raw"."""
        return self.form if self.form == "raw" else f"{self.form}/{self.fitter}"

    def apply(self, sum_ms: ArrayLike, n_kernels: ArrayLike) -> NDArray[np.float64]:
        """Calibrated latency (ms) from kernel sums and kernel counts, never under MIN_SHARE of the sum: below the
        smallest models it was fitted on, a negative intercept would make a one-kernel model's latency negative."""
        s, n = np.asarray(sum_ms, np.float64), np.asarray(n_kernels, np.float64)
        scale = self.alpha + self.delta * _log_size(s, self.sum_lo_ms, self.sum_hi_ms) if self.delta else self.alpha
        return np.maximum(scale * s + self.gamma * n + self.beta, MIN_SHARE * s)

    def to_dict(self) -> dict[str, Any]:
        """The form, fitter and coefficients as a plain dict (for the manifest); the size form's own keys only for
        it and the streaming keys only when kappa is set, so a manifest written before either reads and writes back
        unchanged."""
        d = dataclasses.asdict(self)
        return {k: v for k, v in d.items() if k not in OPTIONAL or (self.form == "size" and k not in STREAMING_KEYS)
                or (k in STREAMING_KEYS and self.kappa)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "calibration") -> Calibration:
        """A calibration from its manifest entry; a missing or mistyped key is a HaseError naming it."""
        d = {**OPTIONAL, **d}
        texts = [k for k in ("form", "fitter") if not isinstance(d.get(k), str)]
        numbers = [k for k in COEFFICIENTS if not isinstance(d.get(k), (int, float)) or isinstance(d.get(k), bool)]
        if texts or numbers:
            raise HaseError(f"{where} lacks {texts + numbers}: retrain with `make train`")
        return cls(d["form"], d["fitter"], *(float(d[k]) for k in COEFFICIENTS))

    def describe(self) -> str:
        """The coefficients in words, e.g. "α=1.0227, β=-0.0274 ms, γ=21.50 µs/kernel, δ=0.0124 per ln(Σ/ms)"."""
        text = f"α={self.alpha:.4f}, β={self.beta:.4f} ms, γ={self.gamma * 1e3:.2f} µs/kernel"
        if self.delta:
            text += f", δ={self.delta:.4f} per ln(Σ/ms) for Σ in {self.sum_lo_ms:.3g}–{self.sum_hi_ms:.3g} ms"
        if self.kappa:
            text += f", {self.streaming.describe()} (weights streamed from memory)"
        return text

    def scaled(self, c: float) -> Calibration:
        """This calibration with every predicted latency multiplied by c (the clip bounds stay)."""
        return dataclasses.replace(self, alpha=self.alpha * c, beta=self.beta * c, gamma=self.gamma * c,
                                   delta=self.delta * c)


def _log_size(s: NDArray[np.float64], lo: float, hi: float) -> NDArray[np.float64]:
    """ln of the sums (ms) clipped to [lo, hi]: the size term's regressor, flat outside what the fit saw."""
    return np.asarray(np.log(np.clip(s, max(lo, 1e-9), max(hi, lo, 1e-9))), np.float64)


def relative_lstsq(X: NDArray[np.float64], y: NDArray[np.float64],
                   weight: NDArray[np.float64] | None = None, offset: NDArray[np.float64] | None = None
                   ) -> NDArray[np.float64]:
    """Coefficients c minimising sum(w * ((X @ c + offset - y) / y)^2): least squares on relative error, what RMSPE
    measures (w = 1 without `weight`; offset 0 without `offset`, a known part of each prediction)."""
    root = np.ones_like(y) if weight is None else np.sqrt(weight)
    target = root if offset is None else (1 - offset / y) * root
    return np.asarray(np.linalg.lstsq(X / y[:, None] * root[:, None], target, rcond=None)[0], dtype=np.float64)


def _huber_relative(X: NDArray[np.float64], y: NDArray[np.float64],
                    weight: NDArray[np.float64] | None = None,
                    offset: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """`relative_lstsq` with the Huber loss: a few odd models cannot pull the fit. Where scikit-learn's L-BFGS-B
    stops abnormally (it raises; seen on a few small models with very unequal weights), the plain relative least
    squares, with a warning."""
    from sklearn.linear_model import HuberRegressor

    model = HuberRegressor(fit_intercept=False, epsilon=1.35, alpha=0.0, max_iter=1000)
    try:
        target = np.ones_like(y) if offset is None else 1 - offset / y
        coef: NDArray[np.float64] = model.fit(X / y[:, None], target, sample_weight=weight).coef_
    except ValueError as exc:
        log.warning("Huber calibration fit failed (%s): using relative least squares", str(exc).splitlines()[0])
        return relative_lstsq(X, y, weight, offset)
    return coef


def size_balance(measured_ms: ArrayLike, bins_per_decade: int = BINS_PER_DECADE) -> NDArray[np.float64]:
    """A weight per model, mean 1, that gives every bin of latency (`bins_per_decade` per decade) the same total
    weight: the calibration then fits models of every size alike, as users' models come in every size, not in the
    proportions the zoo was sampled in (docs/results.md: what it did to six collects of one host's own predictor).
    Non-finite or non-positive latencies share one bin."""
    y = np.asarray(measured_ms, np.float64)
    ok = np.isfinite(y) & (y > 0)
    bins = np.where(ok, np.floor(np.log10(np.where(ok, y, 1.0)) * bins_per_decade), np.inf)
    _, inverse, counts = np.unique(bins, return_inverse=True, return_counts=True)
    w = 1.0 / counts[inverse]
    return np.asarray(w / w.mean() if len(w) else w, np.float64)


def node_term(sum_ms: ArrayLike, n_kernels: ArrayLike, measured_ms: ArrayLike) -> float:
    """The "large" form's per-node term (ms per kernel): minus the median over the small models (measured under
    NODE_SMALL_MS, or the NODE_MIN_MODELS quickest) of (kernel sum - latency) / kernels; NaN without a model."""
    s, n, y = (np.asarray(a, np.float64) for a in (sum_ms, n_kernels, measured_ms))
    ok = np.isfinite(s) & np.isfinite(y) & (y > 0) & (n > 0)
    s, n, y = s[ok], n[ok], y[ok]
    if not len(y):
        return float("nan")
    small = np.flatnonzero(y < NODE_SMALL_MS)
    if len(small) < NODE_MIN_MODELS:
        small = np.argsort(y)[:NODE_MIN_MODELS]
    return -float(np.median(((s - y) / n)[small]))


def large_rows(sum_ms: NDArray[np.float64]) -> NDArray[np.intp]:
    """The rows the "large" form fits alpha and beta on: kernel sums of LARGE_MS and more, or the LARGE_MIN_MODELS
    largest when fewer are."""
    rows = np.flatnonzero(sum_ms >= LARGE_MS)
    return rows if len(rows) >= LARGE_MIN_MODELS else np.argsort(sum_ms)[::-1][:LARGE_MIN_MODELS]


def _design(sum_ms: NDArray[np.float64], n_kernels: NDArray[np.float64], form: str) -> NDArray[np.float64]:
    if form == "large":  # alpha alone: gamma is given, and there is no intercept (the module docstring)
        return sum_ms[:, None]
    if form == "scale":
        return np.column_stack([sum_ms, np.ones_like(sum_ms)])
    cols = [sum_ms, np.ones_like(sum_ms), n_kernels]
    if form == "size":
        cols.append(sum_ms * np.log(sum_ms))
    return np.column_stack(cols)


def fit_calibration(sum_ms: ArrayLike, n_kernels: ArrayLike, measured_ms: ArrayLike,
                    form: str = "scale", fitter: str = "relative", weight: ArrayLike | None = None) -> Calibration:
    """Fit a calibration form on models' kernel sums against their measured latency.

    ols minimises squared ms (large models dominate); relative minimises squared relative error
    (what RMSPE measures); huber is relative with the robust Huber loss (a few odd models cannot
    pull the fit). `weight` (one per model, > 0; all 1 when None) scales each model's share of the loss:
    training gives models measured on a busy host less (`hase.predict.trust`). "large" reads gamma off the small
    models (`node_term`) and fits alpha alone on the large ones (`large_rows`; beta 0). Fewer models than
    coefficients + 1 falls back to `raw`.
    """
    if form not in FORMS or fitter not in FITTERS:
        raise HaseError(f"unknown calibration {form}/{fitter}: forms {list(FORMS)}, fitters {list(FITTERS)}")
    s, n, y = (np.asarray(a, np.float64) for a in (sum_ms, n_kernels, measured_ms))
    w = np.ones_like(y) if weight is None else np.asarray(weight, np.float64)
    if w.shape != y.shape or not np.all(np.isfinite(w) & (w > 0)):
        raise ValueError(f"calibration weights must be {len(y)} finite positive numbers")
    ok = np.isfinite(s) & np.isfinite(y) & (y > 0) & ((s > 0) if form == "size" else True)  # size takes ln(sum)
    s, n, y, w = s[ok], n[ok], y[ok], w[ok]
    if form == "raw" or fitter == "none":
        return Calibration()
    gamma_m = None
    if form == "large":
        gamma_m = node_term(s, n, y)
        rows = large_rows(s)
        s, n, y, w = s[rows], n[rows], y[rows], w[rows]
    offset = None if gamma_m is None else gamma_m * n
    X = _design(s, n, form)
    if len(y) < X.shape[1] + 1:
        log.warning("only %d models to fit a %s calibration: using the raw sum", len(y), form)
        return Calibration()
    unweighted = weight is None or bool(np.all(w == 1.0))
    if fitter == "ols":
        root = np.sqrt(w)
        coef = np.linalg.lstsq(X * root[:, None], (y if offset is None else y - offset) * root, rcond=None)[0]
    elif fitter == "relative":
        coef = relative_lstsq(X, y, None if unweighted else w, offset)
    else:
        coef = _huber_relative(X, y, None if unweighted else w, offset)
    gamma = float(coef[2]) if form in ("per_kernel", "size") else gamma_m or 0.0
    if form == "size":
        return Calibration(form, fitter, float(coef[0]), float(coef[1]), gamma, float(coef[3]), float(s.min()),
                           float(s.max()))
    beta = float(coef[1]) if len(coef) > 1 else 0.0
    return Calibration(form, fitter, float(coef[0]), beta, gamma)
