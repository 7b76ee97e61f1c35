"""hase.evaluate.sweep_curves: a batch sweep's rows read as per-family curves, scored per batch size."""
from __future__ import annotations

import pandas as pd
import pytest

from hase.evaluate import devset, sweep_curves
from hase.predict.dataset import FAMILY


def rows(spec: dict[str, list[tuple[int, float, float]]]) -> pd.DataFrame:
    """Devset rows: model file -> [(batch, predicted ms, measured ms)], no errors."""
    out = [{devset.MODEL: m, devset.BATCH: b, devset.PREDICTED_MS: p, devset.MEASURED_MS: t,
            devset.ERROR_PCT: (p / t - 1) * 100, devset.ERROR: ""} for m, runs in spec.items() for b, p, t in runs]
    return pd.DataFrame(out)


def test_static_exports_join_by_name_and_short_sweeps_are_left_out():
    table = sweep_curves.sweep_table(rows({
        **{f"net_b{b}.onnx": [(b, 10.0 * b, 10.0 * b * 1.25)] for b in (1, 4, 16)},
        "sym.onnx": [(1, 2.0, 2.0), (2, 4.0, 3.6), (4, 8.0, 8.0)],
        "pair_b1.onnx": [(1, 1.0, 1.0)], "pair_b2.onnx": [(2, 2.0, 2.0)],  # two batch sizes: not a sweep
    }), families={"net_b1.onnx": "resnet", "net_b4.onnx": "resnet", "net_b16.onnx": "resnet"})
    assert list(table.columns) == list(sweep_curves.COLUMNS)
    assert set(table[sweep_curves.SWEEP]) == {"net", "sym"}
    assert set(table[FAMILY]) == {"resnet", "sym"}  # models.tsv's family, else the sweep's name
    net = table[table[sweep_curves.SWEEP] == "net"]
    assert list(net[devset.BATCH]) == [1, 4, 16]
    assert net[sweep_curves.MEASURED_PER_S].tolist() == pytest.approx([80.0] * 3)  # b / (12.5 b ms)
    assert net[sweep_curves.PREDICTED_PER_S].tolist() == pytest.approx([100.0] * 3)


def test_batch_scores_per_batch_size_name_the_worst_sweep():
    table = sweep_curves.sweep_table(rows({
        "a.onnx": [(1, 10.0, 10.0), (2, 20.0, 20.0), (4, 30.0, 40.0)],
        "b.onnx": [(1, 10.0, 10.5), (2, 21.0, 20.0), (4, 43.0, 40.0)],
    }))
    scores = sweep_curves.batch_scores(table).set_index(devset.BATCH)
    assert list(scores.index) == [1, 2, 4] and (scores["n"] == 2).all()
    assert scores.loc[1, "acc10"] == 1.0 and scores.loc[4, "acc10"] == 0.5
    assert scores.loc[4, sweep_curves.WORST_SWEEP] == "a"
    assert scores.loc[4, sweep_curves.WORST_ERROR_PCT] == pytest.approx(-25.0)


def test_one_plot_per_family_and_nothing_without_a_sweep():
    table = sweep_curves.sweep_table(rows({
        "x_b1.onnx": [(1, 1.0, 1.1)], "x_b2.onnx": [(2, 2.0, 2.1)], "x_b4.onnx": [(4, 4.0, 4.4)],
        "y.onnx": [(1, 1.0, 1.0), (2, 2.0, 2.0), (4, 3.0, 4.0)],
    }), families={f"x_b{b}.onnx": "cnn/small" for b in (1, 2, 4)})
    plots = sweep_curves.sweep_plots(table)
    assert set(plots) == {"sweep_cnn_small", "sweep_y"}
    assert all(p.png.startswith(b"\x89PNG") and p.name == k for k, p in plots.items())
    assert sweep_curves.sweep_plots(sweep_curves.sweep_table(rows({"z.onnx": [(1, 1.0, 1.0)]}))) == {}
