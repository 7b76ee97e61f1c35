"""CUPTI's GPU activity attributed to ORT nodes: true GPU time per node, GPU busy vs idle per run, and whether
a run is CPU-bound (the GPU waits for launches) or GPU-bound (launches wait for the GPU).

On the CUDA EP a node's `*_kernel_time` event is the CPU time its `Compute()` takes to *launch* its kernels.
Each launch is a CUDA runtime/driver API call on the node's thread, inside that window, and CUPTI gives the
GPU work it launched the API call's correlation id. So: put CUPTI on the profile's clock (`ClockSync`), join
GPU work to its launch by correlation id, and give it to the node whose kernel_time window on the launching
thread contains the launch. Pure functions; times in µs on the profile's clock.

`activities` columns: the records' `kind`, `name`, `correlation_id`, `stream_id`, `device_id`, plus `start_us`,
`end_us` (GPU), `launch_us`, `launch_end_us`, `launch_tid`, `launch_name` (NaN/-1/"" when no API record
matched), `queue_us` (start_us - launch_end_us), `run_id` (-1 outside runs), `node_name` ("" when no node
window holds the launch: input copies before Execute, the output copy after it).
`nodes` (per node, medians over runs): `node_name`, `op_type`, `provider`, `n_activities`, `gpu_busy_us`
(union of its activities), `gpu_span_us` (first start -> last end), `launch_us` (its kernel_time), `queue_us`
(median queueing delay of its activities), `n_runs`.
`runs` (per run): `run_id`, `model_run_us`, `execute_us`, `gpu_busy_us`, `gpu_idle_us`, `node_gpu_busy_us`
(Σ over nodes), `unattributed_busy_us`, `busy_share`, `queue_us`, `n_activities`, `n_unattributed`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.profiling import decompose
from hase.profiling.gpu import records as gpu_records
from hase.runtime import profile
from hase.tables import require_columns

log = logging.getLogger(__name__)

START_US, END_US, LAUNCH_US, LAUNCH_END_US = "start_us", "end_us", "launch_us", "launch_end_us"
LAUNCH_TID, LAUNCH_NAME, QUEUE_US = "launch_tid", "launch_name", "queue_us"
N_ACTIVITIES, GPU_BUSY_US, GPU_SPAN_US, GPU_IDLE_US = "n_activities", "gpu_busy_us", "gpu_span_us", "gpu_idle_us"
NODE_GPU_BUSY_US, UNATTRIBUTED_BUSY_US, BUSY_SHARE = "node_gpu_busy_us", "unattributed_busy_us", "busy_share"
N_UNATTRIBUTED = "n_unattributed"

GPU_BOUND_SHARE = 0.8  # GPU busy for at least this share of model_run: the GPU is the bottleneck
CPU_BOUND_SHARE = 0.5  # GPU busy for less than this share: it mostly waits for the CPU to launch work
CPU_BOUND, GPU_BOUND, BALANCED = "cpu-bound", "gpu-bound", "balanced"


@dataclass(frozen=True)
class Verdict:
    """CPU-bound vs GPU-bound, with the medians over runs behind it (µs)."""

    label: str
    busy_share: float
    model_run_us: float
    gpu_busy_us: float
    gpu_idle_us: float
    execute_us: float
    queue_us: float

    def text(self) -> str:
        """One plain-language line."""
        why = {GPU_BOUND: f"the GPU is busy {self.busy_share:.0%} of model_run (>= {GPU_BOUND_SHARE:.0%}): "
                          f"launches run ahead and kernels queue (median {self.queue_us:.1f} µs launch -> start)",
               CPU_BOUND: f"the GPU is busy only {self.busy_share:.0%} of model_run (< {CPU_BOUND_SHARE:.0%}) and "
                          f"idle {self.gpu_idle_us / 1e3:.3f} ms waiting for the CPU (Execute on the CPU "
                          f"{self.execute_us / 1e3:.3f} ms; median {self.queue_us:.1f} µs launch -> start)",
               BALANCED: f"the GPU is busy {self.busy_share:.0%} of model_run: neither side dominates"}[self.label]
        return f"{self.label}: {why}"


@dataclass(frozen=True)
class GpuAttribution:
    """The three tables of the module docstring and the verdict over the counted runs."""

    activities: pd.DataFrame
    nodes: pd.DataFrame
    runs: pd.DataFrame
    verdict: Verdict


def attribute(events: pd.DataFrame, records: pd.DataFrame, clock: gpu_records.ClockSync, skip_runs: int = 0,
              same_thread: bool = True) -> GpuAttribution:
    """Attribute CUPTI records to the profile's nodes and summarize runs from `skip_runs` on.

    `same_thread=False` matches a launch to any node window that holds it (for a recorder that could not
    report OS thread ids). Raises HaseError when the records hold no GPU work.
    """
    require_columns(records, gpu_records.RECORD_COLUMNS, "records",
                    "build it with hase.profiling.gpu.records.records_frame")
    acts = activities(events, records, clock, same_thread)
    counted = acts[acts[decompose.RUN_ID] >= skip_runs]
    runs = run_table(events, counted, skip_runs)
    nodes = node_table(events, counted, skip_runs)
    return GpuAttribution(activities=acts, nodes=nodes, runs=runs, verdict=verdict(runs))


def recording_problem(recording: gpu_records.GpuRecording) -> str:
    """Why a CUPTI recording cannot be attributed ('' when it can): errors in CUPTI's buffer callback (records
    lost, so every node's GPU time would be short) or no GPU work in the records."""
    if recording.callback_errors:
        return (f"{recording.callback_errors} CUPTI buffer(s) could not be read (first: {recording.first_error}), "
                f"so the records are incomplete")
    records = recording.records
    n_gpu = int(records[gpu_records.KIND].isin(gpu_records.GPU_KINDS).sum()) \
        if gpu_records.KIND in records.columns else 0
    if n_gpu == 0:
        return f"CUPTI recorded no GPU work ({len(records)} records, none a kernel, memcpy or memset)"
    return ""


def attribute_or_fallback(events: pd.DataFrame, recording: gpu_records.GpuRecording | None, skip_runs: int = 0,
                          same_thread: bool = True) -> GpuAttribution | None:
    """`attribute` when the recording is usable; None (the callers' kernel_time spans, ORT's launch time) with a
    one-line warning when CUPTI failed (`recording_problem`), so a CUPTI failure never fails a profile or a
    collect. None for no recording."""
    if recording is None:
        return None
    problem = recording_problem(recording)
    if problem:
        log.warning("%s: GPU time per node falls back to ORT's kernel_time spans (CPU launch time)", problem)
        return None
    return attribute(events, recording.records, recording.clock, skip_runs, same_thread)


def activities(events: pd.DataFrame, records: pd.DataFrame, clock: gpu_records.ClockSync,
               same_thread: bool = True) -> pd.DataFrame:
    """GPU work on the profile's clock, joined to its launch and the node that launched it (columns above).

    Example: a kernel with correlation_id 7 from 1100 to 1150 µs, the cudaLaunchKernel with id 7 at 1010-1015 µs
    on thread 42, and node conv1's kernel_time window 1000-1020 µs on thread 42 -> node_name conv1, queue_us 85.
    """
    gpu = records[records[gpu_records.KIND].isin(gpu_records.GPU_KINDS)].copy()
    if gpu.empty:
        raise HaseError("the CUPTI records hold no GPU work (kernels, memcpy, memset): was the model run on "
                        "CUDAExecutionProvider while the recorder was on?")
    gpu[START_US] = clock.to_profile_us(gpu[gpu_records.START_NS].astype("int64"))
    gpu[END_US] = clock.to_profile_us(gpu[gpu_records.END_NS].astype("int64"))
    api = records[records[gpu_records.KIND].isin(gpu_records.API_KINDS)].copy()
    # the runtime call when both levels share an id
    api["_pref"] = (api[gpu_records.KIND] != gpu_records.RUNTIME).astype(int)
    api = api.sort_values([gpu_records.CORRELATION_ID, "_pref"],
                          kind="stable").drop_duplicates(gpu_records.CORRELATION_ID)
    api = pd.DataFrame({gpu_records.CORRELATION_ID: api[gpu_records.CORRELATION_ID],
                        LAUNCH_US: clock.to_profile_us(api[gpu_records.START_NS].astype("int64")),
                        LAUNCH_END_US: clock.to_profile_us(api[gpu_records.END_NS].astype("int64")),
                        LAUNCH_TID: api[gpu_records.THREAD_ID], LAUNCH_NAME: api[gpu_records.NAME]})
    out = gpu.drop(columns=[gpu_records.START_NS, gpu_records.END_NS, gpu_records.THREAD_ID]) \
        .merge(api, on=gpu_records.CORRELATION_ID, how="left")
    out[LAUNCH_TID] = out[LAUNCH_TID].fillna(-1).astype("int64")
    out[LAUNCH_NAME] = out[LAUNCH_NAME].fillna("")
    out[QUEUE_US] = out[START_US] - out[LAUNCH_END_US]
    out[decompose.NODE_NAME], out[decompose.RUN_ID] = _launching_node(decompose.node_spans(events), out, same_thread)
    runs = events[events[profile.EVENT_KIND] == profile.MODEL_RUN]
    at = out[LAUNCH_US].where(out[LAUNCH_US].notna(), out[START_US])
    by_time = profile.run_ids(runs[decompose.TS_US], runs[decompose.DUR_US], at)
    out[decompose.RUN_ID] = np.where(out[decompose.RUN_ID] >= 0, out[decompose.RUN_ID], by_time)
    return out.sort_values(START_US, kind="stable").reset_index(drop=True)


def _launching_node(spans: pd.DataFrame, acts: pd.DataFrame, same_thread: bool) -> tuple[np.ndarray, np.ndarray]:
    """(node name, run id) of the innermost node window holding each launch; ("", -1) where none does."""
    names = np.full(len(acts), "", dtype=object)
    run_id = np.full(len(acts), -1, dtype=np.int64)
    launch = acts[LAUNCH_US].to_numpy(dtype=float)
    tids = acts[LAUNCH_TID].to_numpy()
    groups = spans.groupby(decompose.TID) if same_thread else [(None, spans)]
    for tid, group in groups:
        s = group.sort_values(decompose.TS_US, kind="stable")
        start, end = s[decompose.TS_US].to_numpy(dtype=float), s[decompose.END_US].to_numpy(dtype=float)
        mask = ~np.isnan(launch) & ((tids == tid) if same_thread else True)
        idx = np.searchsorted(start, launch[mask], side="right") - 1
        ok = (idx >= 0) & (launch[mask] <= end[np.clip(idx, 0, None)])
        rows = np.flatnonzero(mask)[ok]
        names[rows] = s[decompose.NODE_NAME].to_numpy()[idx[ok]]
        run_id[rows] = s[decompose.RUN_ID].to_numpy()[idx[ok]]
    return names, run_id


def union_us(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of intervals [start, end). Example: [0, 10), [5, 12), [20, 21) -> 13.0."""
    if len(start) == 0:
        return 0.0
    order = np.argsort(start, kind="stable")
    s, e = np.asarray(start, dtype=float)[order], np.asarray(end, dtype=float)[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    block = np.cumsum(new) - 1
    firsts = s[new]
    lasts = np.zeros(len(firsts))
    np.maximum.at(lasts, block, reach)
    return float(np.sum(np.maximum(lasts - firsts, 0.0)))


def run_table(events: pd.DataFrame, acts: pd.DataFrame, skip_runs: int = 0) -> pd.DataFrame:
    """Per counted run: GPU busy (union of all its GPU work), idle, the nodes' share and the rest (columns above)."""
    dec = decompose.decompose(events, skip_runs)
    rows = []
    for run in dec.itertuples(index=False):
        rid = int(getattr(run, decompose.RUN_ID))
        a = acts[acts[decompose.RUN_ID] == rid]
        on_node = a[a[decompose.NODE_NAME] != ""]
        busy = union_us(a[START_US].to_numpy(), a[END_US].to_numpy())
        node_busy = sum(union_us(g[START_US].to_numpy(), g[END_US].to_numpy())
                        for _, g in on_node.groupby(decompose.NODE_NAME))
        model_run = float(getattr(run, decompose.MODEL_RUN_US))
        rows.append({decompose.RUN_ID: rid, decompose.MODEL_RUN_US: model_run,
                     decompose.EXECUTE_US: float(getattr(run, decompose.EXECUTE_US)),
                     GPU_BUSY_US: busy, GPU_IDLE_US: max(model_run - busy, 0.0), NODE_GPU_BUSY_US: node_busy,
                     UNATTRIBUTED_BUSY_US: union_us(a.loc[a[decompose.NODE_NAME] == "", START_US].to_numpy(),
                                                    a.loc[a[decompose.NODE_NAME] == "", END_US].to_numpy()),
                     BUSY_SHARE: busy / model_run if model_run > 0 else float("nan"),
                     QUEUE_US: float(a[QUEUE_US].median()) if a[QUEUE_US].notna().any() else float("nan"),
                     N_ACTIVITIES: len(a), N_UNATTRIBUTED: int((a[decompose.NODE_NAME] == "").sum())})
    return pd.DataFrame(rows)


def node_table(events: pd.DataFrame, acts: pd.DataFrame, skip_runs: int = 0) -> pd.DataFrame:
    """Per node with GPU work: medians over runs of its GPU busy time, span, launch time and queueing delay,
    sorted by GPU busy time. Nodes without GPU work (CPU nodes, shape ops) are left out."""
    a = acts[acts[decompose.NODE_NAME] != ""]
    cols = [decompose.NODE_NAME, decompose.OP_TYPE, decompose.PROVIDER, N_ACTIVITIES, GPU_BUSY_US, GPU_SPAN_US,
            LAUNCH_US, QUEUE_US,
            decompose.N_RUNS]
    if a.empty:
        return pd.DataFrame(columns=cols)
    per_run = pd.DataFrame([{decompose.NODE_NAME: name, decompose.RUN_ID: rid, **_node_run(g)}
                            for (name, rid), g in a.groupby([decompose.NODE_NAME, decompose.RUN_ID])])
    launch = decompose.node_summary(events, skip_runs).set_index(decompose.NODE_NAME)
    out = per_run.groupby(decompose.NODE_NAME).agg(**{N_ACTIVITIES: (N_ACTIVITIES, "median"),
                                              GPU_BUSY_US: (GPU_BUSY_US, "median"),
                                              GPU_SPAN_US: (GPU_SPAN_US, "median"), QUEUE_US: (QUEUE_US, "median"),
                                              decompose.N_RUNS: (decompose.RUN_ID, "size")})
    out[decompose.OP_TYPE] = launch[decompose.OP_TYPE].reindex(out.index).fillna("")
    out[decompose.PROVIDER] = launch[decompose.PROVIDER].reindex(out.index).fillna("")
    out[LAUNCH_US] = launch[decompose.KERNEL_TIME_US].reindex(out.index)
    out = out.reset_index().sort_values(GPU_BUSY_US, ascending=False, kind="stable")
    table: pd.DataFrame = out[cols].reset_index(drop=True)
    return table


def _node_run(g: pd.DataFrame) -> dict[str, float]:
    """One node's GPU work in one run: count, busy (union), span, median queueing delay."""
    start, end = g[START_US].to_numpy(), g[END_US].to_numpy()
    return {N_ACTIVITIES: float(len(g)), GPU_BUSY_US: union_us(start, end),
            GPU_SPAN_US: float(end.max() - start.min()), QUEUE_US: float(g[QUEUE_US].median())}


def verdict(runs: pd.DataFrame) -> Verdict:
    """CPU-bound, GPU-bound or balanced from the median busy share over runs (thresholds above)."""
    if runs.empty:
        raise HaseError("no counted run holds GPU work: lower --warmup or profile more runs")
    med = runs.median(numeric_only=True)
    share = float(med[BUSY_SHARE])
    label = GPU_BOUND if share >= GPU_BOUND_SHARE else CPU_BOUND if share < CPU_BOUND_SHARE else BALANCED
    return Verdict(label=label, busy_share=share, model_run_us=float(med[decompose.MODEL_RUN_US]),
                   gpu_busy_us=float(med[GPU_BUSY_US]), gpu_idle_us=float(med[GPU_IDLE_US]),
                   execute_us=float(med[decompose.EXECUTE_US]), queue_us=float(med[QUEUE_US]))
