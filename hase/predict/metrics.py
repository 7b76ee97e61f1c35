"""Accuracy of latency predictions: RMSPE, ±x % accuracy, ratios; one `Scores` record per comparison.

Training scores its candidates with these, evaluation reports them, and the manifest stores them, so
every figure Hase prints is computed by this one module:

    >>> metrics([1.0, 2.0], [1.05, 2.4])
    {'n': 2, 'rmse_ms': 0.285..., 'rmspe': 14.57..., 'acc5': 0.5, 'acc10': 0.5, 'mean_ratio': 1.125, ...}
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hase.errors import HaseError

if TYPE_CHECKING:  # pragma: no cover - pandas loads only for grouped tables, never to predict
    import pandas as pd

SCORE_COLUMNS = ("n", "rmse_ms", "rmspe", "acc5", "acc10", "mean_ratio", "median_ratio")


def _floats(a: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(a, dtype=np.float64)


def rmspe(y: ArrayLike, yhat: ArrayLike, weight: ArrayLike | None = None) -> float:
    """Root mean squared percentage error: sqrt(mean(((y - yhat) / y)^2)) * 100, the mean weighted by `weight`
    (one per sample) when given."""
    yy, pp = _floats(y), _floats(yhat)
    if not len(yy):
        return float("nan")
    return float(np.sqrt(np.average(((yy - pp) / yy) ** 2, weights=None if weight is None else _floats(weight))) * 100)


def within(y: ArrayLike, yhat: ArrayLike, bound: float) -> float:
    """Share of samples with |y - yhat| / y <= bound (nn-Meter's ±bound accuracy)."""
    yy, pp = _floats(y), _floats(yhat)
    return float(np.mean(np.abs(yy - pp) / yy <= bound + 1e-12)) if len(yy) else float("nan")


@dataclass(frozen=True)
class Scores:
    """How well predictions match measurements: count, RMSE (ms), RMSPE (%), ±5/±10 % accuracy, ratios yhat/y."""

    n: int
    rmse_ms: float
    rmspe: float
    acc5: float
    acc10: float
    mean_ratio: float
    median_ratio: float

    def to_dict(self) -> dict[str, float]:
        """The scores as a plain dict (a DataFrame row, a JSON object)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "scores") -> Scores:
        """Scores from a dict written by `to_dict`; a missing or non-numeric value is a HaseError naming it."""
        bad = [k for k in SCORE_COLUMNS if not isinstance(d.get(k), (int, float)) or isinstance(d.get(k), bool)]
        if bad:
            raise HaseError(f"{where} lacks numeric {bad}: retrain with `make train`")
        return cls(int(d["n"]), *(float(d[k]) for k in SCORE_COLUMNS[1:]))


def score(y: ArrayLike, yhat: ArrayLike) -> Scores:
    """Scores of predictions `yhat` against measurements `y`; pairs with a non-finite value or y <= 0 are dropped."""
    yy, pp = _floats(y), _floats(yhat)
    ok = np.isfinite(yy) & np.isfinite(pp) & (yy > 0)
    yy, pp = yy[ok], pp[ok]
    ratio = pp / yy if len(yy) else np.array([np.nan])
    return Scores(n=len(yy), rmse_ms=float(np.sqrt(np.mean((yy - pp) ** 2))) if len(yy) else float("nan"),
                  rmspe=rmspe(yy, pp), acc5=within(yy, pp, 0.05), acc10=within(yy, pp, 0.10),
                  mean_ratio=float(np.mean(ratio)), median_ratio=float(np.median(ratio)))


def metrics(y: ArrayLike, yhat: ArrayLike) -> dict[str, float]:
    """`score` as a dict: n, rmse_ms, rmspe, acc5, acc10, mean_ratio, median_ratio."""
    return score(y, yhat).to_dict()


def grouped_metrics(frame: pd.DataFrame, by: str | list[str], y: str, yhat: str) -> pd.DataFrame:
    """`metrics` per group, one row per group.

        family | y | p           ->   family | n | rmse_ms | rmspe | acc5 | acc10 | mean_ratio | median_ratio
        a      | 1 | 1.1               a      | 2 | ...
    """
    import pandas as pd  # noqa: PLC0415 - loads only when a table is asked for: `hase predict` runs without pandas

    names = [by] if isinstance(by, str) else by
    rows = []
    for key, g in frame.groupby(by):
        values = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(names, values, strict=True)), **metrics(g[y], g[yhat])})
    return pd.DataFrame(rows)
