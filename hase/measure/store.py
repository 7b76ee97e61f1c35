"""Append-only, resumable measurement store in one SQLite file (`data/hase.sqlite`).

Why SQLite and not Parquet: every unit of work (a kernel on a device, a model on a device) commits its
rows *and* its done-marker in one transaction, so a run killed at any moment — SIGKILL included —
leaves either the whole job or none of it, and primary keys make a duplicate impossible. Parquet would
need one file per job plus a manifest to get the same guarantees. SQLite is in the standard library,
and pandas reads it directly (`Store.table(name)`).

Tables (column names in `hase.measure.schema.SCHEMA`; every measurement row carries the device metadata
columns `hase.runtime.types.DEVICE_META_COLS`, filled by `hase.runtime.sessions.device_metadata`):
- models:              one row per model and optimization level: family, source path, sha256, node and kernel
                       counts. A model is its file's content: `register_model` gives each sha256 one model_id.
- kernels:             one row per unique kernel signature: op type, domain, signature JSON.
- model_nodes:         model -> node -> kernel mapping, in execution order.
- kernel_measurements: standalone latency per (kernel, device, variant 'warm'|'cold_weights').
- node_spans:          in-model span and ORT kernel_time per (model, device, node), median over runs.
- model_measurements:  session.run wall time and the profile decomposition per (model, device); `latency_ms` is
                       the robust statistic (minimum of block medians, `hase.runtime.robust`) with its
                       `block_spread`, `noisy` flag and `n_blocks`; median/p10/p90 are over all timed runs.
- canary columns:      `canary_ms`, `canary_ratio`, `host_busy` on kernel and model rows: the canary check before
                       the job (`hase.measure.canary`); NULL where no check ran (or on rows of older stores).
- fixed_costs:         per-run cost of an empty kernel per device (the invocation overhead).
- device_peaks:        the host's peaks per device (`hase.measure.peaks`): GEMM FLOP/s, bandwidth per memory level,
                       per-call overhead, one row per figure (empty in stores older than schema version 4).
                       These two hold one measurement per device: measured again, it replaces the device's rows.
- skips:               jobs that could not be measured, with the reason and the hash of the settings they
                       failed under (a skip under other settings is retried).
- jobs:                done-markers (`kernel:<kernel_id>`, `model:<sha256>`); a job present here is never run again.
- hosts:               one row per measuring machine: its fingerprint (`hase.runtime.host`) keyed by its digest,
                       which every measurement row carries as `host_fp` (schema version 5).
- signatures:          a device's speed signature per host (`hase.measure.signature`), measured once by collect.

Safety: a store is checked on open (`hase.measure.schema`) and refused, untouched, when it is not one;
writers take `writer_lock` (one collect at a time per store) and `commit_job` re-checks the done-marker
inside its transaction, so two writers never duplicate a job; SQLite errors become one-line HaseErrors.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from hase.errors import HaseError
from hase.measure import schema
from hase.measure.schema import CANARY_COLS, DECOMP_COLS, ROBUST_COLS, SCHEMA, SCHEMA_VERSION, TIMING_COLS
from hase.runtime.host import HostFingerprint
from hase.runtime.robust import RobustTiming
from hase.runtime.types import HOST_FP, Timing

if sys.platform != "win32":
    import fcntl

__all__ = ["CANARY_COLS", "DECOMP_COLS", "ROBUST_COLS", "SCHEMA", "SCHEMA_VERSION", "TIMING_COLS", "Store",
           "robust_row", "sqlite_message", "timing_row"]

log = logging.getLogger(__name__)


def timing_row(t: Timing) -> dict[str, Any]:
    """A timing as the TIMING_COLS of a measurement row (the spread and run count stay beside the median)."""
    return dict(zip(TIMING_COLS, (t.median_ms, t.p10_ms, t.p90_ms, t.mean_ms, t.min_ms, t.n), strict=True))


def robust_row(t: RobustTiming) -> dict[str, Any]:
    """A robust timing as TIMING_COLS (over all timed runs) plus ROBUST_COLS (the statistic and its doubt)."""
    mean = t.total_s * 1e3 / t.n_runs
    timing = Timing(t.median_ms, t.p10_ms, t.p90_ms, mean, t.min_ms, t.n_runs, t.total_s)
    robust = (t.latency_ms, t.spread, int(t.noisy), len(t.block_medians_ms))
    return {**timing_row(timing), **dict(zip(ROBUST_COLS, robust, strict=True))}


#: (words in SQLite's message, what Hase says about it) in order; {path} and {msg} are filled in
_SQLITE_FIXES = (
    (("full",), "store {path}: the disk is full ({msg}): free some space and rerun; everything committed is kept"),
    (("readonly", "read-only"), "store {path} cannot be written ({msg}): make the file and its directory "
                                "writable, or give another --store"),
    (("locked", "busy"), "store {path} is locked by another process ({msg}): wait for it to finish (or end it), "
                         "then rerun"),
    (("unable to open",), "cannot open store {path} ({msg}): check that its directory exists and is writable"),
    (("malformed", "not a database", "corrupt"), "store {path} is corrupt ({msg}): restore it from a backup or "
                                                 "give a new --store"),
    (("i/o",), "store {path}: disk I/O error ({msg}): check the disk and its free space, then rerun"),
)


def sqlite_message(path: Path, exc: sqlite3.Error) -> str:
    """One line naming what went wrong with the store and what to do about it."""
    msg = " ".join(str(exc).split())
    low = msg.lower()
    for words, text in _SQLITE_FIXES:
        if any(w in low for w in words):
            return text.format(path=path, msg=msg)
    return f"store {path}: SQLite error ({msg})"


class Store:
    """The measurement store; open with `Store(path)`, use as a context manager to close it.

    Opening checks the file (`hase.measure.schema`): a foreign, corrupt or newer-version file is refused
    with a HaseError and never written to; a version-0 store is migrated when opened for writing.
    `readonly=True` opens it read-only (what train/evaluate do) and needs an existing, non-empty store.
    """

    def __init__(self, path: str | Path, readonly: bool = False, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.busy_timeout_s = busy_timeout_s
        schema.check_file(self.path, readonly)
        if not readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise HaseError(f"cannot create the directory of store {self.path} ({exc.strerror or exc}): "
                                f"give another --store") from None
        # read-only stores are opened read-write with writes refused (query_only), not with mode=ro: a mode=ro
        # connection cannot remove the -wal/-shm files of a WAL store when it closes, and would leave them behind
        uri = f"file:{quote(str(self.path.absolute()))}" + ("?mode=rw" if readonly else "")
        with self._errors():
            self.conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, isolation_level=None)
        try:
            with self._errors():
                if readonly:
                    self.conn.execute("PRAGMA query_only = 1")
                self._open()
        except BaseException:
            self.conn.close()
            raise

    def _open(self) -> None:
        schema.check_integrity(self.conn, self.path)
        version = schema.check_schema(self.conn, self.path, self.readonly)
        if self.readonly:
            return
        self._use_wal()
        self.conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a killed process
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE type='table'").fetchone():
            schema.create(self.conn)
        else:
            schema.migrate(self.conn, version)
        self._check_writable()

    def _check_writable(self) -> None:
        """Write to the store now (its own schema version, rolled back), so that a read-only file, folder or file
        system is one error line before any work starts, not an error after a first job, under progress bars."""
        version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute(f"PRAGMA user_version = {version}")
        finally:
            self.conn.execute("ROLLBACK")

    def _use_wal(self) -> None:
        """Switch the store to WAL, retrying while another process switches it at the same moment.

        SQLite answers two connections that both escalate from a read lock to switch the journal mode with an
        immediate "database is locked" (deadlock avoidance; the busy timeout is not consulted), so the loser
        waits a little and looks again: by then the winner has usually switched it for both.
        """
        deadline = time.monotonic() + self.busy_timeout_s
        while self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

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
    def _errors(self) -> Iterator[None]:
        """SQLite's environment errors (full, read-only, locked, corrupt) as one-line HaseErrors; bugs
        (a constraint violated, bad SQL) stay what they are."""
        try:
            yield
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.DatabaseError as exc:
            raise HaseError(sqlite_message(self.path, exc)) from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All writes inside commit together or not at all (BEGIN IMMEDIATE: the write lock is taken first)."""
        with self._errors():
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def writer_lock(self) -> Iterator[None]:
        """Hold the store's writer lock: one collect at a time per store, a second one waits its turn.

        An advisory `flock` on `<store>.lock`, released by the operating system when the holder exits,
        SIGKILL included, so it never goes stale. Measurements taken side by side would also disturb each
        other's timings. (Not on Windows, where `commit_job` alone keeps two writers from duplicating.)
        """
        if sys.platform == "win32":
            yield
            return
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise HaseError(f"cannot create the lock file {lock_path} ({exc.strerror or exc}): make the store's "
                            f"directory writable") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.warning("another collect is writing to %s: waiting for it to finish (what it measures is "
                            "reused, not measured again)", self.path)
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

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
        with self._errors():
            self.conn.executemany(sql, [[_plain(r.get(c)) for c in cols] for r in rows])
        return len(rows)

    def is_done(self, job: str, device: str) -> bool:
        """Whether the job has committed its rows on this device (it is never run again)."""
        with self._errors():
            row = self.conn.execute("SELECT 1 FROM jobs WHERE job=? AND device=?", (job, device)).fetchone()
        return row is not None

    def has_skip(self, job: str, device: str, settings_hash: str | None = None) -> bool:
        """Whether the job was recorded as a skip on this device (under these settings, when given)."""
        sql = "SELECT 1 FROM skips WHERE job=? AND device=?"
        params: list[Any] = [job, device]
        if settings_hash is not None:
            sql += " AND settings_hash=?"
            params.append(settings_hash)
        with self._errors():
            return self.conn.execute(sql, params).fetchone() is not None

    def mark_done(self, job: str, device: str) -> None:
        """Write the job's done-marker; call inside the transaction that writes its rows."""
        self.insert("jobs", [{"job": job, "device": device, "finished_at": time.time()}])

    def commit_job(self, job: str, device: str, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> bool:
        """A job's rows and its done-marker in one transaction, and its earlier skip cleared; False (nothing
        written) when another writer finished the job first — the done-marker is re-checked under the lock.

        Rows of a `schema.PER_DEVICE_TABLES` table replace the device's earlier ones there (a store whose jobs
        were emptied but not its peaks measures them again), in the same transaction.
        """
        with self.transaction():
            if self.is_done(job, device):
                return False
            for table, table_rows in rows.items():
                if table in schema.PER_DEVICE_TABLES:
                    self.conn.execute(f"DELETE FROM {table} WHERE device=?", (device,))
                self.insert(table, table_rows)
            self.conn.execute("DELETE FROM skips WHERE job=? AND device=?", (job, device))
            self.mark_done(job, device)
        return True

    def replace_rows(self, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Replace measurement rows (matched by each table's primary key) in one transaction: a job measured
        again, its done-marker kept."""
        with self.transaction():
            for table, table_rows in rows.items():
                pk = SCHEMA[table][1]
                where = " AND ".join(f"{c}=?" for c in pk)
                for r in table_rows:
                    self.conn.execute(f"DELETE FROM {table} WHERE {where}", [_plain(r.get(c)) for c in pk])
                self.insert(table, table_rows)

    def record_pass(self, model_id: str, device: str, latency_ms: float, min_ms: float) -> bool:
        """Add a later timing pass of a full model (`hase.measure.retime`): `latency_ms` becomes the minimum over its
        passes, `first_latency_ms` keeps the first's, `n_passes` counts them and `pass_spread` is the largest over
        the smallest, less 1; `min_ms` the quickest run of all passes. False when the store has no robust latency of
        that model and device."""
        with self.transaction():
            cur = self.conn.execute(
                "UPDATE model_measurements SET first_latency_ms = COALESCE(first_latency_ms, latency_ms), "
                "pass_spread = MAX(latency_ms * (1 + COALESCE(pass_spread, 0)), ?1) / MIN(latency_ms, ?1) - 1, "
                "latency_ms = MIN(latency_ms, ?1), n_passes = COALESCE(n_passes, 1) + 1, "
                "min_ms = MIN(COALESCE(min_ms, ?4), ?4) "
                "WHERE model_id = ?2 AND device = ?3 AND latency_ms > 0",
                (float(latency_ms), model_id, device, float(min_ms)))
        return cur.rowcount > 0

    def record_skip(self, job: str, device: str, target: str, stage: str, reason: str,
                    settings_hash: str | None = None) -> None:
        """A job that failed for a reason of its own, with the hash of the settings it failed under; replaces
        an earlier skip of the job, and is not written when another writer has finished the job meanwhile."""
        with self.transaction():
            if self.is_done(job, device):
                return
            self.conn.execute("DELETE FROM skips WHERE job=? AND device=?", (job, device))
            self.insert("skips", [{"job": job, "device": device, "target": target, "stage": stage,
                                   "reason": reason[:500], "at": time.time(), "settings_hash": settings_hash}])

    def register_model(self, sha256: str, name: str, model_row: Mapping[str, Any],
                       node_rows: Sequence[Mapping[str, Any]], kernel_rows: Sequence[Mapping[str, Any]]) -> str:
        """Write a model's row, node->kernel map and kernels once (shared by every device config) and return
        its model_id: the id its content already has, else `name`, else `name-<sha256[:8]>` when `name` is
        another model's. Rows are given without model_id; the store fills it in."""
        with self.transaction():
            model_id = self._model_id(sha256, name)
            self.insert("kernels", kernel_rows, ignore_existing=True)
            self.insert("models", [{**model_row, "model_id": model_id, "sha256": sha256}], ignore_existing=True)
            self.insert("model_nodes", [{**r, "model_id": model_id} for r in node_rows], ignore_existing=True)
        return model_id

    def _model_id(self, sha256: str, name: str) -> str:
        row = self.conn.execute("SELECT model_id FROM models WHERE sha256=? ORDER BY model_id LIMIT 1",
                                (sha256,)).fetchone()
        if row:
            return str(row[0])
        for candidate in (name, f"{name}-{sha256[:8]}"):
            if not self.conn.execute("SELECT 1 FROM models WHERE model_id=?", (candidate,)).fetchone():
                return candidate
        return f"{name}-{sha256}"

    def model_kernels(self, sha256: str, opt_level: str) -> list[str]:
        """Ids of the kernels of the model with this content, split at this optimization level (none: not yet)."""
        with self._errors():
            return [r[0] for r in self.conn.execute(
                "SELECT DISTINCT n.kernel_id FROM model_nodes n JOIN models m ON n.model_id = m.model_id AND "
                "n.opt_level = m.opt_level WHERE m.sha256 = ? AND m.opt_level = ?", (sha256, opt_level))]

    def model_latencies(self, device: str) -> dict[str, float]:
        """The latency (ms) of every model measured on `device`, by the stem of its file's name (a zoo model's
        spec name); `hase.sampler.active` reads it between jobs."""
        with self._errors():
            rows = self.conn.execute(
                "SELECT m.source, mm.latency_ms FROM model_measurements mm JOIN (SELECT DISTINCT model_id, source "
                "FROM models) m ON m.model_id = mm.model_id WHERE mm.device = ?", (device,)).fetchall()
        return {Path(str(source)).stem: float(ms) for source, ms in rows if ms is not None}

    def op_span_totals(self, device: str, skip_family_prefix: str) -> dict[str, float]:
        """In-model time (ms, node spans summed) by op type over the models measured on `device` whose family does
        not start with `skip_family_prefix` (the sampled blocks'): where real-shaped graphs spend their time."""
        with self._errors():
            rows = self.conn.execute(
                "SELECT ns.op_type, SUM(ns.span_ms) FROM node_spans ns JOIN model_measurements mm ON "
                "mm.model_id = ns.model_id AND mm.device = ns.device WHERE ns.device = ? AND "
                "substr(mm.family, 1, ?) != ? GROUP BY ns.op_type",
                (device, len(skip_family_prefix), skip_family_prefix)).fetchall()
        return {str(op): float(ms) for op, ms in rows if ms is not None}

    def known_kernels(self) -> set[str]:
        """Ids of every kernel signature in the store."""
        with self._errors():
            return {r[0] for r in self.conn.execute("SELECT kernel_id FROM kernels")}

    def table(self, name: str) -> pd.DataFrame:
        """A whole table as a DataFrame with the documented columns."""
        if name not in SCHEMA:
            raise HaseError(f"unknown table {name!r}: the store has {sorted(SCHEMA)}")
        if not self._has_table(name):  # a table added since the store's version (`schema.ADDED_TABLES`): empty
            return pd.DataFrame(columns=SCHEMA[name][0])
        try:
            with self._errors():
                return pd.read_sql_query(f"SELECT * FROM {name}", self.conn)
        except pd.errors.DatabaseError as exc:  # pandas wraps the SQLite error it met
            cause = exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else sqlite3.DatabaseError(str(exc))
            raise HaseError(sqlite_message(self.path, cause)) from exc

    def register_host(self, fingerprint: HostFingerprint) -> str:
        """Keep a machine's fingerprint in `hosts` once (rows carry only its digest); returns the digest."""
        with self.transaction():
            self.insert("hosts", [{HOST_FP: fingerprint.digest, "fingerprint_json": json.dumps(fingerprint.to_dict()),
                                   "first_seen": time.time()}], ignore_existing=True)
        return fingerprint.digest

    def hosts(self) -> dict[str, HostFingerprint]:
        """Every fingerprint the store holds, by digest (none in a store older than the `hosts` table)."""
        if not self._has_table("hosts"):
            return {}
        with self._errors():
            rows = self.conn.execute("SELECT host_fp, fingerprint_json FROM hosts").fetchall()
        return {str(d): HostFingerprint.from_dict(json.loads(j), f"store host {d}") for d, j in rows}

    def record_signature(self, device: str, host_fp: str, signature: Mapping[str, Any]) -> None:
        """Keep a device's speed signature measured on the host `host_fp` (replacing an earlier one)."""
        with self.transaction():
            self.conn.execute("DELETE FROM signatures WHERE device=? AND host_fp=?", (device, host_fp))
            self.insert("signatures", [{"device": device, HOST_FP: host_fp, "signature_json": json.dumps(signature),
                                        "measured_at": time.time()}])

    def signature(self, device: str, host_fp: str | None = None) -> dict[str, Any] | None:
        """A device's speed signature on host `host_fp` (the latest of any host when None), or None."""
        if not self._has_table("signatures"):
            return None
        sql, params = "SELECT signature_json FROM signatures WHERE device=?", [device]
        if host_fp is not None:
            sql += " AND host_fp=?"
            params.append(host_fp)
        with self._errors():
            row = self.conn.execute(sql + " ORDER BY measured_at DESC LIMIT 1", params).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def counts(self) -> dict[str, int]:
        """Row count of every table."""
        with self._errors():
            return {t: int(self.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) if self._has_table(t) else 0
                    for t in SCHEMA}

    def _has_table(self, name: str) -> bool:
        """Whether the file holds the table (a read-only store of an older version may lack one added since)."""
        with self._errors():
            return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                     (name,)).fetchone() is not None


def _plain(v: Any) -> Any:
    """numpy scalars -> Python numbers, containers -> JSON, so SQLite stores numbers as numbers."""
    if v is None or isinstance(v, (str, int, float)):
        return v
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, (list, dict, tuple)):
        return json.dumps(v)
    return str(v)
