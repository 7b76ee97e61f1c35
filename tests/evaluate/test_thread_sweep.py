"""Thread sweeps of real exported models: spans at 1 and 2 threads, and unprofiled latencies for the first models."""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import exported_model

from hase.evaluate import thread_sweep
from hase.predict.threads import LATENCY_COLUMNS, node_excess


def test_a_sweep_times_the_first_models_unprofiled_beside_their_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real models, latencies for the first one only: its rows at both counts, with its spans' sum and node
    count; the second has spans but no latency row, and the excess reads the table as it comes."""
    monkeypatch.setattr(thread_sweep, "LATENCY_MODELS", 1)
    models = [(name, exported_model(name)) for name in ("hf_bert_tiny_s64_b2", "hf_gpt2_tiny_s64_b1")]
    sweep = thread_sweep.sweep_models(models, [1, 2], budget_s=600, runs=2, gated=False)
    assert set(sweep.spans["model"]) == {"hf_bert_tiny_s64_b2", "hf_gpt2_tiny_s64_b1"}
    lat = sweep.latency
    assert list(lat.columns) == list(LATENCY_COLUMNS) and list(lat["model"]) == ["hf_bert_tiny_s64_b2"] * 2
    assert sorted(lat["threads"]) == [1, 2] and np.all(lat["latency_ms"] > 0) and np.all(lat["n_nodes"] > 30)
    one = sweep.spans[(sweep.spans["model"] == "hf_bert_tiny_s64_b2") & (sweep.spans["threads"] == 1)]
    assert lat.loc[lat["threads"] == 1, "span_sum_ms"].iloc[0] == pytest.approx(one["span_ms"].sum())
    assert math.isfinite(node_excess(lat))
