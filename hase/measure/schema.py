"""What a Hase store is: its tables, its schema version, and the checks that refuse any other file.

Opening a store (`Store`) goes through `check_file` (an SQLite header, or an empty/new file) and
`check_schema` (no table Hase does not know, the columns Hase wrote, a version this Hase reads) before
anything is written, so a foreign or corrupt file is never touched. Versions (`PRAGMA user_version`):
0 — stores of Hase before versioning: model jobs keyed by file name, skips without a settings hash;
1 — model jobs keyed by the model file's sha256, `skips.settings_hash`;
2 — the robust full-model latency (`latency_ms`: minimum of block medians, `block_spread`, `noisy`, `n_blocks`)
    and the canary's check of the host (`canary_ms`, `canary_ratio`, `host_busy`) on measurement rows;
3 — the measuring machine's name (`host`) on every measurement row (a fleet's workers differ);
4 — the table `device_peaks`: the host's peaks per device config (`hase.measure.peaks`); older stores lack it;
5 — the measuring machine's fingerprint (`hase.runtime.host`): its digest (`host_fp`) on every measurement row,
    the fingerprints in `hosts` (one row per digest), and each device's speed signature per host in `signatures`
    (`hase.measure.signature`); older stores lack them;
6 — in-model spans joined to the kernel graph by node and output shape (`hase.profiling.names`): ORT names the
    ReorderOutputs anew in each session, so before 6 their spans went by name to other ReorderOutputs of the model;
    the migration drops what was measured of a model with two or more ReorderOutput kernels (its measurement,
    spans and done-marker, per device), and the next collect measures it again;
7 — a full model's later timing passes (`hase.measure.retime`): `latency_ms` is the minimum over its passes,
    `first_latency_ms` the first pass's (the one its spans were profiled with), `n_passes`, and `pass_spread`
    (largest over smallest pass, less 1); NULL on rows of one pass.
`migrate` brings any older version to the current one; columns it adds are NULL on rows measured before
(`hase.predict.dataset` then falls back to `median_ms`).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from hase.errors import HaseError
from hase.runtime.types import DEVICE_META_COLS, HOST, HOST_FP

SCHEMA_VERSION = 7
SQLITE_HEADER = b"SQLite format 3\x00"

TIMING_COLS = ["median_ms", "p10_ms", "p90_ms", "mean_ms", "min_ms", "n_runs"]
#: the robust full-model statistic (hase.runtime.robust): min of block medians, its spread, the noise flag
ROBUST_COLS = ["latency_ms", "block_spread", "noisy", "n_blocks"]
#: the canary check before a job: its median, its ratio to the run's quietest check, the host-busy flag
CANARY_COLS = ["canary_ms", "canary_ratio", "host_busy"]
#: a full model's later timing passes (`hase.measure.retime`): the first pass's latency, how many, their spread
PASS_COLS = ["first_latency_ms", "n_passes", "pass_spread"]
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
                             *DEVICE_META_COLS, "measured_at", *CANARY_COLS, HOST, HOST_FP],
                            ["kernel_id", "device", "variant"]),
    "node_spans": (["model_id", "node_name", "kernel_id", "op_type", "provider", "span_ms", "kernel_time_ms",
                    "span_source", "n_runs", *DEVICE_META_COLS, HOST, HOST_FP], ["model_id", "device", "node_name"]),
    "model_measurements": (["model_id", "family", "n_kernel_nodes", "n_memcpy_nodes", "n_cpu_fallback_nodes",
                            "timing_api", *TIMING_COLS, *DECOMP_COLS, "n_profiled_runs", *DEVICE_META_COLS,
                            "measured_at", *ROBUST_COLS, *CANARY_COLS, HOST, HOST_FP, *PASS_COLS],
                           ["model_id", "device"]),
    "fixed_costs": (["kind", *TIMING_COLS, *DEVICE_META_COLS, "measured_at", HOST, HOST_FP], ["device", "kind"]),
    "skips": (["job", "device", "target", "stage", "reason", "at", "settings_hash"], ["job", "device"]),
    "jobs": (["job", "device", "finished_at"], ["job", "device"]),
    "device_peaks": (["metric", "value", "capacity_bytes", "working_set_bytes", *DEVICE_META_COLS, "measured_at",
                      HOST, HOST_FP], ["device", "metric"]),
    "hosts": ([HOST_FP, "fingerprint_json", "first_seen"], [HOST_FP]),
    "signatures": (["device", HOST_FP, "signature_json", "measured_at"], ["device", HOST_FP]),
}
#: tables that hold one measurement of a device config, written by one job (`fixed:empty_kernel`, `peaks:host`): a job
#: measured again (its done-marker gone, its rows kept) replaces all of the device's rows, never adds beside them
PER_DEVICE_TABLES = ("fixed_costs", "device_peaks")
REAL_COLS = {*TIMING_COLS, *DECOMP_COLS, "span_ms", "kernel_time_ms", "measured_at", "at", "finished_at",
             "latency_ms", "block_spread", "canary_ms", "canary_ratio", "value", "first_latency_ms", "pass_spread"}
INT_COLS = {"n_runs", "n_onnx_nodes", "n_kernel_nodes", "n_unique_kernels", "node_idx", "intra_op_threads",
            "inter_op_threads", "n_sessions", "weight_bytes", "n_memcpy_nodes", "n_cpu_fallback_nodes",
            "n_profiled_runs", "noisy", "n_blocks", "n_passes", "host_busy", "capacity_bytes", "working_set_bytes"}
#: version -> the columns it added, per table (an older store lacks them until `migrate` adds them)
_ADDED: dict[int, dict[str, list[str]]] = {
    1: {"skips": ["settings_hash"]},
    2: {"model_measurements": [*ROBUST_COLS, *CANARY_COLS], "kernel_measurements": list(CANARY_COLS)},
    3: {t: [HOST] for t in ("kernel_measurements", "node_spans", "model_measurements", "fixed_costs")},
    5: {t: [HOST_FP] for t in ("kernel_measurements", "node_spans", "model_measurements", "fixed_costs",
                               "device_peaks")},
    7: {"model_measurements": list(PASS_COLS)},
}
#: version -> the tables it added (an older store lacks them until `migrate` creates them; readers find none)
ADDED_TABLES: dict[int, tuple[str, ...]] = {4: ("device_peaks",), 5: ("hosts", "signatures")}
_HINT = "point --store at a Hase store or at a new file"


def _sql_type(col: str) -> str:
    return "REAL" if col in REAL_COLS else "INTEGER" if col in INT_COLS else "TEXT"


def ddl(table: str) -> str:
    """CREATE TABLE statement of one store table."""
    cols, pk = SCHEMA[table]
    defs = [f"{c} {_sql_type(c)}" for c in cols]
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(defs)}, PRIMARY KEY ({', '.join(pk)}))"


def check_file(path: Path, readonly: bool) -> None:
    """Refuse what cannot be a store before SQLite opens it: a directory, a non-SQLite file, an empty file to read."""
    if path.is_dir():
        raise HaseError(f"store {path} is a directory: give the path of a .sqlite file")
    if not path.exists():
        if readonly:
            raise HaseError(f"measurement store not found: {path} (run `make collect` first)")
        return
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise HaseError(f"cannot read store {path} ({exc.strerror or exc}): check its permissions") from None
    if not head:
        if readonly:
            raise HaseError(f"store {path} is an empty file, not a Hase store: run `hase collect --store {path}` "
                            f"to fill it")
        return
    if head != SQLITE_HEADER:
        raise HaseError(f"{path} is not an SQLite file, so not a Hase store: {_HINT}")


def check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    """`PRAGMA quick_check`: a store SQLite itself finds damaged is refused, never written to."""
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.DatabaseError as exc:
        if not any(word in str(exc).lower() for word in ("malformed", "not a database", "corrupt")):
            raise  # not damage: the file cannot be opened or locked (a read-only folder), which the Store says
        raise HaseError(f"store {path} is corrupt ({exc}): restore it from a backup or {_HINT}") from None
    if rows != ["ok"]:
        raise HaseError(f"store {path} is corrupt (quick_check: {rows[0][:120]}): restore it from a backup "
                        f"or {_HINT}")


def check_schema(conn: sqlite3.Connection, path: Path, readonly: bool) -> int:
    """The store's schema version after checking it holds Hase's tables and nothing else (0 tables: a new store)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")]
    foreign = sorted(set(names) - set(SCHEMA))
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise HaseError(f"{path} is not a Hase store (it holds tables Hase does not know: {shown}): {_HINT}")
    if version > SCHEMA_VERSION:
        raise HaseError(f"store {path} has schema version {version}, newer than this Hase reads "
                        f"({SCHEMA_VERSION}): upgrade Hase")
    if not names:
        if version != 0:
            raise HaseError(f"{path} is not a Hase store (user_version {version}, no tables): {_HINT}")
        if readonly:
            raise HaseError(f"store {path} holds no measurements yet: run `hase collect --store {path}` first")
        return version
    missing = sorted(set(SCHEMA) - set(names) - {t for v, ts in ADDED_TABLES.items() if v > version for t in ts})
    if missing and (readonly or version == SCHEMA_VERSION):
        raise HaseError(f"store {path} lacks the tables {missing}: it is incomplete or not a Hase store; {_HINT}")
    for table in names:
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        want = set(SCHEMA[table][0]) - {c for v, added in _ADDED.items() if v > version for c in added.get(table, [])}
        lacks, extra = sorted(want - cols), sorted(cols - set(SCHEMA[table][0]))
        if lacks or extra:
            what = f"lacks the columns {lacks[:4]}" if lacks else f"has columns Hase does not know {extra[:4]}"
            raise HaseError(f"{path} is not a Hase store this Hase reads (its table {table} {what}): {_HINT}")
    return version


def create(conn: sqlite3.Connection) -> None:
    """Every table of the current schema, and its version, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    for table in SCHEMA:
        conn.execute(ddl(table))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring an older store to the current schema in one transaction (a crash leaves it at its old version).

    0 -> 1: adds `skips.settings_hash` (NULL: the skip is retried under any settings), re-keys model
    done-markers from the file name to the model's sha256, and drops the model skips (keyed by name, so the
    model is tried again under its content's key). 1 -> 2: adds the robust and canary columns (`_ADDED[2]`),
    2 -> 3 the `host` column (`_ADDED[3]`), NULL on the rows already there: nothing is measured again;
    3 -> 4 creates the `device_peaks` table (empty: the next collect measures the peaks);
    4 -> 5 adds the `host_fp` column (`_ADDED[5]`, NULL on the rows already there) and creates the `hosts` and
    `signatures` tables (empty); 5 -> 6 drops the model-level rows of models whose ReorderOutput spans went to
    the wrong nodes (`_drop_misjoined_spans`); 6 -> 7 adds the pass columns (`_ADDED[7]`, NULL: one pass).
    """
    if version >= SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])  # another process may have won
    if current < SCHEMA_VERSION:
        for table in SCHEMA:
            conn.execute(ddl(table))
        for table in SCHEMA:
            cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            for v in sorted(_ADDED):
                for col in _ADDED[v].get(table, []):
                    if v > current and col not in cols:
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {col} {_sql_type(col)}")
        if current < 1:
            _rekey_model_jobs(conn)
        if current < 6:
            _drop_misjoined_spans(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("COMMIT")


def _drop_misjoined_spans(conn: sqlite3.Connection) -> None:
    """Version 5 -> 6: per device, forget the measurement, spans and done-marker of every model whose spans hold
    two or more ReorderOutput kernels (spans joined by name went to other ReorderOutputs of the model)."""
    bad = conn.execute("SELECT model_id, device FROM node_spans WHERE op_type = 'ReorderOutput' "
                       "GROUP BY model_id, device HAVING COUNT(DISTINCT kernel_id) > 1").fetchall()
    for model_id, device in bad:
        for table in ("node_spans", "model_measurements"):
            conn.execute(f"DELETE FROM {table} WHERE model_id = ? AND device = ?", (model_id, device))
        conn.execute("DELETE FROM jobs WHERE device = ? AND job IN (SELECT 'model:' || sha256 FROM models "
                     "WHERE model_id = ?)", (device, model_id))


def _rekey_model_jobs(conn: sqlite3.Connection) -> None:
    """Version 0 -> 1: model done-markers keyed by the model's sha256, name-keyed leftovers dropped."""
    conn.execute("UPDATE OR IGNORE jobs SET job = 'model:' || (SELECT m.sha256 FROM models m WHERE "
                 "m.model_id = substr(jobs.job, 7) ORDER BY m.opt_level LIMIT 1) WHERE job LIKE 'model:%' AND "
                 "EXISTS (SELECT 1 FROM models m WHERE m.model_id = substr(jobs.job, 7) AND m.sha256 IS NOT NULL)")
    # what is left keyed by a name (a skip, a marker of a content already re-keyed) would never match again
    conn.execute("DELETE FROM skips WHERE job LIKE 'model:%'")
    conn.execute("DELETE FROM jobs WHERE job LIKE 'model:%' AND substr(job, 7) NOT IN "
                 "(SELECT sha256 FROM models WHERE sha256 IS NOT NULL)")
