"""Later timing passes (`hase.measure.retime`): the models users run are timed again at the end of a collect and keep
the minimum, the first pass's latency kept beside it; sampled blocks, changed files and `passes = 1` are left alone."""
from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import onnx
import pytest
from collect_cases import FAST
from conftest import conv_bn_relu_model, exported_model

from hase.measure import collect as coll
from hase.measure.retime import retime_models
from hase.measure.store import Store
from hase.predict import dataset


def _sources(tmp_path: Path) -> list[coll.ModelSource]:
    onnx.save(conv_bn_relu_model(c=8), tmp_path / "conv8.onnx")
    onnx.save(conv_bn_relu_model(c=4), tmp_path / "block.onnx")
    bert = tmp_path / "bert.onnx"
    shutil.copy(exported_model("hf_bert_tiny_s64_b2"), bert)
    return [coll.ModelSource("conv8", "conv", tmp_path / "conv8.onnx"), coll.ModelSource("bert", "bert", bert),
            coll.ModelSource("block", "sampled-conv", tmp_path / "block.onnx")]


def _collect(tmp_path: Path, store: Path, extra: str = "") -> coll.CollectReport:
    (tmp_path / "devices.toml").write_text(FAST + extra)
    with Store(store) as s:
        return coll.collect(_sources(tmp_path), coll.load_collect_config(tmp_path / "devices.toml"), s,
                            spans_only=True)


def _passes(store: Path) -> dict[str, tuple]:
    with sqlite3.connect(store) as con:
        return {r[0]: r[1:] for r in con.execute(
            "SELECT model_id, latency_ms, first_latency_ms, n_passes, pass_spread FROM model_measurements")}


@pytest.mark.slow
def test_models_users_run_get_a_second_pass_that_keeps_the_minimum(tmp_path):
    store = tmp_path / "s.sqlite"
    report = _collect(tmp_path, store)
    rows = _passes(store)
    assert report.retimed == 2 and set(rows) == {"conv8", "bert", "block"}
    for name in ("conv8", "bert"):
        latency, first, n, spread = rows[name]
        assert n == 2 and 0 < latency <= first and spread >= 0
        assert spread >= first / latency - 1 - 1e-9  # the first pass is one of the two
    assert rows["block"][1:] == (None, None, None)  # a sampled block is no calibration point: one pass
    m = dataset.load_device_data(store).models.set_index(dataset.MODEL_ID)[dataset.MEASURED_MS]
    quick = dataset.load_device_data(store, latency="quickest").models.set_index(dataset.MODEL_ID)[dataset.MEASURED_MS]
    assert m["bert"] == rows["bert"][0] and (quick <= m).all()  # the quickest run is no slower than a block median
    assert _collect(tmp_path, store).retimed == 0  # done: a rerun measures nothing again


@pytest.mark.slow
def test_one_pass_changed_files_and_a_third_pass(tmp_path):
    store = tmp_path / "s.sqlite"
    assert _collect(tmp_path, store, "[robust]\npasses = 1\n").retimed == 0
    assert all(r[1:] == (None, None, None) for r in _passes(store).values())
    onnx.save(conv_bn_relu_model(c=16), tmp_path / "other.onnx")
    shutil.copy(tmp_path / "other.onnx", tmp_path / "conv8.onnx")  # changed since measured: left as it was
    (tmp_path / "devices.toml").write_text(FAST + "[robust]\npasses = 3\n")
    cfg = coll.load_collect_config(tmp_path / "devices.toml")
    with Store(store) as s:  # the sources as the store recorded them: conv8's file now differs
        run = coll.DeviceRun(s, cfg.devices[0], cfg.settings, coll.CollectReport())
        assert retime_models(run) == 1 and retime_models(run) == 1 and retime_models(run) == 0
    rows = _passes(store)
    assert rows["bert"][2] == 3 and rows["conv8"][1:] == (None, None, None)


def test_record_pass_keeps_the_minimum_the_first_and_the_spread(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        s.insert("model_measurements", [{"model_id": "m", "device": "d", "latency_ms": 10.0, "min_ms": 9.0}])
        assert s.record_pass("m", "d", 12.0, 11.0) and s.record_pass("m", "d", 8.0, 7.5)
        assert not s.record_pass("other", "d", 1.0, 1.0)
        row = s.table("model_measurements").iloc[0]
    assert (row.latency_ms, row.first_latency_ms, row.n_passes, row.min_ms) == (8.0, 10.0, 3, 7.5)
    assert row.pass_spread == pytest.approx(12.0 / 8.0 - 1)
