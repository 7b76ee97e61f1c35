"""Chrome-trace / Perfetto export of a profile: ORT's own events plus Hase-derived spans on named tracks.

Open the file at https://ui.perfetto.dev (or chrome://tracing). Tracks: one per execution provider
(node events), one for session events (model_run, Execute), and a "Hase derived" process with per-node
spans, node gaps and the before/after-Execute regions of every run.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from hase.errors import HaseError
from hase.profiling import decompose as P

log = logging.getLogger(__name__)

ORT_PID, HASE_PID = 1, 2
SESSION_TID = 1
SPANS_TID, GAPS_TID, REGIONS_TID = 1, 2, 3


def to_chrome_trace(events: pd.DataFrame, derived: bool = True) -> dict[str, Any]:
    """The events DataFrame (from `hase.profiling.decompose.load_profile`) as a Perfetto-loadable trace dict.

    Example: a `conv1_kernel_time` event on CPUExecutionProvider becomes an `X` event on the track
    "Nodes: CPUExecutionProvider"; with derived=True, a `conv1` span event is added on
    "Hase derived / node spans". Returns `{"traceEvents": [...], "displayTimeUnit": "ms"}`.
    """
    P.require_columns(events, P.EVENT_COLUMNS, "events")
    tids = _node_tracks(events)
    out = [_meta("process_name", ORT_PID, None, "ONNX Runtime profile"),
           _meta("process_sort_index", ORT_PID, None, 0, key="sort_index"),
           _meta("thread_name", ORT_PID, SESSION_TID, "Session (model_run, Execute)")]
    for (provider, _tid), (track, label) in tids.items():
        out.append(_meta("thread_name", ORT_PID, track, label))
    for row in events.itertuples(index=False):
        key = (getattr(row, P.PROVIDER), getattr(row, P.TID))
        track = tids[key][0] if getattr(row, P.EVENT_KIND) in P.NODE_KINDS else SESSION_TID
        out.append(_ort_event(row, track))
    if derived:
        out.extend(derived_events(events))
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def _node_tracks(events: pd.DataFrame) -> dict[tuple[str, int], tuple[int, str]]:
    """(provider, ORT thread id) -> (track id, track name); a thread suffix only where a provider has several."""
    nodes = events[events[P.EVENT_KIND].isin(P.NODE_KINDS)]
    pairs = nodes[[P.PROVIDER, P.TID]].drop_duplicates().sort_values([P.PROVIDER, P.TID])
    per_provider = pairs.groupby(P.PROVIDER)[P.TID].transform("size")
    tracks = {}
    for i, (provider, tid, n) in enumerate(zip(pairs[P.PROVIDER], pairs[P.TID], per_provider)):
        label = f"Nodes: {provider or 'unknown provider'}" + (f" (thread {tid})" if n > 1 else "")
        tracks[(provider, tid)] = (SESSION_TID + 1 + i, label)
    return tracks


def _meta(name: str, pid: int, tid: int | None, value: Any, key: str = "name") -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": "M", "name": name, "pid": pid, "args": {key: value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _ort_event(row: Any, track: int) -> dict[str, Any]:
    args: dict[str, Any] = {P.RUN_ID: int(getattr(row, P.RUN_ID))}
    for col, key in ((P.OP_TYPE, "op_name"), (P.PROVIDER, "provider")):
        if getattr(row, col):
            args[key] = getattr(row, col)
    if getattr(row, P.NODE_INDEX) >= 0:
        args["node_index"] = str(getattr(row, P.NODE_INDEX))
    for col in (P.INPUT_TYPE_SHAPE, P.OUTPUT_TYPE_SHAPE):
        if getattr(row, col):
            args[col] = json.loads(getattr(row, col))
    return {"cat": getattr(row, P.CAT), "name": getattr(row, P.NAME), "ph": "X", "pid": ORT_PID, "tid": track,
            "ts": float(getattr(row, P.TS_US)), "dur": float(getattr(row, P.DUR_US)), "args": args}


def derived_events(events: pd.DataFrame) -> list[dict[str, Any]]:
    """Hase-derived events (category "hase", ignored when the trace is read back): node spans,
    node gaps and before/after-Execute regions, with their track metadata."""
    out = [_meta("process_name", HASE_PID, None, "Hase derived"),
           _meta("process_sort_index", HASE_PID, None, 1, key="sort_index"),
           _meta("thread_name", HASE_PID, SPANS_TID, "node spans (fence_before -> fence_after, else kernel_time)"),
           _meta("thread_name", HASE_PID, GAPS_TID, "node gaps (no node running)"),
           _meta("thread_name", HASE_PID, REGIONS_TID, "run regions (before / after Execute)")]
    for s in P.node_spans(events).itertuples(index=False):
        out.append(_hase_event(s.node_name, s.ts_us, s.span_us, SPANS_TID, {
            P.RUN_ID: int(s.run_id), P.OP_TYPE: s.op_type, P.PROVIDER: s.provider, P.SPAN_SOURCE: s.span_source,
            P.KERNEL_TIME_US: float(s.kernel_time_us), "non_kernel_us": float(s.span_us - s.kernel_time_us),
            P.NESTED: bool(s.nested)}))
    for g in P.node_gaps(events).itertuples(index=False):
        out.append(_hase_event("gap", g.ts_us, g.dur_us, GAPS_TID, {
            P.RUN_ID: int(g.run_id), P.AFTER_NODE: g.after_node, P.BEFORE_NODE: g.before_node}))
    out.extend(_region_events(events))
    return out


def _region_events(events: pd.DataFrame) -> list[dict[str, Any]]:
    """'before Execute' and 'after Execute' stretches of every run that has an Execute event."""
    runs = events[events[P.EVENT_KIND] == P.MODEL_RUN].set_index(P.RUN_ID)
    ex = events[(events[P.EVENT_KIND] == P.EXECUTE) & (events[P.RUN_ID] >= 0)]
    ex = ex.sort_values(P.DUR_US, ascending=False, kind="stable").drop_duplicates(P.RUN_ID)
    out = []
    for e in ex.itertuples(index=False):
        run_id = int(getattr(e, P.RUN_ID))
        run_ts, run_dur = float(runs.at[run_id, P.TS_US]), float(runs.at[run_id, P.DUR_US])
        ex_ts, ex_end = float(getattr(e, P.TS_US)), float(getattr(e, P.TS_US) + getattr(e, P.DUR_US))
        args = {P.RUN_ID: run_id}
        out.append(_hase_event("before Execute", run_ts, ex_ts - run_ts, REGIONS_TID, args))
        out.append(_hase_event("after Execute", ex_end, run_ts + run_dur - ex_end, REGIONS_TID, args))
    return out


def _hase_event(name: str, ts_us: float, dur_us: float, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"cat": P.HASE_CAT, "name": name, "ph": "X", "pid": HASE_PID, "tid": tid, "ts": float(ts_us),
            "dur": max(float(dur_us), 0.0), "args": args}


def write_chrome_trace(trace: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a trace dict as JSON atomically (temp file + os.replace), so a reader never sees half a file."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(trace, f, separators=(",", ":"))
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise HaseError(f"cannot write the trace to {p} ({exc.strerror or exc}): choose another --out-trace") from exc
    log.debug("wrote %d trace events to %s", len(trace.get("traceEvents", [])), p)
    return p
