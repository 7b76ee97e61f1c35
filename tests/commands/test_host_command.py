"""`hase host show|check|survey`, `hase adapt` (measuring, or from a survey), and what `hase predict` /
`hase predictors` say about a predictor's machine: one warning line naming what differs when its stored fingerprint
is not this host's, one when its store was mostly busy, and "no fingerprint recorded" for the shipped ones. All
through `main([...])` on the tiny store's predictor."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import onnx
import pytest
from conftest import conv_bn_relu_model
from tiny_store import adapt_tiny, build_tiny_store

from hase.cli import main
from hase.predict.manifest import DIGEST, MANIFEST, manifest_digest
from hase.runtime.host import host_fingerprint


@pytest.fixture(scope="module")
def adapted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny predictor adapted to this host (its folder)."""
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_store(root)
    return adapt_tiny(root)


def _model(adapted: Path) -> Path:
    """A tiny model of the store the predictor was trained on."""
    return adapted.parent.parent / "mlp0.onnx"


def edited_copy(src: Path, dest_root: Path, edit: Any) -> Path:
    """A copy of a predictor folder whose manifest `edit` changed (its digest recomputed, so it still loads)."""
    dest = dest_root / src.name
    shutil.copytree(src, dest)
    raw = json.loads((dest / MANIFEST).read_text())
    edit(raw)
    raw[DIGEST] = manifest_digest(raw)
    (dest / MANIFEST).write_text(json.dumps(raw))
    return dest


def test_a_changed_fingerprint_is_warned_about_in_one_line_naming_it(adapted, tmp_path, capsys):
    fp = host_fingerprint()

    def other_machine(raw: dict[str, Any]) -> None:
        raw["host"]["l2_kib"] = fp.l2_kib * 2
        raw["host"]["cpu_model_id"] = fp.cpu_model_id + 1

    edited_copy(adapted, tmp_path, other_machine)
    assert main(["predict", str(_model(adapted)), "--device", "cpu-1t", "--predictors", str(tmp_path)]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    warnings = [line for line in err if line.startswith("warning: this host differs")]
    assert len(warnings) == 1, err
    assert f"L2 {fp.l2_kib} KiB, the predictor's {fp.l2_kib * 2} KiB" in warnings[0]
    assert f"model {fp.cpu_model_id + 1}" in warnings[0] and "hase adapt --device cpu-1t" in warnings[0]


def test_this_hosts_own_fingerprint_brings_no_warning(adapted, capsys):
    assert main(["predict", str(_model(adapted)), "--device", "cpu-1t", "--predictors", str(adapted.parent)]) == 0
    captured = capsys.readouterr()
    # no fingerprint warning; a loaded host may add the busy-store one (the tiny store is measured in the tests)
    assert "this host differs" not in captured.err and f"(host {host_fingerprint().digest})" in captured.out


def test_a_predictor_of_a_mostly_busy_store_says_so(adapted, tmp_path, capsys):
    d = edited_copy(adapted, tmp_path, lambda raw: raw["noise"].update(busy_share=0.8))
    assert main(["predictors", "--predictors", str(d.parent)]) == 0
    assert "mostly busy store: 80% of its jobs" in capsys.readouterr().out
    assert main(["predict", str(_model(adapted)), "--device", "cpu-1t", "--predictors", str(d.parent)]) == 0
    busy = [line for line in capsys.readouterr().err.splitlines() if "mostly busy" in line]
    assert len(busy) == 1


def test_shipped_predictors_record_their_machine(capsys):
    assert main(["predictors"]) in (0, 2)
    assert "no fingerprint recorded" not in capsys.readouterr().out


def test_a_predictor_without_fingerprint_or_signature_says_so(tmp_path, capsys):
    """Predictors trained before fingerprints existed still load; they say so, and `host check` names the fix."""
    shipped = Path(__file__).resolve().parents[2] / "hase" / "predictors" / "cpu-1t"
    old = edited_copy(shipped, tmp_path, lambda raw: (raw.pop("host", None), raw.pop("signature", None)))
    assert main(["predictors", "--predictors", str(old.parent)]) in (0, 2)
    assert "no fingerprint recorded" in capsys.readouterr().out
    assert main(["host", "check", "--device", "cpu-1t", "--predictors", str(old.parent)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no speed signature" in err[0] and "hase adapt --device cpu-1t" in err[0]


def test_host_check_compares_per_family_with_the_predictors_signature(adapted, capsys):
    assert main(["host", "check", "--device", "cpu-1t", "--predictors", str(adapted.parent), "--budget-s", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["predictor"] == str(adapted) and out["fingerprint_differences"] == []
    assert {f["family"] for f in out["families"]} >= {"conv", "gemm", "attention", "elementwise", "reduce", "pool"}
    for f in out["families"]:
        assert f["time_ratio"] > 0 and f["noise"] >= 0 and f["verdict"] in ("same", "different", "too noisy")
    assert main(["host", "check", "--device", "cpu-1t", "--predictors", str(adapted.parent), "--budget-s",
                 "2"]) == 0
    assert "verdict:" in capsys.readouterr().out
    assert main(["host", "check", "--budget-s", "99"]) == 2


def test_host_show_and_adapt_errors(capsys, tmp_path):
    assert main(["host", "show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["digest"] == host_fingerprint().digest
    assert main(["adapt", "--device", "cpu-1t", "--budget-s", "5", "--models", str(tmp_path),
                 "--out", str(tmp_path / "out")]) == 2
    assert "too short" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "match"), [
    (["adapt", "--device", "nope"], "no trained predictor for device 'nope'"),
    (["adapt", "--models", "/nonexistent/dir"], "models directory not found: /nonexistent/dir"),
    (["adapt", "--out", "hase/predictors"], "inside the predictors shipped with Hase"),
    (["host", "check", "--device", "nope"], "no trained predictor for device 'nope'"),
    (["host", "survey", "--transfer-s", "1"], "too short to measure a transfer set"),
    (["host", "survey", "--transfer-passes", "0"], "--transfer-passes must be from 1 to 5"),
    (["host", "survey", "--out", "hase"], "is a directory"),
    (["adapt", "--survey", "/nonexistent/host.survey.json.gz"], "does not exist"),
    (["adapt", "--survey", "README.md"], "not a gzip'd JSON survey"),
    (["adapt", "--survey", "README.md", "--models", "tests"], "--survey and --models both"),
])
def test_bad_adapt_and_host_check_input_is_one_line_and_writes_nothing(argv, match, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # `hase/predictors` names the shipped folder from the root
    monkeypatch.setenv("HASE_PREDICTORS_DIR", str(tmp_path / "user"))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "user").exists()


@pytest.mark.slow
def test_a_host_survey_is_written_and_adapted_from_without_measuring(tiny_root, tmp_path, capsys):
    transfer, real = tmp_path / "transfer", tmp_path / "real"
    transfer.mkdir()
    real.mkdir()
    for p in sorted(tiny_root.glob("*.onnx"))[:4]:
        shutil.copy2(p, transfer / p.name)
    onnx.save(conv_bn_relu_model(c=12, hw=20), real / "real.onnx")
    out = tmp_path / "host.survey.json.gz"
    predictors = str(tiny_root / "predictors")
    assert main(["host", "survey", "--device", "cpu-1t", "--predictors", predictors, "--models", str(transfer),
                 "--real", str(real), "--transfer-s", "10", "--out", str(out)]) == 0
    digest = host_fingerprint().digest
    text = capsys.readouterr().out
    assert f"survey of host {digest} written to {out}" in text and "1 real models" in text
    assert main(["adapt", "--device", "cpu-1t", "--predictors", predictors, "--survey", str(out), "--out",
                 str(tmp_path / "adapted"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["name"] == f"cpu-1t@{digest}" and result["n_models"] >= 1
    assert (tmp_path / "adapted" / f"cpu-1t@{digest}" / MANIFEST).is_file()
