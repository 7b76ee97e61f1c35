"""The CUPTI attribution checked against records CAPTURED on a real GPU (tests/profiling/gpu/captured.py: an
H200, onnxruntime-gpu 1.31.1, cupti-python 13.0.1): the assumptions the constructed cases (cupti_cases.py) only
encode. ORT's profile `tid` is CUPTI's SYSTEM thread id; every GPU activity has its launch record; the clock pair
puts every launch inside its node's kernel_time window (to ORT's whole-µs resolution); nodes add up to the GPU's
busy time; the trace gets one flow arrow per launch."""
from __future__ import annotations

import pandas as pd
import pytest
from captured import BERT, RESNET, STEMS, captured

from hase.profiling import decompose
from hase.profiling.gpu import attribute, records
from hase.profiling.gpu.records import GpuRecording
from hase.profiling.perfetto import GPU_PID, to_chrome_trace
from hase.profiling.run import analyze

# ORT writes ts and dur as whole microseconds (both truncated), so a window's end may be up to 2 µs early; the
# clock pair adds the gap between its two reads (about 1 µs)
RESOLUTION_US = 3.5


def _attribution(stem: str, skip_runs: int = 1) -> tuple[pd.DataFrame, attribute.GpuAttribution]:
    events, recs, clock, _ = captured(stem)
    return events, attribute.attribute(events, recs, clock, skip_runs=skip_runs)


@pytest.mark.parametrize("stem", STEMS)
def test_the_profile_thread_is_the_cupti_launch_thread(stem):
    events, recs, _, meta = captured(stem)
    assert meta["gpu_name"].startswith("NVIDIA") and meta["execution_provider"] == "CUDAExecutionProvider"
    node_tids = set(decompose.node_spans(events)["tid"])
    api_tids = set(recs.loc[recs[records.KIND].isin(records.API_KINDS), records.THREAD_ID])
    assert node_tids and node_tids <= api_tids  # ORT's tid is the OS thread id CUPTI reports (SYSTEM)


@pytest.mark.parametrize("stem", STEMS)
def test_every_gpu_activity_is_launched_inside_its_node_window(stem):
    events, att = _attribution(stem, skip_runs=0)
    acts = att.activities
    assert len(acts) > 100 and (acts[attribute.LAUNCH_TID] >= 0).all()  # each joined to its API record
    assert (acts[decompose.NODE_NAME] != "").all()  # IOBinding copies happen outside the profiled runs
    spans = decompose.node_spans(events)[[decompose.RUN_ID, decompose.NODE_NAME, "ts_us", "end_us"]]
    m = acts.merge(spans.rename(columns={"ts_us": "w0", "end_us": "w1"}), on=[decompose.RUN_ID, decompose.NODE_NAME])
    assert len(m) == len(acts)
    # the launch call starts inside the window; it ends after the window's (truncated) end by less than ORT's
    # resolution: the clock pair is right to a few microseconds
    assert (m[attribute.LAUNCH_US] >= m["w0"]).all() and (m[attribute.LAUNCH_US] <= m["w1"]).all()
    assert (m[attribute.LAUNCH_END_US] - m["w1"]).max() < RESOLUTION_US
    # GPU work starts after its launch call starts, and may start before that call returns (a negative queue_us)
    assert (m[attribute.START_US] > m[attribute.LAUNCH_US]).all() and (m[attribute.QUEUE_US] < 0).any()


@pytest.mark.parametrize("stem", STEMS)
def test_nodes_add_up_to_the_busy_time_and_small_models_are_cpu_bound(stem):
    _, att = _attribution(stem)
    runs = att.runs
    assert len(runs) == 3  # 4 profiled runs, the first left out
    assert (runs[attribute.N_UNATTRIBUTED] == 0).all()
    assert runs[attribute.NODE_GPU_BUSY_US].to_numpy() == pytest.approx(runs[attribute.GPU_BUSY_US].to_numpy(),
                                                                        rel=0.05)
    # tens of µs of kernels in a run of about a millisecond: the GPU waits for the launching CPU thread
    assert att.verdict.label == attribute.CPU_BOUND and att.verdict.busy_share < 0.2


def test_fusions_of_the_cuda_graph_get_their_gpu_time():
    _, att = _attribution(BERT)
    ops = set(att.nodes[decompose.OP_TYPE])
    assert {"BiasSoftmax", "SkipLayerNormalization", "FusedMatMul", "Gelu"} <= ops
    assert (att.nodes[attribute.GPU_BUSY_US] > 0).all()
    _, res = _attribution(RESNET)
    conv = res.nodes[res.nodes[decompose.OP_TYPE] == "Conv"]
    assert len(conv) == 12 and (conv[attribute.N_ACTIVITIES] >= 2).all()  # cuDNN: layout kernels around each conv


@pytest.mark.parametrize("stem", STEMS)
def test_the_trace_has_one_flow_arrow_per_launch(stem):
    events, recs, clock, _ = captured(stem)
    a = analyze(events, skip_runs=1, gpu=GpuRecording(recs, clock))
    assert a.gpu is not None
    trace = [e for e in to_chrome_trace(events, gpu=a.gpu)["traceEvents"] if e.get("pid") == GPU_PID]
    starts = [e for e in trace if e["ph"] == "s"]
    ends = {e["id"] for e in trace if e["ph"] == "f"}
    assert len(starts) == len(a.gpu.activities) and ends == {s["id"] for s in starts}
