"""hase.measure.store: schema, transactions, exactly-once inserts."""
from __future__ import annotations

import sqlite3

import pytest

from hase.errors import HaseError
from hase.measure.store import SCHEMA, Store


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


def test_missing_or_foreign_store(tmp_path):
    with pytest.raises(HaseError, match="run `make collect` first"):
        Store(tmp_path / "none.sqlite", readonly=True)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"garbage" * 1000)
    with pytest.raises(HaseError, match="not a Hase store"):
        Store(bad)
