"""hase.evaluate.worst: the worst models with the kernels that carry their error, first in the report."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tiny_store import build_tiny_store, train_tiny

from hase.evaluate import worst as W
from hase.evaluate.evaluation import evaluate_predictor
from hase.evaluate.report import write_report
from hase.predict import dataset as D


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.getbasetemp() / "hase_tiny"
    root.mkdir(exist_ok=True)
    build_tiny_store(root)
    train_tiny(root)
    return root


def test_largest_differences_rank_nodes_by_what_they_add_to_the_error():
    nodes = pd.DataFrame({W.KERNEL_PRED_MS: [1.0, 115.0, 2.0, 0.5], W.IN_MODEL_MS: [1.1, 0.1, np.nan, 3.0]})
    top = W.largest_differences(nodes, 3)
    assert list(top.index) == [1, 3, 2]  # +114.9, -2.5, and 2.0 with no in-model time (its whole prediction)
    assert top[W.KERNEL_DIFF_MS].iloc[0] == pytest.approx(114.9) and np.isnan(top[W.KERNEL_DIFF_MS].iloc[2])


def test_the_worst_held_out_models_come_with_their_kernels(tiny_root):
    ev = evaluate_predictor(tiny_root / "tiny.sqlite", tiny_root / "predictors" / "cpu-1t")
    worst = ev.worst
    assert list(worst.columns) == list(W.STORE_COLUMNS) and len(worst)
    models = list(dict.fromkeys(worst[D.MODEL_ID]))
    assert 1 <= len(models) <= W.WORST_MODELS and worst.groupby(D.MODEL_ID).size().max() <= W.WORST_KERNELS
    errors = worst.drop_duplicates(D.MODEL_ID)[W.ERROR_PCT].abs().to_numpy()
    assert np.all(np.diff(errors) <= 0)  # worst model first
    held = ev.models.dropna(subset=["calibrated_held_out_ms"])
    assert errors[0] == pytest.approx(((held["calibrated_held_out_ms"] / held[D.MEASURED_MS] - 1).abs() * 100).max())
    data = D.load_device_data(tiny_root / "tiny.sqlite")
    spans = data.nodes.set_index([D.MODEL_ID, D.NODE_NAME])[D.SPAN_MS]
    for _, r in worst.iterrows():  # the in-model time is the node's profiled span; the difference is pred - span
        assert r[W.IN_MODEL_MS] == pytest.approx(spans[r[D.MODEL_ID], r[D.NODE_NAME]])
        assert r[W.KERNEL_DIFF_MS] == pytest.approx(r[W.KERNEL_PRED_MS] - r[W.IN_MODEL_MS])
    assert set(worst[W.PRED_FROM]) <= {W.HELD_OUT, W.FINAL}


def test_the_report_opens_with_the_worst_models(tiny_root, tmp_path):
    ev = evaluate_predictor(tiny_root / "tiny.sqlite", tiny_root / "predictors" / "cpu-1t")
    paths = write_report(ev, tmp_path / "rep")
    md = paths["report.md"].read_text()
    first = md.index("## Worst models (held out)")
    assert first < md.index("![") and first < md.index("## Each way of summing")
    assert ev.worst[D.MODEL_ID].iloc[0] in md[first:md.index("![")]
    assert "kernel_diff_ms" in md[md.index("## Glossary"):]
    page = paths["report.html"].read_text()
    assert page.index('id="worst"') < page.index('id="plots"')
