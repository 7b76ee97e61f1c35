"""hase.measure.kernel: how many sessions a kernel's cold-weights rotation opens, and the rows it returns."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from hase.measure import kernel
from hase.measure.kernel import KernelJob, cold_session_count, measure_kernel
from hase.measure.store import CANARY_COLS, SCHEMA, Store
from hase.measure.types import MeasureSettings
from hase.runtime.types import EPConfig, TimingPolicy

EP = EPConfig(name="cpu-test")
FAST = TimingPolicy(warmup=1, min_runs=3, max_runs=10, min_time_s=0.0, max_time_s=0.5)
KIB = 1024


def settings(sessions: int = 8, max_bytes: int = 256 << 20) -> MeasureSettings:
    return MeasureSettings(kernel=FAST, model=FAST, cold_sessions=sessions, cold_max_bytes=max_bytes)


@pytest.mark.parametrize("weight_bytes, sessions, max_bytes, expected", [
    (0, 8, 256 << 20, 2),                 # no weights: two sessions, still a rotation
    (16 * KIB, 8, 256 << 20, 8),          # small weights: the configured number of copies
    (16 * KIB, 3, 256 << 20, 3),
    (16 * KIB, 8, 5 * 16 * KIB, 5),       # as many copies as fit in cold_max_bytes
    (16 * KIB, 8, 16 * KIB, 2),           # never fewer than two, even past the byte limit
    (1 << 30, 8, 256 << 20, 2),
])
def test_cold_session_count(weight_bytes, sessions, max_bytes, expected):
    assert cold_session_count(weight_bytes, settings(sessions, max_bytes)) == expected


@pytest.fixture(scope="module")
def job() -> KernelJob:
    """A single MatMul kernel with a constant (64, 64) float32 weight, as collect builds it (built before any spy)."""
    from hase.kernels import graph, split

    k = n = 64
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((k, n)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    kg = graph.kernel_graph(m, EP)
    (kn,) = split.split(kg)
    return KernelJob(kn.spec, split.kernel_model(kg, kg.nodes[kn.node_idx]).SerializeToString())


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every session measure_kernel opens (real ORT sessions, recorded on the way)."""
    opened_sessions: list[Any] = []
    real = kernel.sessions.make_session

    def spy(*args: Any, **kwargs: Any) -> Any:
        opened_sessions.append(real(*args, **kwargs))
        return opened_sessions[-1]

    monkeypatch.setattr(kernel.sessions, "make_session", spy)
    return opened_sessions


@pytest.mark.parametrize("sessions, max_kib, expected", [(3, 1 << 20, 3), (8, 3 * 16, 3), (8, 16, 2)])
def test_measure_kernel_opens_one_session_per_weight_copy(job, opened, sessions, max_kib, expected):
    assert job.weight_bytes == 64 * 64 * 4 == 16 * KIB
    rows = measure_kernel(job, EP, settings(sessions, max_kib * KIB))
    assert len(opened) == expected
    warm, cold = rows
    assert (warm["variant"], warm["n_sessions"]) == ("warm", 1)
    assert (cold["variant"], cold["n_sessions"]) == ("cold_weights", expected)
    assert cold["n_runs"] >= 2 * expected  # every copy is timed at least twice
    assert warm["weight_bytes"] == cold["weight_bytes"] == 16 * KIB


def test_measure_kernel_rows_fit_the_store(tmp_path, job, opened):
    rows = measure_kernel(job, EP, settings(2))
    cols = set(SCHEMA["kernel_measurements"][0]) - set(CANARY_COLS)  # the canary's columns: collect adds them
    assert all(set(r) == cols for r in rows)
    for r in rows:
        assert r["device"] == "cpu-test" and r["op_type"] == "MatMul"
        assert r["p10_ms"] <= r["median_ms"] <= r["p90_ms"] and FAST.min_runs <= r["n_runs"] <= FAST.max_runs
    with Store(tmp_path / "s.sqlite") as s, s.transaction():
        s.insert("kernel_measurements", rows)


def test_measure_fixed_cost_times_the_empty_kernel(opened):
    row = kernel.measure_fixed_cost(EP, settings())
    assert len(opened) == 1 and row["kind"] == "empty_kernel"
    assert set(row) == set(SCHEMA["fixed_costs"][0])
    assert row["n_runs"] <= 200  # the fixed-cost floor of 200 runs stops the loop (min_time_s is 0 here)
