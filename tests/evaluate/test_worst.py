"""hase.evaluate.worst: the worst models with the kernels that carry their error, first in the report."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hase.evaluate import worst
from hase.evaluate.evaluation import evaluate_predictor
from hase.evaluate.report import write_report
from hase.predict import dataset


def test_largest_differences_rank_nodes_by_what_they_add_to_the_error():
    nodes = pd.DataFrame({worst.KERNEL_PRED_MS: [1.0, 115.0, 2.0, 0.5], worst.IN_MODEL_MS: [1.1, 0.1, np.nan, 3.0]})
    top = worst.largest_differences(nodes, 3)
    assert list(top.index) == [1, 3, 2]  # +114.9, -2.5, and 2.0 with no in-model time (its whole prediction)
    assert top[worst.KERNEL_DIFF_MS].iloc[0] == pytest.approx(114.9) and np.isnan(top[worst.KERNEL_DIFF_MS].iloc[2])


def test_the_worst_held_out_models_come_with_their_kernels(tiny_root):
    ev = evaluate_predictor(tiny_root / "tiny.sqlite", tiny_root / "predictors" / "cpu-1t")
    rows = ev.worst
    assert list(rows.columns) == list(worst.STORE_COLUMNS) and len(rows)
    models = list(dict.fromkeys(rows[dataset.MODEL_ID]))
    assert 1 <= len(models) <= worst.WORST_MODELS and rows.groupby(dataset.MODEL_ID).size().max() <= worst.WORST_KERNELS
    errors = rows.drop_duplicates(dataset.MODEL_ID)[worst.ERROR_PCT].abs().to_numpy()
    assert np.all(np.diff(errors) <= 0)  # worst model first
    held = ev.models.dropna(subset=["calibrated_held_out_ms"])
    ratio = held["calibrated_held_out_ms"] / held[dataset.MEASURED_MS]
    assert errors[0] == pytest.approx(((ratio - 1).abs() * 100).max())
    data = dataset.load_device_data(tiny_root / "tiny.sqlite")
    spans = data.nodes.set_index([dataset.MODEL_ID, dataset.NODE_NAME])[dataset.SPAN_MS]
    for _, r in rows.iterrows():  # the in-model time is the node's profiled span; the difference is pred - span
        assert r[worst.IN_MODEL_MS] == pytest.approx(spans[r[dataset.MODEL_ID], r[dataset.NODE_NAME]])
        assert r[worst.KERNEL_DIFF_MS] == pytest.approx(r[worst.KERNEL_PRED_MS] - r[worst.IN_MODEL_MS])
    assert set(rows[worst.PRED_FROM]) <= {worst.HELD_OUT, worst.FINAL}


def test_the_report_opens_with_the_worst_models(tiny_root, tmp_path):
    ev = evaluate_predictor(tiny_root / "tiny.sqlite", tiny_root / "predictors" / "cpu-1t")
    paths = write_report(ev, tmp_path / "rep")
    md = paths["report.md"].read_text()
    first = md.index("## Worst models (held out)")
    assert first < md.index("![") and first < md.index("## Each way of summing")
    assert ev.worst[dataset.MODEL_ID].iloc[0] in md[first:md.index("![")]
    assert "kernel_diff_ms" in md[md.index("## Glossary"):]
    page = paths["report.html"].read_text()
    assert page.index('id="worst"') < page.index('id="plots"')
