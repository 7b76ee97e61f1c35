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

from hase.pipeline import schema
from hase.pipeline.runner import PipelineRun

HOST_PID = 1
HOST_PROCESS = "host (partition / merge, Python functions)"
FLOW_CAT = "batch"


def process_ids(tracks: pd.DataFrame) -> dict[str, int]:
    """Device -> pid: host first, then devices in the order their first track appears."""
    pids = {"host": HOST_PID}
    for dev in tracks.sort_values(schema.TRACK_ID)[schema.DEVICE]:
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
        pid, tid = pids[getattr(t, schema.DEVICE)], int(getattr(t, schema.TRACK_ID)) + 1
        yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": getattr(t, schema.TRACK)}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
               "args": {"sort_index": int(getattr(t, schema.TRACK_ID))}}


def slice_events(events: pd.DataFrame, pids: dict[str, int]) -> Iterator[dict[str, Any]]:
    """One `X` slice per event, on its track."""
    for e in events.itertuples(index=False):
        kind, batch, dev = getattr(e, schema.KIND), int(getattr(e, schema.BATCH)), getattr(e, schema.DEVICE)
        name = f"{getattr(e, schema.STAGE)} b{batch}" if kind == schema.INFER else f"{kind} b{batch}"
        args = {"batch_id": batch, "stage": getattr(e, schema.STAGE), "device": getattr(e, schema.DEVICE),
                "rows": int(getattr(e, schema.ROWS))}
        if kind == schema.INFER:
            args.update({"submit_us": getattr(e, schema.SUBMIT_NS) / 1e3, "wait_us": getattr(e, schema.WAIT_NS) / 1e3,
                         "run_index": int(getattr(e, schema.RUN_INDEX))})
            for col, key in ((schema.HW_NS, "hw_us"), (schema.MARSHAL_NS, "marshal_us")):
                if not math.isnan(getattr(e, col)):
                    args[key] = getattr(e, col) / 1e3
        yield {"ph": "X", "name": name, "cat": kind, "pid": pids[dev], "tid": int(getattr(e, schema.TRACK_ID)) + 1,
               "ts": getattr(e, schema.TS_NS) / 1e3, "dur": getattr(e, schema.DUR_NS) / 1e3, "args": args}


def flow_events(events: pd.DataFrame, pids: dict[str, int]) -> Iterator[dict[str, Any]]:
    """Flow arrows: per batch through its stages (inference, or partition -> merge), and partition -> executors."""
    anchors = events[events[schema.KIND].isin((schema.INFER, schema.PARTITION, schema.MERGE))]
    dp_stages = set(anchors.loc[anchors[schema.KIND] == schema.PARTITION, schema.STAGE])
    order = {schema.PARTITION: 0, schema.INFER: 1, schema.MERGE: 2}
    anchors = anchors.assign(_o=anchors[schema.KIND].map(order)).sort_values([schema.BATCH, schema.STAGE_INDEX, "_o",
                                                                              schema.EXECUTOR])
    for batch, g in anchors.groupby(schema.BATCH, sort=True):
        chain = g[~(g[schema.STAGE].isin(dp_stages) & (g[schema.KIND] == schema.INFER))]
        yield from _flow(f"b{batch}", list(chain.itertuples(index=False)), pids)
        for stage in dp_stages & set(g[schema.STAGE]):
            part = g[(g[schema.STAGE] == stage) & (g[schema.KIND] == schema.PARTITION)]
            for e in g[(g[schema.STAGE] == stage) & (g[schema.KIND] == schema.INFER)].itertuples(index=False):
                rows = [*part.itertuples(index=False), e]
                yield from _flow(f"b{batch}.{stage}.e{getattr(e, schema.EXECUTOR)}", rows, pids)


def _flow(flow_id: str, rows: list[Any], pids: dict[str, int]) -> Iterator[dict[str, Any]]:
    """One flow arrow through `rows` (trace events in order): start, steps, finish."""
    if len(rows) < 2:
        return
    for i, e in enumerate(rows):
        ph = "s" if i == 0 else "f" if i == len(rows) - 1 else "t"
        ev = {"ph": ph, "name": "batch", "cat": FLOW_CAT, "id": flow_id, "pid": pids[getattr(e, schema.DEVICE)],
              "tid": int(getattr(e, schema.TRACK_ID)) + 1,
              "ts": (getattr(e, schema.TS_NS) + getattr(e, schema.DUR_NS) / 2) / 1e3}
        if ph == "f":
            ev["bp"] = "e"
        yield ev


def chrome_trace_events(run: PipelineRun) -> Iterator[dict[str, Any]]:
    """Every trace event of the run: metadata, slices, flows."""
    schema.require_columns(run.events, schema.EVENT_COLUMNS, "events")
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
