"""hase.profiling.gpu.records and .attribute: CUPTI records -> GPU time per ORT node, per run, verdict.

The profiles and CUPTI records are CONSTRUCTED (tests/profiling/gpu/cupti_cases.py) for the edge cases the real
captures lack; test_gpu_captured.py checks the same functions on records captured on an H200.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from cupti_cases import CLOCK, CONTEXT, DRIVER, TID, api, cuda_profile, kernel, ns

from hase.errors import HaseError
from hase.profiling import decompose
from hase.profiling.gpu import attribute, records
from hase.runtime.profile import parse_events


def _attribution(kernel_us: float = 50.0, **kw) -> attribute.GpuAttribution:
    events, recs = cuda_profile(kernel_us)
    return attribute.attribute(parse_events(events), records.records_frame(recs), CLOCK, **kw)


def test_records_frame_keeps_gpu_work_and_api_calls_in_cupti_layout():
    recs = [kernel(7, 100.0, 250.0, "gemm"), api(7, 90.0, 95.0), SimpleNamespace(kind=CONTEXT, context_id=1),
            SimpleNamespace(kind=1, start=ns(1.0), end=ns(2.0), correlation_id=8, stream_id=3, device_id=0,
                            copy_kind=2)]
    df = records.records_frame(recs, api_name=lambda kind, cbid: f"{kind}:{cbid}")
    assert list(df.columns) == list(records.RECORD_COLUMNS)
    assert df[records.KIND].tolist() == ["kernel", "runtime", "memcpy"]  # CONTEXT skipped
    assert df[records.NAME].tolist() == ["gemm", "runtime:211", "memcpy DtoH"]
    assert df.loc[0, records.END_NS] - df.loc[0, records.START_NS] == 150_000
    assert df[records.THREAD_ID].tolist() == [-1, TID, -1] and df[records.STREAM_ID].tolist() == [13, -1, 3]


def test_clock_sync_maps_cupti_time_to_profile_microseconds():
    assert CLOCK.to_profile_us(ns(1234.5)) == pytest.approx(1234.5)
    assert np.allclose(CLOCK.to_profile_us(np.array([ns(0.0), ns(10.0)], dtype=np.int64)), [0.0, 10.0])
    # both clocks counting from 1970: exact to the nanosecond, where float64 would be off by up to 256 ns
    epoch = records.ClockSync(cupti_ns=1_700_000_000_123_456_789, wall_ns=1_700_000_000_000_000_001,
                        profile_start_ns=1_699_999_999_000_000_000)
    assert epoch.to_profile_us(np.array([1_700_000_000_123_456_790], dtype=np.int64))[0] == pytest.approx(
        1_000_000.002, abs=1e-6)


def test_each_kernel_goes_to_the_node_whose_window_holds_its_launch():
    acts = _attribution().activities
    first = acts[acts[decompose.RUN_ID] == 0].set_index(records.NAME)
    assert first.loc["conv_a", decompose.NODE_NAME] == "conv" and first.loc["conv_b", decompose.NODE_NAME] == "conv"
    assert first.loc["gemm", decompose.NODE_NAME] == "gemm"
    assert first.loc["memcpy HtoD", decompose.NODE_NAME] == ""  # launched before Execute: no node's
    assert first.loc["conv_a", attribute.QUEUE_US] == pytest.approx(1150 - 1115)  # kernel start - launch end
    assert first.loc["gemm", attribute.QUEUE_US] == pytest.approx(1250 - 1205)
    assert set(acts[decompose.RUN_ID]) == {0, 1}


def test_node_table_busy_span_launch_and_queue():
    nodes = _attribution().nodes.set_index(decompose.NODE_NAME)
    assert set(nodes.index) == {"conv", "gemm"}  # the CPU node launched nothing
    assert nodes.loc["conv", attribute.GPU_BUSY_US] == pytest.approx(100.0)
    assert nodes.loc["conv", attribute.GPU_SPAN_US] == pytest.approx(100.0)
    assert nodes.loc["conv", attribute.LAUNCH_US] == pytest.approx(20.0)  # its kernel_time: CPU launch time
    assert nodes.loc["conv", attribute.N_ACTIVITIES] == 2 and nodes.loc["conv", decompose.N_RUNS] == 2
    assert nodes.loc["conv", decompose.OP_TYPE] == "FusedConv"
    assert nodes.loc["gemm", attribute.QUEUE_US] == pytest.approx(45.0)


def test_run_table_sums_nodes_to_the_busy_time_less_the_copies():
    runs = _attribution().runs
    assert runs[decompose.RUN_ID].tolist() == [0, 1]
    r = runs.iloc[0]
    assert r[attribute.GPU_BUSY_US] == pytest.approx(160.0)  # 3 x 50 µs kernels + 10 µs copy
    assert r[attribute.NODE_GPU_BUSY_US] == pytest.approx(150.0)
    assert r[attribute.UNATTRIBUTED_BUSY_US] == pytest.approx(10.0)
    assert r[attribute.GPU_IDLE_US] == pytest.approx(840.0) and r[attribute.BUSY_SHARE] == pytest.approx(0.16)
    assert r[attribute.N_UNATTRIBUTED] == 1 and r[attribute.N_ACTIVITIES] == 4


def test_skip_runs_leaves_warmup_out():
    att = _attribution(skip_runs=1)
    assert att.runs[decompose.RUN_ID].tolist() == [1] and (att.nodes[decompose.N_RUNS] == 1).all()


@pytest.mark.parametrize(("kernel_us", "label"),
                         [(50.0, attribute.CPU_BOUND), (200.0, attribute.BALANCED), (280.0, attribute.GPU_BOUND)])
def test_verdict_follows_the_busy_share(kernel_us, label):
    v = _attribution(kernel_us).verdict
    assert v.label == label
    assert v.busy_share == pytest.approx((3 * kernel_us + 10) / 1000)
    assert label in v.text() and f"{v.busy_share:.0%}" in v.text()


def test_launch_on_another_thread_needs_same_thread_off():
    events, recs = cuda_profile()
    recs = [api(r.correlation_id, (r.start - ns(0)) / 1e3, (r.end - ns(0)) / 1e3, tid=99, cbid=r.cbid)
            if hasattr(r, "cbid") else r for r in recs]
    ev, df = parse_events(events), records.records_frame(recs)
    assert (attribute.attribute(ev, df, CLOCK).activities[decompose.NODE_NAME] == "").all()
    assert (attribute.attribute(ev, df, CLOCK, same_thread=False).activities[decompose.NODE_NAME] != "").sum() == 6


def test_runtime_record_wins_over_a_driver_record_of_the_same_launch():
    events, recs = cuda_profile(runs=1)
    recs.append(api(101, 1500.0, 1501.0, kind=DRIVER, cbid=307))  # same id, outside every node window
    acts = attribute.attribute(parse_events(events), records.records_frame(recs), CLOCK).activities
    assert acts.set_index(records.NAME).loc["conv_a", decompose.NODE_NAME] == "conv"


def test_kernel_without_launch_record_counts_in_its_run_but_no_node():
    events, recs = cuda_profile(runs=1)
    recs = [r for r in recs if getattr(r, "correlation_id", 0) != 103 or r.kind != 5]
    att = attribute.attribute(parse_events(events), records.records_frame(recs), CLOCK)
    gemm = att.activities.set_index(records.NAME).loc["gemm"]
    assert gemm[decompose.NODE_NAME] == "" and gemm[decompose.RUN_ID] == 0 and np.isnan(gemm[attribute.QUEUE_US])
    assert att.runs.iloc[0][attribute.UNATTRIBUTED_BUSY_US] == pytest.approx(60.0)


def test_union_of_intervals():
    assert attribute.union_us(np.array([0.0, 5.0, 20.0]), np.array([10.0, 12.0, 21.0])) == 13.0
    assert attribute.union_us(np.array([5.0, 0.0]), np.array([6.0, 100.0])) == 100.0
    assert attribute.union_us(np.array([]), np.array([])) == 0.0


def test_errors_are_one_line():
    events, recs = cuda_profile(runs=1)
    only_api = records.records_frame([r for r in recs if hasattr(r, "cbid")])
    with pytest.raises(HaseError, match="no GPU work"):
        attribute.attribute(parse_events(events), only_api, CLOCK)
    with pytest.raises(HaseError, match="records_frame"):
        attribute.attribute(parse_events(events), pd.DataFrame({"start": [1]}), CLOCK)
