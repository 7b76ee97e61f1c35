"""Recording trace events with bounded memory: fixed-size records in preallocated chunks, one log per thread.

Each record is 73 bytes (a numpy structured row: no Python objects per event); chunks of `CHUNK` rows are
allocated as needed, and a budget shared by all logs caps the total (events past it are counted as dropped).
So 10,000 events take about 0.7 MB plus one chunk per log, and the default cap of 1,000,000 about 73 MB.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hase.pipeline import schema

CHUNK = 4096
RECORD = np.dtype([
    ("kind", "u1"), ("track_id", "i4"), ("batch_id", "i8"), ("ts_ns", "i8"), ("dur_ns", "i8"),
    ("submit_ns", "i8"), ("wait_ns", "i8"), ("hw_ns", "f8"), ("marshal_ns", "f8"), ("rows", "i4"),
    ("run_index", "i8"),
])
KIND_CODES = {k: i for i, k in enumerate(schema.KINDS)}


@dataclass(frozen=True)
class Track:
    """One timeline: an executor instance (device track) or the host track of a data-parallel stage stream."""

    track_id: int
    name: str
    kind: str
    device: str
    stage: str
    stage_index: int
    stream: int
    executor: int


class EventBudget:
    """The cap on events kept in memory, shared by every log of a run (thread-safe under the GIL)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._taken = itertools.count()
        self.dropped = 0

    def take(self) -> bool:
        """Take one event from the budget; False (and counted as dropped) once it is spent."""
        if next(self._taken) < self.limit:
            return True
        self.dropped += 1
        return False


class EventLog:
    """Events written by one thread; nothing is recorded when `enabled` is False (tracing off)."""

    def __init__(self, budget: EventBudget, enabled: bool = True) -> None:
        self.enabled = enabled
        self._budget = budget
        self._chunks: list[np.ndarray] = []
        self._pos = CHUNK

    def record(self, kind: str, track_id: int, batch_id: int, ts_ns: int, end_ns: int, *, submit_ns: int = 0,
               wait_ns: int = 0, hw_ns: float = np.nan, marshal_ns: float = np.nan, rows: int = 0,
               run_index: int = -1) -> None:
        """Append one event (absolute perf_counter_ns times); a no-op when disabled or over budget."""
        if not self.enabled or not self._budget.take():
            return
        if self._pos == CHUNK:
            self._chunks.append(np.empty(CHUNK, dtype=RECORD))
            self._pos = 0
        self._chunks[-1][self._pos] = (KIND_CODES[kind], track_id, batch_id, ts_ns, end_ns - ts_ns, submit_ns,
                                       wait_ns, hw_ns, marshal_ns, rows, run_index)
        self._pos += 1

    def records(self) -> np.ndarray:
        """All recorded rows as one structured array."""
        if not self._chunks:
            return np.empty(0, dtype=RECORD)
        return np.concatenate([*self._chunks[:-1], self._chunks[-1][: self._pos]])

    def __len__(self) -> int:
        return 0 if not self._chunks else (len(self._chunks) - 1) * CHUNK + self._pos

    @property
    def nbytes(self) -> int:
        """Memory held by the allocated chunks."""
        return sum(c.nbytes for c in self._chunks)


def tracks_frame(tracks: Iterable[Track]) -> pd.DataFrame:
    """The track table (one row per track), columns `schema.TRACK_COLUMNS`."""
    rows = [(t.track_id, t.name, t.kind, t.device, t.stage, t.stage_index, t.stream, t.executor) for t in tracks]
    return pd.DataFrame(rows, columns=list(schema.TRACK_COLUMNS))


def events_frame(logs: Iterable[EventLog], tracks: pd.DataFrame, t0_ns: int,
                 hardware: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None) -> pd.DataFrame:
    """Merge the logs into the events DataFrame (`schema.EVENT_COLUMNS`), times relative to `t0_ns`.

    `hardware` maps a track id to per-run (hw_ns, marshal_ns) arrays read after the run (ORT profiles);
    they fill the NaN hardware times of that track's inference events by `run_index`.
    """
    rec = np.concatenate([lg.records() for lg in logs] or [np.empty(0, dtype=RECORD)])
    df = pd.DataFrame({name: rec[name] for name in RECORD.names or ()})
    df[schema.KIND] = pd.Series(np.asarray(schema.KINDS, dtype=object)[df["kind"].to_numpy()], dtype=object)
    df[schema.TS_NS] = df[schema.TS_NS] - t0_ns
    df[schema.END_NS] = df[schema.TS_NS] + df[schema.DUR_NS]
    for tid, (hw, marshal) in (hardware or {}).items():
        _fill_hardware(df, tid, hw, marshal)
    df = df.merge(tracks.drop(columns=[schema.TRACK_KIND]), on=schema.TRACK_ID, how="left")
    df = df.sort_values([schema.TS_NS, schema.TRACK_ID], kind="stable").reset_index(drop=True)
    return df[list(schema.EVENT_COLUMNS)]


def _fill_hardware(df: pd.DataFrame, track_id: int, hw: np.ndarray, marshal: np.ndarray) -> None:
    sel = (df[schema.TRACK_ID] == track_id) & (df[schema.KIND] == schema.INFER) & (df[schema.RUN_INDEX] >= 0)
    idx = df.loc[sel, schema.RUN_INDEX].to_numpy()
    ok = idx < len(hw)
    rows = df.index[sel][ok]
    df.loc[rows, schema.HW_NS] = hw[idx[ok]]
    df.loc[rows, schema.MARSHAL_NS] = marshal[idx[ok]]
