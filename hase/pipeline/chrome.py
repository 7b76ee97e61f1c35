"""Chrome-trace / Perfetto JSON of a pipeline run: one track per device stream, flow arrows per batch.

Layout (open at https://ui.perfetto.dev or chrome://tracing):
- one process per device, named by `process_name` metadata: `host` (partition/merge, Python functions)
  first, then every backend device (`cpu`, `cuda:0`, `ov:CPU`, ...);
- one thread (track) per executor instance or host stream, named by `thread_name` metadata, e.g.
  `embed · ov:CPU e1` or `embed · partition/merge`;
- `X` slices for inferences (cat `infer`), partition / merge (on the host track), errors, profiler flushes;
  their args carry batch id, submit/wait/HW/marshalling times in microseconds;
- flow arrows (`s`/`t`/`f`, cat `batch`) linking each batch through the stages in order, and from a
  data-parallel partition to each of its executors.
`pipeline_trace` builds the trace dict; `hase.profiling.perfetto.write_chrome_trace` writes it (atomically).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pandas as pd

from hase.pipeline import schema as S
from hase.pipeline.runner import PipelineRun

HOST_PID = 1
HOST_PROCESS = "host (partition / merge, Python functions)"
FLOW_CAT = "batch"


def process_ids(tracks: pd.DataFrame) -> dict[str, int]:
    """Device -> pid: host first, then devices in the order their first track appears."""
    pids = {"host": HOST_PID}
    for dev in tracks.sort_values(S.TRACK_ID)[S.DEVICE]:
        pids.setdefault(dev, len(pids) + 1)
    return pids


def process_label(device: str) -> str:
    """The process (device) name shown in the trace viewer."""
    if device == "host":
        return HOST_PROCESS
    if device.startswith("ov:"):
        return f"{device} (OpenVINO {device[3:]})"
    return f"{device} (ONNX Runtime {'CUDA' if device.startswith('cuda') else 'CPU'} EP)"


def metadata_events(tracks: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """process_name / thread_name (and sort index) metadata naming every device and track."""
    pids = process_ids(tracks)
    for dev, pid in pids.items():
        yield {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": process_label(dev)}}
        yield {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
    for t in tracks.itertuples(index=False):
        pid, tid = pids[getattr(t, S.DEVICE)], int(getattr(t, S.TRACK_ID)) + 1
        yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": getattr(t, S.TRACK)}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
               "args": {"sort_index": int(getattr(t, S.TRACK_ID))}}


def slice_events(events: pd.DataFrame, pids: dict[str, int]) -> Iterator[dict[str, Any]]:
    """One `X` slice per event, on its track."""
    for e in events.itertuples(index=False):
        kind, batch, dev = getattr(e, S.KIND), int(getattr(e, S.BATCH)), getattr(e, S.DEVICE)
        name = f"{getattr(e, S.STAGE)} b{batch}" if kind == S.INFER else f"{kind} b{batch}"
        args = {"batch_id": batch, "stage": getattr(e, S.STAGE), "device": getattr(e, S.DEVICE),
                "rows": int(getattr(e, S.ROWS))}
        if kind == S.INFER:
            args.update({"submit_us": getattr(e, S.SUBMIT_NS) / 1e3, "wait_us": getattr(e, S.WAIT_NS) / 1e3,
                         "run_index": int(getattr(e, S.RUN_INDEX))})
            for col, key in ((S.HW_NS, "hw_us"), (S.MARSHAL_NS, "marshal_us")):
                if not math.isnan(getattr(e, col)):
                    args[key] = getattr(e, col) / 1e3
        yield {"ph": "X", "name": name, "cat": kind, "pid": pids[dev], "tid": int(getattr(e, S.TRACK_ID)) + 1,
               "ts": getattr(e, S.TS_NS) / 1e3, "dur": getattr(e, S.DUR_NS) / 1e3, "args": args}


def flow_events(events: pd.DataFrame, pids: dict[str, int]) -> Iterator[dict[str, Any]]:
    """Flow arrows: per batch through its stages (inference, or partition -> merge), and partition -> executors."""
    anchors = events[events[S.KIND].isin((S.INFER, S.PARTITION, S.MERGE))]
    dp_stages = set(anchors.loc[anchors[S.KIND] == S.PARTITION, S.STAGE])
    order = {S.PARTITION: 0, S.INFER: 1, S.MERGE: 2}
    anchors = anchors.assign(_o=anchors[S.KIND].map(order)).sort_values([S.BATCH, S.STAGE_INDEX, "_o", S.EXECUTOR])
    for batch, g in anchors.groupby(S.BATCH, sort=True):
        chain = g[~(g[S.STAGE].isin(dp_stages) & (g[S.KIND] == S.INFER))]
        yield from _flow(f"b{batch}", list(chain.itertuples(index=False)), pids)
        for stage in dp_stages & set(g[S.STAGE]):
            part = g[(g[S.STAGE] == stage) & (g[S.KIND] == S.PARTITION)]
            for e in g[(g[S.STAGE] == stage) & (g[S.KIND] == S.INFER)].itertuples(index=False):
                rows = [*part.itertuples(index=False), e]
                yield from _flow(f"b{batch}.{stage}.e{getattr(e, S.EXECUTOR)}", rows, pids)


def _flow(flow_id: str, rows: list[Any], pids: dict[str, int]) -> Iterator[dict[str, Any]]:
    """One flow arrow through `rows` (trace events in order): start, steps, finish."""
    if len(rows) < 2:
        return
    for i, e in enumerate(rows):
        ph = "s" if i == 0 else "f" if i == len(rows) - 1 else "t"
        ev = {"ph": ph, "name": "batch", "cat": FLOW_CAT, "id": flow_id, "pid": pids[getattr(e, S.DEVICE)],
              "tid": int(getattr(e, S.TRACK_ID)) + 1, "ts": (getattr(e, S.TS_NS) + getattr(e, S.DUR_NS) / 2) / 1e3}
        if ph == "f":
            ev["bp"] = "e"
        yield ev


def chrome_trace_events(run: PipelineRun) -> Iterator[dict[str, Any]]:
    """Every trace event of the run: metadata, slices, flows."""
    S.require_columns(run.events, S.EVENT_COLUMNS, "events")
    pids = process_ids(run.tracks)
    yield from metadata_events(run.tracks)
    yield from slice_events(run.events, pids)
    yield from flow_events(run.events, pids)


def pipeline_trace(run: PipelineRun) -> dict[str, Any]:
    """The run as a Chrome-trace dict (`traceEvents`, `displayTimeUnit`, `otherData` with the run's settings,
    counts and failure), for `hase.profiling.perfetto.write_chrome_trace`."""
    other = {"pipeline": run.spec.name, "batches": run.batches, "completed": run.completed, "traced": run.traced,
             "dropped_events": run.dropped_events, "metadata": run.metadata,
             "failure": None if run.failure is None else run.failure.__dict__}
    return {"traceEvents": list(chrome_trace_events(run)), "displayTimeUnit": "ms", "otherData": other}
