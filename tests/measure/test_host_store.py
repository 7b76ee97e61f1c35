"""The store keeps each measuring machine's fingerprint once (`hosts`), its digest on every row, and each device's
speed signature per host; a store of schema version 4 still opens read-only and migrates when written."""
from __future__ import annotations

import sqlite3

from hase.measure import schema
from hase.measure.store import Store
from hase.runtime import sessions
from hase.runtime.host import host_fingerprint
from hase.runtime.types import HOST_FP, EPConfig


def test_fingerprints_and_signatures_round_trip(tmp_path):
    fp = host_fingerprint()
    with Store(tmp_path / "s.sqlite") as store:
        assert store.register_host(fp) == fp.digest and store.register_host(fp) == fp.digest  # kept once
        store.record_signature("cpu-1t", fp.digest, {"probes": [], "n": 1})
        store.record_signature("cpu-1t", fp.digest, {"probes": [], "n": 2})  # replaces the first
        assert store.hosts() == {fp.digest: fp}
        assert store.signature("cpu-1t", fp.digest) == {"probes": [], "n": 2}
        assert store.signature("cpu-1t") == {"probes": [], "n": 2} and store.signature("cpu-mt") is None
        assert store.counts()["hosts"] == 1
    assert sessions.row_metadata(EPConfig(name="cpu-1t"))[HOST_FP] == fp.digest


def test_a_version_4_store_reads_without_hosts_and_migrates_when_written(tmp_path):
    path = tmp_path / "old.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE hosts")
    conn.execute("DROP TABLE signatures")
    for table, added in schema._ADDED[5].items():
        for col in added:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    with Store(path, readonly=True) as store:
        assert store.hosts() == {} and store.signature("cpu-1t") is None
        assert HOST_FP not in store.table("model_measurements").columns
    with Store(path) as store:
        assert store.conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        assert HOST_FP in store.table("model_measurements").columns and store.hosts() == {}
