"""Append-only, resumable measurement store in one SQLite file (`data/hase.sqlite`).

Why SQLite and not Parquet: every unit of work (a kernel on a device, a model on a device) commits its
rows *and* its done-marker in one transaction, so a run killed at any moment — SIGKILL included —
leaves either the whole job or none of it, and primary keys make a duplicate impossible. Parquet would
need one file per job plus a manifest to get the same guarantees. SQLite is in the standard library,
and pandas reads it directly (`Store.table(name)`).

Tables (column names are the constants below; every measurement row carries the device metadata
columns `hase.measure.types.DEVICE_META_COLS`, filled by `hase.measure.runtime.device_metadata`):
- models:              one row per model: family, source path, sha256, node and kernel counts.
- kernels:             one row per unique kernel signature: op type, domain, signature JSON.
- model_nodes:         model -> node -> kernel mapping, in execution order.
- kernel_measurements: standalone latency per (kernel, device, variant 'warm'|'cold_weights').
- node_spans:          in-model span and ORT kernel_time per (model, device, node), median over runs.
- model_measurements:  session.run wall time and the profile decomposition per (model, device).
- fixed_costs:         per-run cost of an empty kernel per device (the invocation overhead).
- skips:               jobs that could not be measured, with the reason.
- jobs:                done-markers; a job present here is never run again.
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hase.errors import HaseError
from hase.measure.types import DEVICE_META_COLS, Timing

TIMING_COLS = ["median_ms", "p10_ms", "p90_ms", "mean_ms", "min_ms", "n_runs"]
DECOMP_COLS = ["model_run_us", "execute_us", "node_timeline_span_us", "kernel_time_sum_us",
               "node_non_kernel_us", "node_gap_us", "execute_outside_nodes_us",
               "model_run_outside_execute_us", "before_execute_us", "after_execute_us", "node_span_sum_us"]

SCHEMA: dict[str, tuple[list[str], list[str]]] = {
    # table: (columns, primary key)
    "models": (["model_id", "family", "source", "sha256", "n_onnx_nodes", "n_kernel_nodes", "n_unique_kernels",
                "inputs_json", "opt_level"], ["model_id", "opt_level"]),
    "kernels": (["kernel_id", "op_type", "domain", "signature_json"], ["kernel_id"]),
    "model_nodes": (["model_id", "opt_level", "node_idx", "node_name", "kernel_id", "op_type"],
                    ["model_id", "opt_level", "node_idx"]),
    "kernel_measurements": (["kernel_id", "op_type", "variant", "n_sessions", "weight_bytes", *TIMING_COLS,
                             *DEVICE_META_COLS, "measured_at"], ["kernel_id", "device", "variant"]),
    "node_spans": (["model_id", "node_name", "kernel_id", "op_type", "provider", "span_ms", "kernel_time_ms",
                    "span_source", "n_runs", *DEVICE_META_COLS], ["model_id", "device", "node_name"]),
    "model_measurements": (["model_id", "family", "n_kernel_nodes", "n_memcpy_nodes", "n_cpu_fallback_nodes",
                            "timing_api", *TIMING_COLS, *DECOMP_COLS, "n_profiled_runs", *DEVICE_META_COLS,
                            "measured_at"],
                           ["model_id", "device"]),
    "fixed_costs": (["kind", *TIMING_COLS, *DEVICE_META_COLS, "measured_at"], ["device", "kind"]),
    "skips": (["job", "device", "target", "stage", "reason", "at"], ["job", "device"]),
    "jobs": (["job", "device", "finished_at"], ["job", "device"]),
}
REAL_COLS = {*TIMING_COLS, *DECOMP_COLS, "span_ms", "kernel_time_ms", "measured_at", "at", "finished_at"}
INT_COLS = {"n_runs", "n_onnx_nodes", "n_kernel_nodes", "n_unique_kernels", "node_idx", "intra_op_threads",
            "inter_op_threads", "n_sessions", "weight_bytes", "n_memcpy_nodes", "n_cpu_fallback_nodes",
            "n_profiled_runs"}


def timing_row(t: Timing) -> dict[str, Any]:
    """A timing as the TIMING_COLS of a measurement row (the spread and run count stay beside the median)."""
    return dict(zip(TIMING_COLS, (t.median_ms, t.p10_ms, t.p90_ms, t.mean_ms, t.min_ms, t.n), strict=True))


def _ddl(table: str) -> str:
    cols, pk = SCHEMA[table]
    defs = [f"{c} {'REAL' if c in REAL_COLS else 'INTEGER' if c in INT_COLS else 'TEXT'}" for c in cols]
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(defs)}, PRIMARY KEY ({', '.join(pk)}))"


class Store:
    """The measurement store; open with `Store(path)`, use as a context manager to close it."""

    def __init__(self, path: str | Path, readonly: bool = False) -> None:
        self.path = Path(path)
        if readonly and not self.path.is_file():
            raise HaseError(f"measurement store not found: {self.path} (run `make collect` first)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a killed process
            if not readonly:
                for table in SCHEMA:
                    self.conn.execute(_ddl(table))
        except sqlite3.DatabaseError as exc:
            raise HaseError(f"{self.path} is not a Hase store ({exc}): point --store at another file") from exc

    def __enter__(self) -> Store:
        """The open store itself."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the connection, whatever happened inside the block."""
        self.close()

    def close(self) -> None:
        """Close the SQLite connection."""
        self.conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All writes inside commit together or not at all."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def insert(self, table: str, rows: Iterable[Mapping[str, Any]], *, ignore_existing: bool = False) -> int:
        """Insert rows (missing columns become NULL; unknown columns are an error). Call inside `transaction`."""
        cols = SCHEMA[table][0]
        rows = list(rows)
        for r in rows:
            extra = set(r) - set(cols)
            if extra:
                raise ValueError(f"unknown columns for {table}: {sorted(extra)}")
        verb = "INSERT OR IGNORE" if ignore_existing else "INSERT"
        sql = f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        self.conn.executemany(sql, [[_plain(r.get(c)) for c in cols] for r in rows])
        return len(rows)

    def is_done(self, job: str, device: str) -> bool:
        """Whether the job has committed its rows on this device (it is never run again)."""
        return self.conn.execute("SELECT 1 FROM jobs WHERE job=? AND device=?", (job, device)).fetchone() is not None

    def has_skip(self, job: str, device: str) -> bool:
        """Whether the job was recorded as a skip on this device."""
        return self.conn.execute("SELECT 1 FROM skips WHERE job=? AND device=?", (job, device)).fetchone() is not None

    def mark_done(self, job: str, device: str) -> None:
        """Write the job's done-marker; call inside the transaction that writes its rows."""
        self.insert("jobs", [{"job": job, "device": device, "finished_at": time.time()}])

    def record_skip(self, job: str, device: str, target: str, stage: str, reason: str) -> None:
        """A job that failed for a reason of its own: recorded (once) and reported, never retried silently."""
        with self.transaction():
            self.insert("skips", [{"job": job, "device": device, "target": target, "stage": stage,
                                   "reason": reason[:500], "at": time.time()}], ignore_existing=True)

    def known_kernels(self) -> set[str]:
        """Ids of every kernel signature in the store."""
        return {r[0] for r in self.conn.execute("SELECT kernel_id FROM kernels")}

    def table(self, name: str) -> pd.DataFrame:
        """A whole table as a DataFrame with the documented columns."""
        if name not in SCHEMA:
            raise HaseError(f"unknown table {name!r}: the store has {sorted(SCHEMA)}")
        return pd.read_sql_query(f"SELECT * FROM {name}", self.conn)

    def counts(self) -> dict[str, int]:
        """Row count of every table."""
        return {t: int(self.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in SCHEMA}


def _plain(v: Any) -> Any:
    """numpy scalars -> Python numbers, containers -> JSON, so SQLite stores numbers as numbers."""
    if v is None or isinstance(v, (str, int, float)):
        return v
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, (list, dict, tuple)):
        return json.dumps(v)
    return str(v)
