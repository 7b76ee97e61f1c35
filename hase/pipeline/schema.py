"""Column names of every pipeline DataFrame, in one place, and the check public entry points run on them.

Times are integers in nanoseconds since the run started (`*_ns`); hardware and marshalling times are floats,
NaN where the backend did not report them. Summary tables use `*_ms` and `*_util` (0..1) columns.
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from hase import tables

# ---- event kinds
INFER = "infer"              # one inference on one executor (device track)
PARTITION = "partition"      # CPU split of a data-parallel stage's input (host track)
MERGE = "merge"              # CPU sync (last device done -> merged) + concatenate (host track)
ERROR = "error"              # the failed attempt of a stage that raised mid-run
PROFILER_FLUSH = "profiler_flush"  # ORT profiler stopped at its event budget (a visible pause)
KINDS = (INFER, PARTITION, MERGE, ERROR, PROFILER_FLUSH)

# ---- events (one row per trace event)
KIND = "kind"
STAGE = "stage"
STAGE_INDEX = "stage_index"
EXECUTOR = "executor"        # index inside the stage; -1 on the host track of a data-parallel stage
STREAM = "stream"
DEVICE = "device"
TRACK = "track"              # track name, unique per (stage, stream, executor)
TRACK_ID = "track_id"
BATCH = "batch_id"
TS_NS = "ts_ns"
DUR_NS = "dur_ns"
END_NS = "end_ns"
SUBMIT_NS = "submit_ns"      # wall time inside the submit call (start_async / bind + hand-off)
WAIT_NS = "wait_ns"          # wall time inside the wait call
HW_NS = "hw_ns"              # backend-reported device time (ORT kernel times, OpenVINO real_time)
MARSHAL_NS = "marshal_ns"    # input/reorder/convert (OpenVINO) or memcpy/reorder (ORT) layer time
ROWS = "rows"
RUN_INDEX = "run_index"      # the executor's own run counter (warm-up runs included)
EVENT_COLUMNS = (KIND, STAGE, STAGE_INDEX, EXECUTOR, STREAM, DEVICE, TRACK, TRACK_ID, BATCH, TS_NS, DUR_NS,
                 END_NS, SUBMIT_NS, WAIT_NS, HW_NS, MARSHAL_NS, ROWS, RUN_INDEX)

# ---- tracks (one row per executor instance or host track)
TRACK_KIND = "track_kind"    # "device" or "host"
TRACK_COLUMNS = (TRACK_ID, TRACK, TRACK_KIND, DEVICE, STAGE, STAGE_INDEX, STREAM, EXECUTOR)

# ---- summary tables
N = "n"
BUSY_MS = "busy_ms"
SPAN_MS = "span_ms"
WALL_UTIL = "wall_util"
HW_UTIL = "hw_util"
HW_COVERAGE = "hw_coverage"
BUBBLE_MEAN_MS = "bubble_mean_ms"
BUBBLE_P50_MS = "bubble_p50_ms"
BUBBLE_P95_MS = "bubble_p95_ms"
WALL_MS = "wall_ms"
HW_MS = "hw_ms"
PENALTY_MS = "penalty_ms"    # wall - hw: the concurrency (and software) penalty
MARSHAL_MS = "marshal_ms"
SUBMIT_MS = "submit_ms"
WAIT_MS = "wait_ms"
STREAMS = "streams"
STAGE_MS = "stage_ms"
STAGE_P50_MS = "stage_p50_ms"
STAGE_P95_MS = "stage_p95_ms"
PER_STREAM_MS = "per_stream_ms"
PARTITION_MS = "partition_ms"
DEVICE_MAX_MS = "device_max_ms"
MERGE_MS = "merge_ms"
TOTAL_MS = "total_ms"
CYCLE_MS = "cycle_ms"
BOTTLENECK = "bottleneck"
LATENCY_MS = "latency_ms"
PREDICTED_MS = "predicted_ms"
MEASURED_MS = "measured_ms"
ERROR_PCT = "error_pct"
NOTE = "note"
TRACK_KINDS = ("device", "host")


def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise HaseError naming the missing columns, so a wrong pipeline frame fails at the entry point."""
    tables.require_columns(df, columns, what, "build it with hase.pipeline (run_pipeline / read_events_csv)")
