"""hase.measure.store and .schema: transactions, exactly-once inserts, stores checked on open, SQLite errors."""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from hase.errors import HaseError
from hase.measure.store import SCHEMA, SCHEMA_VERSION, Store


def test_transaction_is_all_or_nothing(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        with pytest.raises(RuntimeError), s.transaction():
            s.insert("kernels", [{"kernel_id": "k1", "op_type": "Conv", "domain": "", "signature_json": "{}"}])
            s.mark_done("kernel:k1", "cpu")
            raise RuntimeError("killed mid-job")
        assert s.counts()["kernels"] == 0 and not s.is_done("kernel:k1", "cpu")
        with s.transaction():
            s.insert("kernels", [{"kernel_id": "k1", "op_type": "Conv", "domain": "", "signature_json": "{}"}])
            s.mark_done("kernel:k1", "cpu")
        assert s.is_done("kernel:k1", "cpu")
        with pytest.raises(sqlite3.IntegrityError), s.transaction():  # a second copy is impossible
            s.insert("kernels", [{"kernel_id": "k1", "op_type": "Conv", "domain": "", "signature_json": "{}"}])
        assert s.table("kernels").shape == (1, len(SCHEMA["kernels"][0]))


def test_unknown_columns_and_tables(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        with pytest.raises(ValueError, match="unknown columns"), s.transaction():
            s.insert("kernels", [{"kernel_id": "k", "bogus": 1}])
        with pytest.raises(HaseError, match="unknown table"):
            s.table("nope")


def test_skips_are_recorded_once(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        s.record_skip("kernel:x", "cpu", "Foo:x", "kernel", "fails standalone")
        s.record_skip("kernel:x", "cpu", "Foo:x", "kernel", "fails standalone")
        assert s.has_skip("kernel:x", "cpu") and s.counts()["skips"] == 1


def test_collect_into_a_store_whose_jobs_are_gone_but_not_its_peaks(tmp_path):
    """Issue 30: the jobs emptied, the empty kernel's cost and the peaks kept: collect measures both again and
    replaces the device's rows (a stale metric of the device goes too; another device's peaks stay) instead of
    failing on `UNIQUE constraint failed: device_peaks.device, device_peaks.metric`."""
    from collect_cases import FAST

    from hase.measure import collect as coll

    cfg_path = tmp_path / "devices.toml"
    cfg_path.write_text(FAST)
    cfg = coll.load_collect_config(cfg_path)
    device = cfg.devices[0].name
    with Store(tmp_path / "s.sqlite") as s:
        coll.collect([], cfg, s)
        before = s.table("device_peaks")
        with s.transaction() as conn:
            conn.execute("DELETE FROM jobs")
            s.insert("device_peaks", [{"device": device, "metric": "bandwidth_stale", "value": 1.0},
                                      {"device": "other", "metric": "gemm_flops_per_s", "value": 2.0}])
        coll.collect([], cfg, s)
        after, fixed = s.table("device_peaks"), s.table("fixed_costs")
        assert s.is_done("peaks:host", device) and s.is_done("fixed:empty_kernel", device)
    mine = after[after.device == device]
    assert sorted(mine.metric) == sorted(before.metric)  # the device's peaks, all measured anew, nothing beside them
    assert (mine.measured_at > before.measured_at.max()).all()
    assert after[after.device == "other"].value.tolist() == [2.0]
    assert fixed.device.tolist() == [device]


def test_missing_or_foreign_store(tmp_path):
    with pytest.raises(HaseError, match="run `make collect` first"):
        Store(tmp_path / "none.sqlite", readonly=True)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(HaseError, match="not a Hase store"):
        Store(bad)


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def make_store(path: Path) -> Path:
    """A small real store: a few kernels, a done-marker and a skip."""
    with Store(path) as s, s.transaction():
        s.insert("kernels", [{"kernel_id": f"k{i}", "op_type": "Conv", "domain": "", "signature_json": "{}" * 50}
                             for i in range(200)])
        s.mark_done("kernel:k1", "cpu")
    return path


def test_a_new_store_waits_for_a_writer_while_it_switches_to_wal(tmp_path):
    """Another connection's write transaction while a new store switches to WAL: SQLite answers the switch with
    "database is locked" at once (no busy timeout), as when two collects create one store together; the open
    must wait for the writer, then succeed (the cause of a CI failure: two collects on a fresh store)."""
    path = tmp_path / "s.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (a)")
    other.execute("DROP TABLE t")  # an SQLite file with no tables, in rollback-journal mode
    other.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.3, other.execute, ("COMMIT",))
    timer.start()
    try:
        with Store(path) as s:
            assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert s.counts()["jobs"] == 0
    finally:
        timer.join()
        other.close()


def test_new_store_has_the_schema_version(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert {r[0] for r in s.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} == set(SCHEMA)
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    with Store(empty) as s:  # an empty file is a new store to write, ...
        assert s.counts()["kernels"] == 0
    (tmp_path / "e2.sqlite").write_bytes(b"")
    with pytest.raises(HaseError, match="is an empty file, not a Hase store: run `hase collect"):
        Store(tmp_path / "e2.sqlite", readonly=True)  # ... and nothing to read


@pytest.mark.parametrize("readonly", [False, True])
def test_foreign_sqlite_file_is_refused_and_never_written(tmp_path, readonly):
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.execute("INSERT INTO people VALUES ('ada')")
    conn.commit()
    conn.close()
    before = file_bytes(path)
    with pytest.raises(HaseError, match=r"is not a Hase store \(it holds tables Hase does not know: people\)"):
        Store(path, readonly=readonly)
    assert file_bytes(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]


def test_a_hase_table_with_other_columns_is_foreign(tmp_path):
    path = tmp_path / "s.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE models (id TEXT, size INTEGER)")
    conn.close()
    with pytest.raises(HaseError, match="its table models lacks the columns"):
        Store(path)


@pytest.mark.parametrize("readonly", [False, True])
def test_non_sqlite_file_and_directory_are_refused(tmp_path, readonly):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"PK\x03\x04 a zip file, say" * 100)
    with pytest.raises(HaseError, match="is not an SQLite file, so not a Hase store"):
        Store(bad, readonly=readonly)
    assert bad.read_bytes().startswith(b"PK")
    with pytest.raises(HaseError, match="is a directory"):
        Store(tmp_path, readonly=readonly)


@pytest.mark.parametrize("readonly", [False, True])
def test_corrupt_store_is_refused_and_never_written(tmp_path, readonly):
    path = make_store(tmp_path / "s.sqlite")
    conn = sqlite3.connect(path)
    root, page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name='kernels'").fetchone()[0], \
        conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with path.open("r+b") as f:  # scribble over the kernels table's root page
        f.seek((root - 1) * page)
        f.write(b"\x0d\xff\xff\xff\xff" * 40)
    before = file_bytes(path)
    with pytest.raises(HaseError, match=r"is corrupt .*: restore it from a backup"):
        Store(path, readonly=readonly)
    assert file_bytes(path) == before


def test_newer_or_incomplete_store_is_refused(tmp_path):
    path = make_store(tmp_path / "s.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(HaseError, match=f"schema version 99, newer than this Hase reads \\({SCHEMA_VERSION}\\)"):
        Store(path)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("DROP TABLE jobs")
    conn.close()
    with pytest.raises(HaseError, match=r"lacks the tables \['jobs'\]"):
        Store(path)


def test_readonly_store_is_not_written(tmp_path):
    path = make_store(tmp_path / "s.sqlite")
    before = file_bytes(path)
    with Store(path, readonly=True) as s:
        assert s.is_done("kernel:k1", "cpu")
        with pytest.raises(HaseError, match=r"cannot be written .*readonly"):
            s.record_skip("kernel:k2", "cpu", "Conv:k2", "kernel", "x")
    assert file_bytes(path) == before


def test_sqlite_errors_are_one_line_hase_errors(tmp_path):
    path = make_store(tmp_path / "s.sqlite")
    with Store(path) as s:
        s.conn.execute("PRAGMA query_only = 1")  # SQLite refuses writes as on a read-only file
        with pytest.raises(HaseError, match=r"cannot be written \(attempt to write a readonly database\): make"):
            s.record_skip("kernel:k2", "cpu", "Conv:k2", "kernel", "x")
        s.conn.execute("PRAGMA query_only = 0")
        s.conn.execute(f"PRAGMA max_page_count = {s.conn.execute('PRAGMA page_count').fetchone()[0]}")
        with pytest.raises(HaseError, match=r"the disk is full \(database or disk is full\): free some space"):
            s.commit_job("kernel:big", "cpu", {"kernels": [{"kernel_id": f"b{i}", "signature_json": "x" * 4000}
                                                           for i in range(50)]})
        assert not s.is_done("kernel:big", "cpu")  # the failed job left nothing behind
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        # refused when opened for writing (its write check), no longer at the first write
        with pytest.raises(HaseError, match="is locked by another process"), Store(path, busy_timeout_s=0.1) as s:
            s.mark_done("kernel:k3", "cpu")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_version_0_store_is_migrated_and_nothing_is_measured_again(tmp_path, conv_model_path):
    """A store written before versioning (model jobs keyed by file name, skips without a settings hash)."""
    from collect_cases import FAST

    from hase.measure import collect as coll

    cfg_path = tmp_path / "devices.toml"
    cfg_path.write_text(FAST)
    cfg = coll.load_collect_config(cfg_path)
    src = [coll.ModelSource("conv", "user", conv_model_path)]
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        coll.collect(src, cfg, s)
        s.record_skip("kernel:gone", "cpu-test", "Foo:gone", "kernel", "old failure", "0" * 16)
        s.record_skip("model:broken", "cpu-test", "broken", "split", "not a valid ONNX file", "0" * 16)
        digest = s.table("models").sha256[0]
    conn = sqlite3.connect(path, isolation_level=None)  # back to version 0
    conn.execute("UPDATE jobs SET job = 'model:conv' WHERE job = ?", (f"model:{digest}",))
    conn.execute("ALTER TABLE skips DROP COLUMN settings_hash")
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    with Store(path, readonly=True) as s:  # read as it is, not migrated
        assert "settings_hash" not in s.table("skips") and s.is_done("model:conv", "cpu-test")
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert s.is_done(f"model:{digest}", "cpu-test") and not s.is_done("model:conv", "cpu-test")
        skips = s.table("skips")
        assert skips.job.tolist() == ["kernel:gone"]  # a model skip keyed by name is dropped: tried again by content
        assert skips.settings_hash.isna().all()  # an old kernel skip is retried under any settings
        report = coll.collect(src, cfg, s)
    assert (report.models_done, report.kernels_measured) == (0, 0)


def test_model_ids_are_unique_per_content(tmp_path):
    row = {"family": "f", "source": "x", "opt_level": "extended"}
    with Store(tmp_path / "s.sqlite") as s:
        assert s.register_model("a" * 64, "net", row, [], []) == "net"
        assert s.register_model("a" * 64, "other", row, [], []) == "net"  # the content keeps its id
        assert s.register_model("b" * 64, "net", row, [], []) == "net-bbbbbbbb"
        assert s.register_model("c" * 64, "net-bbbbbbbb", row, [], []) == "net-bbbbbbbb-cccccccc"
        assert s.register_model("a" * 64, "net", {**row, "opt_level": "all"}, [], []) == "net"
        models = s.table("models")
    assert len(models) == 4 and not models.duplicated(["model_id", "opt_level"]).any()


def test_train_and_evaluate_on_empty_or_foreign_store(tmp_path, capsys):
    from conftest import REPO

    from hase.cli import main

    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    foreign = tmp_path / "foreign.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    fresh = tmp_path / "fresh.sqlite"
    Store(fresh).close()
    config = str(REPO / "configs" / "predictor.toml")
    for path, says in ((empty, "is an empty file"), (foreign, "is not a Hase store"),
                       (fresh, "holds no model measurements")):
        for argv in (["train", "--store", str(path), "--config", config, "--out", str(tmp_path / "p")],
                     ["evaluate", "--store", str(path), "--out", str(tmp_path / "r")]):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert says in err and err.count("\n") == 1 and "no such table" not in err, (argv, err)


def test_version_1_store_gets_the_robust_columns_and_training_falls_back_to_the_median(tmp_path, conv_model_path):
    """A store of schema 1 (no robust statistic, no canary): read as it is, its models' truth is the median;
    opened for writing it gains the columns, NULL on the old rows, and nothing is measured again."""
    from collect_cases import FAST

    from hase.measure import collect as coll
    from hase.measure.schema import CANARY_COLS, ROBUST_COLS
    from hase.predict import dataset
    from hase.runtime.types import HOST

    cfg_path = tmp_path / "devices.toml"
    cfg_path.write_text(FAST)
    cfg = coll.load_collect_config(cfg_path)
    src = [coll.ModelSource("conv", "user", conv_model_path)]
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        coll.collect(src, cfg, s)
    conn = sqlite3.connect(path, isolation_level=None)  # back to version 1
    for col in (*ROBUST_COLS, *CANARY_COLS):
        conn.execute(f"ALTER TABLE model_measurements DROP COLUMN {col}")
    for col in CANARY_COLS:
        conn.execute(f"ALTER TABLE kernel_measurements DROP COLUMN {col}")
    for table in ("kernel_measurements", "node_spans", "model_measurements", "fixed_costs"):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {HOST}")  # added by version 3
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    with Store(path, readonly=True) as s:  # read as it is, not migrated
        median = float(s.table("model_measurements").median_ms[0])
        assert "latency_ms" not in s.table("model_measurements")
    data = dataset.load_device_data(path)
    assert data.models[dataset.MEASURED_MS].tolist() == [median] and not data.models[dataset.HOST_BUSY].any()
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        mm = s.table("model_measurements")
        assert mm[[*ROBUST_COLS, *CANARY_COLS]].isna().all().all()
        assert s.table("kernel_measurements")[list(CANARY_COLS)].isna().all().all()
        assert s.table("node_spans")[HOST].isna().all() and s.table("fixed_costs")[HOST].isna().all()
        report = coll.collect(src, cfg, s)
    assert (report.models_done, report.kernels_measured) == (0, 0)
    # NULL latency_ms: the median
    assert dataset.load_device_data(path).models[dataset.MEASURED_MS].tolist() == [median]


def test_migrating_to_version_6_forgets_models_whose_reorder_spans_went_by_name(tmp_path):
    """Before version 6, spans joined the kernel graph by name, and ORT names ReorderOutputs anew in each session:
    a model with two ReorderOutput kernels is measured again (its rows and done-marker go), others stay."""
    path = tmp_path / "old.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    for model, kernels in (("two", ("k1", "k2")), ("one", ("k1", "k1"))):
        conn.execute("INSERT INTO models (model_id, sha256, opt_level) VALUES (?, ?, 'all')", (model, f"sha-{model}"))
        for device in ("cpu-1t", "cpu-mt"):
            conn.execute("INSERT INTO model_measurements (model_id, device) VALUES (?, ?)", (model, device))
            conn.execute("INSERT INTO jobs (job, device) VALUES (?, ?)", (f"model:sha-{model}", device))
            for i, k in enumerate(kernels):
                conn.execute("INSERT INTO node_spans (model_id, node_name, kernel_id, op_type, device) "
                             "VALUES (?, ?, ?, 'ReorderOutput', ?)", (model, f"R_{i}", k, device))
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        for table in ("model_measurements", "node_spans"):
            assert set(s.table(table).model_id) == {"one"}
        assert set(s.table("jobs").job) == {"model:sha-one"}
        assert set(s.table("models").model_id) == {"one", "two"}  # still known: the next collect measures it
