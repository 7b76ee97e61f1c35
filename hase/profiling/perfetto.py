"""Chrome-trace / Perfetto export of a profile: ORT's own events plus Hase-derived spans on named tracks.

Open the file at https://ui.perfetto.dev (or chrome://tracing). Tracks: one per execution provider
(node events), one for session events (model_run, Execute), and a "Hase derived" process with per-node
spans, node gaps and the before/after-Execute regions of every run. With CUPTI's attribution (CUDA), a "GPU
(CUPTI)" process adds a track per launching thread with the CUDA API calls that launched GPU work, a track per
GPU stream with its kernels, copies and memsets, and a flow arrow (Chrome trace `s` -> `f`) from each launch
to the work it launched. All Hase-made events have category "hase" and are ignored when the trace is read back.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pandas as pd

from hase.errors import HaseError
from hase.files import write_atomic
from hase.profiling import decompose
from hase.profiling.gpu import attribute, records
from hase.runtime import profile
from hase.tables import require_columns

log = logging.getLogger(__name__)

ORT_PID, HASE_PID, GPU_PID = 1, 2, 3
SESSION_TID = 1
SPANS_TID, GAPS_TID, REGIONS_TID = 1, 2, 3


def to_chrome_trace(events: pd.DataFrame, derived: bool = True,
                    gpu: attribute.GpuAttribution | None = None) -> dict[str, Any]:
    """The events DataFrame (from `hase.runtime.profile.load_profile`) as a Perfetto-loadable trace dict.

    Example: a `conv1_kernel_time` event on CPUExecutionProvider becomes an `X` event on the track
    "Nodes: CPUExecutionProvider"; with derived=True, a `conv1` span event is added on
    "Hase derived / node spans"; with `gpu`, the GPU tracks and launch arrows (`gpu_events`).
    Returns `{"traceEvents": [...], "displayTimeUnit": "ms"}`.
    """
    require_columns(events, profile.EVENT_COLUMNS, "events", "build it with hase.runtime.profile.load_profile")
    tids = _node_tracks(events)
    out = [_meta("process_name", ORT_PID, None, "ONNX Runtime profile"),
           _meta("process_sort_index", ORT_PID, None, 0, key="sort_index"),
           _meta("thread_name", ORT_PID, SESSION_TID, "Session (model_run, Execute)")]
    for track, label in tids.values():
        out.append(_meta("thread_name", ORT_PID, track, label))
    for row in events.itertuples(index=False):
        key = (getattr(row, decompose.PROVIDER), getattr(row, decompose.TID))
        track = tids[key][0] if getattr(row, profile.EVENT_KIND) in profile.NODE_KINDS else SESSION_TID
        out.append(_ort_event(row, track))
    if derived:
        out.extend(derived_events(events))
    if gpu is not None:
        out.extend(gpu_events(gpu.activities))
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def gpu_events(activities: pd.DataFrame) -> list[dict[str, Any]]:
    """CUPTI's GPU work (`hase.profiling.gpu.attribute.activities`) as trace events: one track per launching
    thread with the API calls, one per (device, stream) with the work, and a flow from each launch to its work.

    Example: a kernel `gemm` on stream 13 from 1150 to 1200 µs launched by `cudaLaunchKernel` at 1112-1115 µs on
    thread 7 -> an X event `cudaLaunchKernel` on "CUDA API (thread 7)", an X event `gemm` on "GPU 0 stream 13",
    an `s` event at 1112 µs on the first and an `f` event (`bp: e`) at 1150 µs on the second, both with one id.
    """
    require_columns(activities,
                    (records.KIND, records.NAME, records.STREAM_ID, records.DEVICE_ID, attribute.START_US,
                     attribute.END_US, attribute.LAUNCH_US,
                                 attribute.LAUNCH_END_US, attribute.LAUNCH_TID, attribute.LAUNCH_NAME,
                                 decompose.NODE_NAME, decompose.RUN_ID),
                    "activities", "build it with hase.profiling.gpu.attribute.activities")
    launched = activities[activities[attribute.LAUNCH_TID] >= 0]
    threads = sorted(set(launched[attribute.LAUNCH_TID].tolist()))
    streams = sorted(set(zip(activities[records.DEVICE_ID].tolist(), activities[records.STREAM_ID].tolist(),
                             strict=True)))
    api_tid = {t: 1 + i for i, t in enumerate(threads)}
    stream_tid = {key: 1 + len(threads) + i for i, key in enumerate(streams)}
    out = [_meta("process_name", GPU_PID, None, "GPU (CUPTI)"),
           _meta("process_sort_index", GPU_PID, None, 2, key="sort_index")]
    out += [_meta("thread_name", GPU_PID, tid, f"CUDA API (thread {t})") for t, tid in api_tid.items()]
    out += [_meta("thread_name", GPU_PID, tid, f"GPU {d} stream {st}") for (d, st), tid in stream_tid.items()]
    for i, a in enumerate(activities.to_dict("records")):
        args = {decompose.RUN_ID: int(a[decompose.RUN_ID]), decompose.NODE_NAME: a[decompose.NODE_NAME],
                records.KIND: a[records.KIND]}
        work = _event(a[records.NAME], a[attribute.START_US], a[attribute.END_US] - a[attribute.START_US], GPU_PID,
                      stream_tid[(a[records.DEVICE_ID], a[records.STREAM_ID])], args)
        out.append(work)
        if a[attribute.LAUNCH_TID] < 0:
            continue
        tid = api_tid[a[attribute.LAUNCH_TID]]
        out.append(_event(a[attribute.LAUNCH_NAME], a[attribute.LAUNCH_US],
                          a[attribute.LAUNCH_END_US] - a[attribute.LAUNCH_US], GPU_PID, tid,
                          {**args, records.KIND: "launch", attribute.QUEUE_US: float(a[attribute.QUEUE_US])}))
        flow = {"cat": profile.HASE_CAT, "name": "launch", "id": i + 1, "pid": GPU_PID}
        out.append({**flow, "ph": "s", "tid": tid, "ts": float(a[attribute.LAUNCH_US])})
        out.append({**flow, "ph": "f", "bp": "e", "tid": work["tid"], "ts": float(a[attribute.START_US])})
    return out


def _event(name: str, ts_us: float, dur_us: float, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"cat": profile.HASE_CAT, "name": name, "ph": "X", "pid": pid, "tid": tid, "ts": float(ts_us),
            "dur": max(float(dur_us), 0.0), "args": args}


def _node_tracks(events: pd.DataFrame) -> dict[tuple[str, int], tuple[int, str]]:
    """(provider, ORT thread id) -> (track id, track name); a thread suffix only where a provider has several."""
    nodes = events[events[profile.EVENT_KIND].isin(profile.NODE_KINDS)]
    pairs = nodes[[decompose.PROVIDER, decompose.TID]].drop_duplicates().sort_values([decompose.PROVIDER,
                                                                                      decompose.TID])
    per_provider = pairs.groupby(decompose.PROVIDER)[decompose.TID].transform("size")
    tracks = {}
    for i, (provider, tid,
            n) in enumerate(zip(pairs[decompose.PROVIDER], pairs[decompose.TID], per_provider, strict=True)):
        label = f"Nodes: {provider or 'unknown provider'}" + (f" (thread {tid})" if n > 1 else "")
        tracks[(provider, tid)] = (SESSION_TID + 1 + i, label)
    return tracks


def _meta(name: str, pid: int, tid: int | None, value: Any, key: str = "name") -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": "M", "name": name, "pid": pid, "args": {key: value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _ort_event(row: Any, track: int) -> dict[str, Any]:
    args: dict[str, Any] = {decompose.RUN_ID: int(getattr(row, decompose.RUN_ID))}
    for col, key in ((decompose.OP_TYPE, "op_name"), (decompose.PROVIDER, "provider")):
        if getattr(row, col):
            args[key] = getattr(row, col)
    if getattr(row, decompose.NODE_INDEX) >= 0:
        args["node_index"] = str(getattr(row, decompose.NODE_INDEX))
    for col in (profile.INPUT_TYPE_SHAPE, profile.OUTPUT_TYPE_SHAPE):
        if getattr(row, col):
            args[col] = json.loads(getattr(row, col))
    return {"cat": getattr(row, profile.CAT), "name": getattr(row, profile.NAME), "ph": "X", "pid": ORT_PID,
            "tid": track,
            "ts": float(getattr(row, decompose.TS_US)), "dur": float(getattr(row, decompose.DUR_US)), "args": args}


def derived_events(events: pd.DataFrame) -> list[dict[str, Any]]:
    """Hase-derived events (category "hase", ignored when the trace is read back): node spans,
    node gaps and before/after-Execute regions, with their track metadata."""
    out = [_meta("process_name", HASE_PID, None, "Hase derived"),
           _meta("process_sort_index", HASE_PID, None, 1, key="sort_index"),
           _meta("thread_name", HASE_PID, SPANS_TID, "node spans (fence_before -> fence_after, else kernel_time)"),
           _meta("thread_name", HASE_PID, GAPS_TID, "node gaps (no node running)"),
           _meta("thread_name", HASE_PID, REGIONS_TID, "run regions (before / after Execute)")]
    for s in decompose.node_spans(events).to_dict("records"):
        out.append(_hase_event(s[decompose.NODE_NAME], s[decompose.TS_US], s[decompose.SPAN_US], SPANS_TID, {
            decompose.RUN_ID: int(s[decompose.RUN_ID]), decompose.OP_TYPE: s[decompose.OP_TYPE],
            decompose.PROVIDER: s[decompose.PROVIDER],
            decompose.SPAN_SOURCE: s[decompose.SPAN_SOURCE],
            decompose.KERNEL_TIME_US: float(s[decompose.KERNEL_TIME_US]),
            "non_kernel_us": float(s[decompose.SPAN_US] - s[decompose.KERNEL_TIME_US]),
            decompose.NESTED: bool(s[decompose.NESTED])}))
    for g in decompose.node_gaps(events).to_dict("records"):
        out.append(_hase_event("gap", g[decompose.TS_US], g[decompose.DUR_US], GAPS_TID, {
            decompose.RUN_ID: int(g[decompose.RUN_ID]), decompose.AFTER_NODE: g[decompose.AFTER_NODE],
            decompose.BEFORE_NODE: g[decompose.BEFORE_NODE]}))
    out.extend(_region_events(events))
    return out


def _region_events(events: pd.DataFrame) -> list[dict[str, Any]]:
    """'before Execute' and 'after Execute' stretches of every run that has an Execute event."""
    runs = events[events[profile.EVENT_KIND] == profile.MODEL_RUN]
    run_ts = dict(zip(runs[decompose.RUN_ID].tolist(), runs[decompose.TS_US].tolist(), strict=True))
    run_dur = dict(zip(runs[decompose.RUN_ID].tolist(), runs[decompose.DUR_US].tolist(), strict=True))
    ex = events[(events[profile.EVENT_KIND] == profile.EXECUTE) & (events[decompose.RUN_ID] >= 0)]
    ex = ex.sort_values(decompose.DUR_US, ascending=False, kind="stable").drop_duplicates(decompose.RUN_ID)
    out = []
    for e in ex.to_dict("records"):
        run_id = int(e[decompose.RUN_ID])
        ts, end = float(run_ts[run_id]), float(run_ts[run_id] + run_dur[run_id])
        ex_ts, ex_end = float(e[decompose.TS_US]), float(e[decompose.TS_US] + e[decompose.DUR_US])
        args = {decompose.RUN_ID: run_id}
        out.append(_hase_event("before Execute", ts, ex_ts - ts, REGIONS_TID, args))
        out.append(_hase_event("after Execute", ex_end, end - ex_end, REGIONS_TID, args))
    return out


def _hase_event(name: str, ts_us: float, dur_us: float, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"cat": profile.HASE_CAT, "name": name, "ph": "X", "pid": HASE_PID, "tid": tid, "ts": float(ts_us),
            "dur": max(float(dur_us), 0.0), "args": args}


def write_chrome_trace(trace: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a Chrome-trace dict (a profile's, or a pipeline run's) as JSON atomically, so a reader never sees
    half a file; values JSON cannot hold (paths, versions) are written as strings.

    Raises HaseError when the file cannot be written.
    """
    text = json.dumps(trace, separators=(",", ":"), default=str)
    try:
        p = write_atomic(path, text)
    except OSError as exc:
        raise HaseError(f"cannot write the trace to {path} ({exc.strerror or exc}): choose another path") from exc
    log.debug("wrote %d trace events to %s", len(trace.get("traceEvents", [])), p)
    return p
