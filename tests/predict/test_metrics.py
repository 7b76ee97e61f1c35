"""hase.predict.metrics: RMSPE, ±x % accuracy, Scores and per-group metrics, on hand-built numbers."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hase.errors import HaseError
from hase.predict.metrics import SCORE_COLUMNS, Scores, grouped_metrics, metrics, rmspe, score, within


def test_rmspe_and_within_follow_nn_meter_definitions():
    y, yhat = np.array([1.0, 2.0, 4.0, 10.0]), np.array([1.05, 1.7, 4.0, 11.5])
    assert rmspe(y, yhat) == pytest.approx(np.sqrt(np.mean([0.05**2, 0.15**2, 0, 0.15**2])) * 100)
    assert within(y, yhat, 0.05) == 0.5 and within(y, yhat, 0.10) == 0.5 and within(y, yhat, 0.15) == 1.0
    weighted = rmspe(y, yhat, [0.0, 0.0, 1.0, 3.0])  # only the last two count, the last three times
    assert weighted == pytest.approx(np.sqrt((0 + 3 * 0.15**2) / 4) * 100)
    m = metrics(y, yhat)
    assert m["n"] == 4 and m["median_ratio"] == pytest.approx(np.median(yhat / y))
    assert m["rmse_ms"] == pytest.approx(np.sqrt(np.mean((y - yhat) ** 2)))
    assert np.isnan(metrics([], [])["rmspe"]) and np.isnan(rmspe([], []))


def test_score_drops_pairs_it_cannot_judge():
    s = score([1.0, 0.0, np.nan, 2.0, 4.0], [1.1, 5.0, 1.0, np.inf, 4.0])
    assert s.n == 2 and s.acc10 == 1.0 and s.mean_ratio == pytest.approx(1.05)
    assert list(s.to_dict()) == list(SCORE_COLUMNS) and isinstance(s.to_dict()["n"], int)


def test_scores_round_trip_and_name_what_is_missing():
    s = score(pd.Series([1.0, 2.0]), pd.Series([1.2, 2.0]))
    assert Scores.from_dict(s.to_dict()) == s
    broken = {k: v for k, v in s.to_dict().items() if k != "rmspe"}
    with pytest.raises(HaseError, match=r"targets\.span\.held_out lacks numeric \['rmspe'\].*make train"):
        Scores.from_dict(broken, "targets.span.held_out")
    with pytest.raises(HaseError, match=r"\['n'\]"):
        Scores.from_dict({**s.to_dict(), "n": True})


def test_grouped_metrics_one_row_per_group():
    f = pd.DataFrame({"g": ["a", "a", "b"], "h": ["x", "y", "x"], "y": [1.0, 2.0, 3.0], "p": [1.0, 2.2, 3.0]})
    out = grouped_metrics(f, "g", "y", "p").set_index("g")
    assert out.loc["b", "rmspe"] == 0 and out.loc["a", "n"] == 2
    two = grouped_metrics(f, ["g", "h"], "y", "p")
    assert list(two.columns[:2]) == ["g", "h"] and len(two) == 3 and set(two["n"]) == {1}
    assert grouped_metrics(f.iloc[:0], "g", "y", "p").empty
