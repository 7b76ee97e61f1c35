"""hase.measure.model: one full model on one device, timed and profiled, as rows for the store."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest
from conftest import conv_bn_relu_model

from hase.kernels import graph, split
from hase.kernels.types import KernelNode
from hase.measure.model import measure_model, time_model
from hase.measure.schema import PASS_COLS
from hase.measure.store import CANARY_COLS, DECOMP_COLS, SCHEMA, Store
from hase.measure.types import MeasureSettings, ModelSource
from hase.runtime.types import DEVICE_META_COLS, EPConfig, TimingPolicy

EP = EPConfig(name="cpu-test")  # ONNX Runtime's default level, `all`
FAST = TimingPolicy(warmup=1, min_runs=4, max_runs=8, min_time_s=0.0, max_time_s=1.0)
SETTINGS = MeasureSettings(kernel=FAST, model=FAST, profile_warmup=1, profile_runs=3)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[KernelNode], dict[str, Any], list[dict[str, Any]]]:
    """The conv model measured once for every test here: its kernel nodes, model row and span rows."""
    path = tmp_path_factory.mktemp("model") / "conv.onnx"
    onnx.save(conv_bn_relu_model(), path)
    model = graph.load_model(path)
    nodes = split.split(graph.kernel_graph(model, EP))
    src = ModelSource("conv", "convnets", Path(path))
    row, spans = measure_model(model, src, nodes, EP, SETTINGS)
    return nodes, row, spans


def test_model_row_has_the_documented_columns(measured):
    nodes, row, _ = measured
    # profiled_s: collect's time budget; the canary's and later passes' columns: collect adds them
    assert set(row) == (set(SCHEMA["model_measurements"][0]) - set(CANARY_COLS) - set(PASS_COLS)) | {"profiled_s"}
    assert (row["model_id"], row["family"], row["timing_api"]) == ("conv", "convnets", "session.run")
    assert row["n_kernel_nodes"] == len(nodes) and row["n_profiled_runs"] == 3
    assert row["n_blocks"] == SETTINGS.model_blocks
    assert FAST.min_runs * SETTINGS.model_blocks <= row["n_runs"] <= FAST.max_runs * SETTINGS.model_blocks
    assert row["p10_ms"] <= row["median_ms"] <= row["p90_ms"]
    # the robust latency: the quietest block's median, never above the median of all runs
    assert row["min_ms"] <= row["latency_ms"] <= row["median_ms"] + 1e-9 and row["block_spread"] >= 0
    assert row["noisy"] == int(row["block_spread"] > SETTINGS.noise_bound)
    assert row["n_memcpy_nodes"] == 0 and row["n_cpu_fallback_nodes"] == 0  # all on the CPU EP
    assert all(isinstance(row[c], float) for c in DECOMP_COLS)
    assert row["execute_us"] <= row["model_run_us"]
    assert {c: row[c] for c in ("device", "opt_level", "execution_provider")} == {
        "device": "cpu-test", "opt_level": EP.opt_level, "execution_provider": "CPUExecutionProvider"}
    assert EP.opt_level == "all"  # EPConfig's default: ONNX Runtime's own default level


def test_one_span_row_per_kernel_node(measured):
    nodes, _, spans = measured
    assert all(set(s) == set(SCHEMA["node_spans"][0]) for s in spans)
    assert sorted(s["node_name"] for s in spans) == sorted(n.node_name for n in nodes)
    kernel_of = {n.node_name: n.spec.kernel_id for n in nodes}
    assert all(s["kernel_id"] == kernel_of[s["node_name"]] for s in spans)
    assert all(s["n_runs"] == SETTINGS.profile_runs for s in spans)  # warm-up runs are left out
    assert all(0 <= s["kernel_time_ms"] <= s["span_ms"] for s in spans)
    assert all(s[c] is not None for s in spans for c in DEVICE_META_COLS if c not in ("gpu_name", "gpu_driver"))


def test_rows_go_into_the_store(tmp_path, measured):
    _, row, spans = measured
    with Store(tmp_path / "s.sqlite") as s:
        with s.transaction():
            s.insert("model_measurements", [{k: v for k, v in row.items() if k != "profiled_s"}])
            s.insert("node_spans", spans)
        assert s.counts()["node_spans"] == len(spans)
        assert s.table("model_measurements")["median_ms"].iloc[0] == row["median_ms"]


def test_a_model_that_fails_to_run_is_a_hase_error():
    from onnx import TensorProto, helper

    from hase.errors import HaseError

    # Reshape to a shape of the wrong size loads fine but fails at run time
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [3, 3])
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "bad",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])], initializer=[shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with pytest.raises(HaseError, match="the model fails to run"):
        time_model(m, EP, SETTINGS)
