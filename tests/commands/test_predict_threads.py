"""`hase predict MODEL --threads 1,2,4`: the one-thread predictor's kernels moved to each thread count by a shipped
thread model, through `main([...])` on a real exported model."""
from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import exported_model

from hase.cli import main
from hase.errors import HaseError
from hase.predict.thread_estimate import SHIPPED_THREAD_MODELS, pick_thread_model
from hase.runtime.host import host_fingerprint

MODEL = "hf_bert_tiny_s64_b2"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_one_thread_is_the_plain_prediction_and_more_threads_differ(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(exported_model(MODEL))
    plain = _json(capsys, ["predict", path, "--json"])
    out = _json(capsys, ["predict", path, "--threads", "1,2,16", "--json"])
    assert isinstance(plain, dict) and isinstance(out, dict)
    rows = {r["threads"]: r for r in out["by_threads"]}
    assert set(rows) == {1, 2, 16} and out["n_kernels"] == plain["n_kernels"]
    assert rows[1]["latency_ms"] == pytest.approx(plain["latency_ms"], rel=1e-9)
    assert all(r["latency_ms"] > 0 for r in rows.values()) and rows[2]["sum_ms"] != rows[1]["sum_ms"]
    assert "thread model" in out["thread_model"]


def test_table_names_the_thread_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", str(exported_model(MODEL)), "--threads", "1,4"]) == 0
    text = capsys.readouterr().out
    assert "thread model" in text and "4 thr" in text and MODEL in text


@pytest.mark.parametrize(("device", "match"), [("cpu-mt", "one-thread predictor"), ("h100-cuda", "CPU execution")])
def test_a_multi_thread_or_gpu_predictor_is_refused(device: str, match: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", str(exported_model(MODEL)), "--device", device, "--threads", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]


def test_shipped_models_are_picked_by_host_then_core_count() -> None:
    files = sorted(SHIPPED_THREAD_MODELS.glob("*.npz"))
    assert len(files) >= 2, "the thread models of the measured hosts ship as package data"
    here = host_fingerprint()
    stranger = dataclasses.replace(here, cpu_model="Some Other CPU", cores=15)
    model, line = pick_thread_model(stranger)
    assert int(model.meta["cores"]) == 16 and "nearest core count" not in line and "no thread model" in line
    small = dataclasses.replace(stranger, cores=2)
    assert int(pick_thread_model(small)[0].meta["cores"]) == 2
    for f in files:
        own = dataclasses.replace(here, cores=here.cores)
        if f.stem == own.digest:
            assert "of this host" in pick_thread_model(own)[1]


def test_no_shipped_model_is_an_error(tmp_path) -> None:
    with pytest.raises(HaseError, match="--thread-model"):
        pick_thread_model(host_fingerprint(), shipped=tmp_path)


def test_host_threads_fits_this_hosts_model_where_predict_finds_it(tmp_path, capsys, monkeypatch) -> None:
    """`hase host threads` on one real model: the file lands in the user directory, `hase predict --threads`
    then says it uses this host's own model, and a count past the fitted ones is called extrapolated."""
    monkeypatch.setenv("HASE_PREDICTORS_DIR", str(tmp_path / "user"))
    models = tmp_path / "models"
    models.mkdir()
    (models / "bert.onnx").write_bytes(exported_model(MODEL).read_bytes())
    out = _json(capsys, ["host", "threads", "--models", str(models), "--threads", "2", "--budget-s", "10",
                         "--json"])
    assert isinstance(out, dict) and out["models"] == 1 and out["kernels"] > 30 and out["threads"] == [1, 2]
    # BERT-tiny's spans at 2 threads over its unprofiled runs, less the same at 1 (its sign is the host's business)
    assert -50.0 < out["excess_us"] < 50.0
    written = tmp_path / "user" / "threads" / f"{host_fingerprint().digest}.npz"
    assert out["out"] == str(written) and written.is_file()
    assert main(["predict", str(models / "bert.onnx"), "--threads", "1,2,8"]) == 0
    text = capsys.readouterr().out
    assert "fitted here" in text and "8 extrapolated" in text


@pytest.mark.parametrize(("argv", "match"), [
    (["--threads", "1"], "2 or more"),
    (["--budget-s", "5"], "too short"),
    (["--passes", "0"], "profiles nothing"),
])
def test_host_threads_bad_input_is_one_line(argv, match, tmp_path, capsys) -> None:
    assert main(["host", "threads", "--out", str(tmp_path / "t.npz"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0] and not (tmp_path / "t.npz").exists()


def test_host_threads_writes_its_spans_when_asked(tmp_path, capsys) -> None:
    """--spans-out: every measured kernel at both counts with its signature, readable back as the sweep table."""
    import pandas as pd

    from hase.kernels.types import KernelSpec

    models = tmp_path / "models"
    models.mkdir()
    (models / "gpt2.onnx").write_bytes(exported_model("hf_gpt2_tiny_s64_b1").read_bytes())
    spans_file = tmp_path / "spans.csv.gz"
    assert main(["host", "threads", "--models", str(models), "--threads", "2", "--budget-s", "10", "--out",
                 str(tmp_path / "t.npz"), "--spans-out", str(spans_file), "--passes", "2"]) == 0
    capsys.readouterr()
    spans = pd.read_csv(spans_file)
    assert set(spans["threads"]) == {1, 2} and set(spans["pass"]) == {0, 1} and (spans["span_ms"] > 0).all()
    signed = spans[spans["signature"].notna()]
    assert len(signed) > 0.9 * len(spans)
    assert KernelSpec.from_json(signed["signature"].iloc[0]).op_type == signed["op_type"].iloc[0]
