"""The multi-thread kernel model, fitted on real in-model spans of a real exported model at 1 and 2 threads."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import exported_model

from hase.errors import HaseError
from hase.evaluate.measured import kernel_times_ms
from hase.kernels import graph, split
from hase.predict.threads import (
    ALL,
    FEATURES,
    LATENCY_COLUMNS,
    ThreadModel,
    fit_thread_model,
    load_thread_model,
    node_excess,
    paired_spans,
    save_thread_model,
    thread_features,
)
from hase.runtime.types import EPConfig


@pytest.fixture(scope="module")
def measured() -> tuple[pd.DataFrame, list]:
    """BERT-tiny's kernels: spans at 1 and 2 intra-op threads (two profiled sessions each) and signatures."""
    path = exported_model("hf_bert_tiny_s64_b2")
    rows = []
    for p in range(2):
        for t in (1, 2):
            spans = kernel_times_ms(path, EPConfig(name=f"t{t}", intra_op_threads=t), runs=3)
            rows += [{"model": "bert", "node": n, "threads": t, "pass": p, "span_ms": ms} for n, ms in spans.items()]
    kg = graph.file_kernel_graph(path, EPConfig(name="1t", intra_op_threads=1))
    specs = {n.node_name: n.spec for n in split.split(kg)}
    long = pd.DataFrame(rows)
    long = long[long["node"].isin(list(specs))].copy()
    long["op_type"] = [specs[n].op_type for n in long["node"]]
    pairs = paired_spans(long)
    return pairs, [specs[n] for n in pairs["node"]]


@pytest.fixture(scope="module")
def model(measured: tuple[pd.DataFrame, list]) -> ThreadModel:
    pairs, specs = measured
    return fit_thread_model(pairs, specs, host="test")


def test_pairs_cover_the_kernels_at_two_threads(measured: tuple[pd.DataFrame, list]) -> None:
    pairs, specs = measured
    assert len(pairs) > 30 and set(pairs["threads"]) == {2}
    assert (pairs["t1_ms"] > 0).all() and (pairs["t_ms"] > 0).all()
    assert [s.op_type for s in specs] == pairs["op_type"].tolist()


def test_one_thread_is_the_one_thread_time(model: ThreadModel, measured: tuple[pd.DataFrame, list]) -> None:
    pairs, specs = measured
    t1 = pairs["t1_ms"].to_numpy()
    assert np.array_equal(model.predict(specs, t1, 1), t1)


def test_shares_and_times_are_physical(model: ThreadModel, measured: tuple[pd.DataFrame, list]) -> None:
    pairs, specs = measured
    t1 = pairs["t1_ms"].to_numpy()
    s = model.serial_share(specs, t1)
    assert ((s >= 0) & (s <= 1)).all()
    assert model.sigma_ms[ALL] >= 0 and all(v >= 0 for v in model.sigma_ms.values())
    for t in (2, 4, 16):
        pred = model.predict(specs, t1, t)
        assert (pred > 0).all()
        # never faster than perfect splitting, never slower than one thread plus the fork/join cost
        assert (pred >= t1 / t - 1e-12).all()
        assert (pred <= t1 + model.sigma_of([k.op_type for k in specs]) * np.log2(t) + 1e-12).all()


def test_fit_reproduces_its_own_thread_count_in_sum(model: ThreadModel, measured: tuple[pd.DataFrame, list]) -> None:
    pairs, specs = measured
    pred = model.predict(specs, pairs["t1_ms"].to_numpy(), 2).sum()
    # in-sample, time-weighted: the sum lands near the measured one (loose: the clip at 0 and 1 and the
    # forest's averaging move it; this is not an accuracy figure, benchmarks/thread_model.py is)
    assert pred == pytest.approx(pairs["t_ms"].sum(), rel=0.35)


def test_save_load_round_trip(model: ThreadModel, measured: tuple[pd.DataFrame, list], tmp_path: Path) -> None:
    pairs, specs = measured
    path = save_thread_model(model, tmp_path / "sub" / "threads.npz")
    back = load_thread_model(path)
    t1 = pairs["t1_ms"].to_numpy()
    assert np.array_equal(back.predict(specs, t1, 8), model.predict(specs, t1, 8))
    assert back.threads == (2,) and back.host == "test" and back.op_codes == model.op_codes
    assert [p.name for p in path.parent.iterdir()] == ["threads.npz"]


def test_node_excess_is_the_profilers_extra_per_node_at_more_threads() -> None:
    """Per model and pass: (spans - latency) / nodes at T less the same at 1, per log2(T); the median."""
    rows = [("a", 1, 0, 1.0, 1.1, 50), ("a", 2, 0, 0.6, 0.85, 50),  # 2 µs a node at 1 thread, 5 at 2: +3
            ("b", 1, 0, 2.0, 2.1, 100), ("b", 4, 0, 0.8, 1.4, 100),  # 1 and 6: +5 over log2(4) = 2: +2.5
            ("c", 2, 0, 1.0, 1.2, 10)]  # no one-thread row: left out
    lat = pd.DataFrame(rows, columns=list(LATENCY_COLUMNS))
    assert node_excess(lat) == pytest.approx((0.003 + 0.0025) / 2)
    assert node_excess(lat.astype(object)) == pytest.approx((0.003 + 0.0025) / 2)  # as a concat of frames reads
    assert node_excess(lat.iloc[:0]) == 0.0
    with pytest.raises(HaseError, match="lacks columns"):
        node_excess(lat.drop(columns="n_nodes"))


def test_excess_comes_off_every_kernel_above_the_floor(model: ThreadModel, measured: tuple[pd.DataFrame, list],
                                                       tmp_path: Path) -> None:
    """The excess is taken off each kernel per log2(T), never below half its perfectly split time, and survives
    a save; one thread stays the one-thread time."""
    pairs, specs = measured
    t1 = pairs["t1_ms"].to_numpy()
    less = dataclasses.replace(model, excess_ms=0.002)
    plain, off = model.predict(specs, t1, 2), less.predict(specs, t1, 2)
    assert np.all(off <= plain) and np.all(off >= 0.5 * t1 / 2 - 1e-12)
    big = plain > 0.5 * t1 / 2 + 0.002
    assert np.allclose(off[big], plain[big] - 0.002)
    assert np.array_equal(less.predict(specs, t1, 1), t1)
    back = load_thread_model(save_thread_model(less, tmp_path / "t.npz"))
    assert back.excess_ms == 0.002 and np.array_equal(back.predict(specs, t1, 4), less.predict(specs, t1, 4))
    assert model.excess_ms == 0.0  # fitted from spans alone


def test_damaged_and_missing_files_are_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(HaseError, match="not a thread model"):
        load_thread_model(bad)
    with pytest.raises(HaseError, match="no such thread model"):
        load_thread_model(tmp_path / "absent.npz")


def test_bad_inputs_name_the_problem(model: ThreadModel, measured: tuple[pd.DataFrame, list]) -> None:
    pairs, specs = measured
    with pytest.raises(HaseError, match="at least 1"):
        model.predict(specs, pairs["t1_ms"].to_numpy(), 0)
    with pytest.raises(HaseError, match="lack columns"):
        fit_thread_model(pairs.drop(columns="t_ms"), specs)
    with pytest.raises(HaseError, match="signatures"):
        fit_thread_model(pairs, specs[:-1])
    with pytest.raises(HaseError, match="no kernel measured"):
        fit_thread_model(pairs.assign(threads=1), specs)


def test_unseen_op_types_still_predict(model: ThreadModel, measured: tuple[pd.DataFrame, list]) -> None:
    _, specs = measured
    X = thread_features(specs[:3], [0.1, 0.2, 0.3], op_codes=())
    assert X.shape == (3, len(FEATURES)) and (X[:, -1] == -1).all()


def test_paired_spans_keeps_the_quickest_pass() -> None:
    long = pd.DataFrame({"model": ["m"] * 6, "node": ["a", "a", "a", "a", "b", "b"],
                         "op_type": ["Conv"] * 4 + ["Add"] * 2,
                         "threads": [1, 1, 4, 4, 1, 4], "pass": [0, 1, 0, 1, 0, 0],
                         "span_ms": [2.0, 1.5, 0.9, 0.6, 0.01, 0.02]})
    pairs = paired_spans(long).set_index("node")
    assert pairs.loc["a", "t1_ms"] == 1.5 and pairs.loc["a", "t_ms"] == 0.6 and pairs.loc["b", "threads"] == 4


def test_store_spans_pair_by_model_and_node(tiny_root: Path) -> None:
    """A real store's spans read as the sweep table with every node's signature; the same store read as if at 2
    threads pairs each kernel with itself (the pairing, not a measurement), and a device it lacks is one error."""
    from hase.predict.threads import pairs_with_specs, store_spans

    store = tiny_root / "tiny.sqlite"
    one, specs = store_spans([store], "cpu-1t", 1)
    assert len(one) > 10 and set(one["threads"]) == {1} and len(specs) == one.groupby(["model", "node"]).ngroups
    two, _ = store_spans([store], "cpu-1t", 2)
    pairs, signatures, share = pairs_with_specs(pd.concat([one, two]), specs)
    assert share == 1.0 and len(pairs) == len(one) and np.allclose(pairs["t1_ms"], pairs["t_ms"])
    assert [s.op_type for s in signatures] == pairs["op_type"].tolist()
    with pytest.raises(HaseError, match="no in-model spans of 'cpu-mt'"):
        store_spans([store], "cpu-mt", 2)
