"""ONNX Runtime's profile JSON, read in one place: loading, the event classifier and run attribution.

ORT's profiler writes a JSON array of Chrome trace events, one event a line (`[`, `{...},` ..., `{...}`, `]`).
Two ways in: `read_trace` parses a whole file strictly (an ORT profile, or a trace Hase exported as
`{"traceEvents": [...]}`); `stream_trace` reads ORT's layout one line at a time, so a large profile never sits
in memory as one document, and skips lines that do not parse (brackets, a profile cut off mid-write).
`profile_events` turns raw events into classified `ProfileEvent` records; `parse_events` / `load_profile` build
the events DataFrame every analysis starts from; `run_ids` says which `model_run` an event falls into.
ORT profiles are in microseconds, and so is every figure here (`*_us`).
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hase.errors import HaseError

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

# ---------------------------------------------------------------- events DataFrame columns (one place)

CAT, NAME, PH, TS_US, DUR_US, PID, TID = "cat", "name", "ph", "ts_us", "dur_us", "pid", "tid"
NODE_NAME, EVENT_KIND, OP_TYPE, PROVIDER = "node_name", "event_kind", "op_type", "provider"
NODE_INDEX, RUN_ID = "node_index", "run_id"
INPUT_TYPE_SHAPE, OUTPUT_TYPE_SHAPE = "input_type_shape", "output_type_shape"
EVENT_COLUMNS = (CAT, NAME, PH, TS_US, DUR_US, PID, TID, NODE_NAME, EVENT_KIND, OP_TYPE, PROVIDER,
                 NODE_INDEX, RUN_ID, INPUT_TYPE_SHAPE, OUTPUT_TYPE_SHAPE)

# ---------------------------------------------------------------- the classifier's vocabulary

# event_kind values
KERNEL_TIME, FENCE_BEFORE, FENCE_AFTER = "kernel_time", "fence_before", "fence_after"
MODEL_RUN, EXECUTE, SESSION, OTHER = "model_run", "execute", "session", "other"
GPU_KERNEL = "gpu_kernel"  # a device kernel (category "Kernel") that CUDA-EP builds with CUDA profiling record
NODE_KINDS = (FENCE_BEFORE, KERNEL_TIME, FENCE_AFTER)
_SUFFIXES = {"_kernel_time": KERNEL_TIME, "_fence_before": FENCE_BEFORE, "_fence_after": FENCE_AFTER}

CPU_PROVIDER = "CPUExecutionProvider"
MEMCPY_OPS = ("MemcpyToHost", "MemcpyFromHost")  # nodes ORT inserts to copy tensors between providers
HASE_CAT = "hase"  # category of Hase-derived events in exported traces; ignored when read back


@dataclass(frozen=True)
class ProfileEvent:
    """One complete (`"ph": "X"`) profile event, classified; node fields are "" or -1 where ORT gives none."""

    cat: str
    name: str
    ph: str
    ts_us: float
    dur_us: float
    pid: int
    tid: int
    node_name: str  # the node of a `<node>_kernel_time` / `_fence_before` / `_fence_after` event
    kind: str  # one of the event_kind values above
    op_type: str
    provider: str
    node_index: int
    args: Mapping[str, Any]  # ORT's args as written (shapes, memory, thread scheduling stats)


# ---------------------------------------------------------------- loading


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The raw events of a complete profile: a JSON list of events, or `{"traceEvents": [...]}`.

    Raises HaseError for a missing, non-JSON or truncated file, or one without a list of events.
    """
    p = _existing(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise HaseError(f"{p} is not a JSON text file: pass the .json file ONNX Runtime's profiler wrote") from exc
    except json.JSONDecodeError as exc:
        raise HaseError(f"{p} is not valid JSON ({exc.msg} at line {exc.lineno}): pass a complete ORT profile "
                        f"(a truncated file means the session did not call end_profiling())") from exc
    except RecursionError as exc:
        raise HaseError(f"{p} nests JSON too deeply to be a profile: pass the .json file ONNX Runtime wrote") from exc
    if isinstance(raw, dict):
        raw = raw.get("traceEvents")
    if not isinstance(raw, list):
        raise HaseError(f"{p} holds no trace events: expected a JSON list of events or {{\"traceEvents\": [...]}}")
    return raw


def stream_trace(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The raw events of an ORT profile read one line at a time; lines that are no JSON object are skipped.

    ORT writes one event a line, each but the last followed by a comma: `{"cat": ..., "ts": 3, ...},` yields
    that event; `[`, `]` and a line cut off mid-write yield nothing.
    """
    p = _existing(path)
    with p.open(encoding="utf-8") as fh:
        for line in fh:
            text = line.strip().rstrip(",")
            if not text.startswith("{"):
                continue
            try:
                ev = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(ev, dict):
                yield ev


def _existing(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    if p.is_dir():
        raise HaseError(f"profile {str(p)!r} is a directory: pass the .json file ONNX Runtime's profiler wrote")
    if not p.is_file():
        raise HaseError(f"profile file not found: {p} (check the path)")
    return p


# ---------------------------------------------------------------- classifying


def profile_events(records: Iterable[Any], source: str = "profile") -> Iterator[ProfileEvent]:
    """Classified complete events; metadata events and Hase-derived events of an exported trace are skipped.

    Raises HaseError for a record that is not a JSON object or has no numeric ts/dur.
    """
    for i, ev in enumerate(records):
        if not isinstance(ev, Mapping):
            raise HaseError(f"{source}: event #{i} is not a JSON object: pass an ORT profile file")
        if ev.get("ph", "X") != "X" or ev.get("cat") == HASE_CAT:
            continue
        yield to_event(ev, i, source)


def to_event(ev: Mapping[str, Any], i: int = 0, source: str = "profile") -> ProfileEvent:
    """One raw event as a `ProfileEvent`; `i` and `source` name it in the error for a missing ts/dur.

    Example: `{"cat": "Node", "name": "conv1_kernel_time", "ts": 10, "dur": 5, "args": {"op_name": "Conv"}}`
    -> node_name `conv1`, kind `kernel_time`, op_type `Conv`, ts_us 10.0, dur_us 5.0.
    """
    name, cat = str(ev.get("name", "")), str(ev.get("cat", ""))
    raw_args = ev.get("args")
    args: Mapping[str, Any] = raw_args if isinstance(raw_args, Mapping) else {}
    try:
        ts, dur = float(ev["ts"]), float(ev.get("dur", 0.0))
    except (KeyError, TypeError, ValueError) as exc:
        raise HaseError(f"{source}: event #{i} ({name!r}) has no numeric ts/dur: pass an ORT profile file") from exc
    node_name, kind = classify(cat, name)
    return ProfileEvent(cat=cat, name=name, ph=str(ev.get("ph", "X")), ts_us=ts, dur_us=dur,
                        pid=_int(ev.get("pid")), tid=_int(ev.get("tid")), node_name=node_name, kind=kind,
                        op_type=str(args.get("op_name", "")), provider=str(args.get("provider", "")),
                        node_index=_int(args.get("node_index")), args=args)


def classify(cat: str, name: str) -> tuple[str, str]:
    """(node_name, event_kind) of an event from its category and name.

    Example: ("Node", "conv1_fence_before") -> ("conv1", "fence_before"); ("Session", "model_run") ->
    ("", "model_run"); ("Session", "ParallelExecutor::Execute") -> ("", "execute").
    """
    if cat == "Node":
        for suffix, kind in _SUFFIXES.items():
            if name.endswith(suffix):
                return name[: -len(suffix)], kind
        return "", OTHER
    if cat == "Kernel":
        return "", GPU_KERNEL
    if name == MODEL_RUN:
        return "", MODEL_RUN
    if "Executor::Execute" in name:  # SequentialExecutor::Execute, ParallelExecutor::Execute, ...
        return "", EXECUTE
    return "", SESSION if cat == "Session" else OTHER


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a float inf
        return -1


# ---------------------------------------------------------------- run attribution


def run_ids(run_ts_us: npt.ArrayLike, run_dur_us: npt.ArrayLike, ts_us: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """For each time in `ts_us`, the index (in start order) of the run whose [start, start + dur] holds it;
    -1 outside every run.

    Example: runs starting at 0 and 100, both 50 long; ts 10, 60, 100 -> [0, -1, 1].
    """
    starts, durs = np.asarray(run_ts_us, dtype=np.float64), np.asarray(run_dur_us, dtype=np.float64)
    ts = np.asarray(ts_us, dtype=np.float64)
    if starts.size == 0:
        return np.full(ts.shape, -1, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], starts[order] + durs[order]
    if np.any(starts[1:] < ends[:-1]):
        log.warning("model_run events overlap (concurrent session.run calls): run_id follows start order")
    idx = np.searchsorted(starts, ts, side="right") - 1
    inside = (idx >= 0) & (ts <= ends[np.clip(idx, 0, None)])
    return np.where(inside, idx, -1).astype(np.int64)


# ---------------------------------------------------------------- the events DataFrame


def load_profile(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read an ORT profiler JSON file (or a trace Hase exported) into the events DataFrame (`EVENT_COLUMNS`).

    Raises HaseError for a missing, non-JSON or truncated file, or one without trace events.
    """
    return parse_events(read_trace(path), source=str(path))


def parse_events(records: Iterable[Any], source: str = "profile") -> pd.DataFrame:
    """Chrome trace event dicts (ORT's `ph: "X"` events) -> the events DataFrame (`EVENT_COLUMNS`).

    Example: `{"cat": "Node", "name": "conv1_kernel_time", "ts": 10, "dur": 5, "args": {"op_name": "Conv"}}`
    becomes a row with node_name `conv1`, event_kind `kernel_time`, op_type `Conv`, ts_us 10, dur_us 5,
    and run_id set to the model_run it falls into (-1 outside runs, e.g. session_initialization).
    """
    # pandas only for the DataFrame path (120 ms to import): the probe and the pipeline stream raw events
    import pandas as pd  # noqa: PLC0415

    rows = [_row(ev) for ev in profile_events(records, source)]
    if not rows:
        raise HaseError(f"{source} has no complete ('ph': 'X') trace events: is it an ONNX Runtime profile?")
    df = pd.DataFrame(rows, columns=[c for c in EVENT_COLUMNS if c != RUN_ID])
    df = df.sort_values(TS_US, kind="stable").reset_index(drop=True)
    df = _fill_node_fields(df)
    runs = df[df[EVENT_KIND] == MODEL_RUN]
    df[RUN_ID] = run_ids(runs[TS_US], runs[DUR_US], df[TS_US])
    return df[list(EVENT_COLUMNS)]


def _row(ev: ProfileEvent) -> tuple[Any, ...]:
    shapes = [json.dumps(ev.args[k], separators=(",", ":")) if k in ev.args else ""
              for k in (INPUT_TYPE_SHAPE, OUTPUT_TYPE_SHAPE)]
    return (ev.cat, ev.name, ev.ph, ev.ts_us, ev.dur_us, ev.pid, ev.tid, ev.node_name, ev.kind, ev.op_type,
            ev.provider, ev.node_index, *shapes)


def _fill_node_fields(df: pd.DataFrame) -> pd.DataFrame:
    """Fence events carry only op_name: give them the provider and node index of their kernel_time."""
    kt = df[df[EVENT_KIND] == KERNEL_TIME].drop_duplicates(NODE_NAME).set_index(NODE_NAME)
    fence = df[EVENT_KIND].isin((FENCE_BEFORE, FENCE_AFTER))
    for col, missing in ((PROVIDER, ""), (NODE_INDEX, -1), (OP_TYPE, "")):
        fill = fence & (df[col] == missing)
        if fill.any():
            values = df.loc[fill, NODE_NAME].map(kt[col]).astype(object).fillna(missing)
            df.loc[fill, col] = values.astype(df[col].dtype).to_numpy()
    return df
