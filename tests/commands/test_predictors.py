"""`hase predictors` lists what is installed and what each predictor is; `hase predict` names the predictor it used
and warns when this host differs; `hase train` never writes over the shipped predictors. All through `main([...])`."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import REPO, SHIPPED_DEVICES, exported_model

from hase import paths
from hase.cli import main
from hase.predict import identity
from hase.predict.bundle import load_bundle, save_bundle
from hase.predict.locate import SHIPPED, USER

SHIPPED_DIR = paths.SHIPPED_PREDICTORS / paths.DEFAULT_DEVICE


@pytest.fixture
def host_like_the_predictor(monkeypatch: pytest.MonkeyPatch) -> identity.HostInfo:
    """This host, described as exactly the machine the shipped predictor was trained on."""
    meta = load_bundle(SHIPPED_DIR, []).manifest.device_meta
    host = identity.HostInfo(meta.cpu_model, meta.ort_version, (meta.execution_provider,), "", 4)
    monkeypatch.setattr(identity, "host_info", lambda gpu=False: host)
    return host


@pytest.fixture
def another_host(monkeypatch: pytest.MonkeyPatch, host_like_the_predictor: identity.HostInfo) -> None:
    """A host with another CPU and ONNX Runtime version than the shipped predictor's."""
    other = dataclasses.replace(host_like_the_predictor, cpu_model="Other CPU 9000", ort_version="9.9.9")
    monkeypatch.setattr(identity, "host_info", lambda gpu=False: other)


def test_predictors_lists_the_shipped_one_with_its_figures(capsys, host_like_the_predictor):
    assert main(["predictors"]) == 0
    listing = capsys.readouterr().out
    # the default device's block (the shipped h100-cuda's differs from every CPU host: its GPU, its provider)
    out = next(b for b in listing.split("\n\n") if b.startswith(f"{paths.DEFAULT_DEVICE}  shipped"))
    manifest = load_bundle(SHIPPED_DIR, []).manifest
    held = manifest.target(manifest.default_target).held_out
    assert f"{paths.DEFAULT_DEVICE}  shipped: {SHIPPED_DIR}" in out
    assert f"{manifest.device_meta.execution_provider} on {manifest.device_meta.cpu_model}" in out
    meta = manifest.device_meta
    assert (f"ONNX Runtime {meta.ort_version}, {meta.intra_op_threads} intra-op / {meta.inter_op_threads} inter-op "
            f"thread(s), {meta.opt_level} optimization") in out
    assert f"trained   {manifest.created_at[:10]}" in out and f"default target {manifest.default_target}" in out
    assert f"±10 % {held.acc10 * 100:.0f} % of {held.n} models, RMSPE {held.rmspe:.1f} %" in out
    assert "this host matches" in out and "differs" not in out
    assert f"user: {paths.user_predictors_dir()}" in listing  # every root searched is named


def test_predictors_json_flags_a_host_that_differs(capsys, another_host):
    assert main(["predictors", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["device"], e["source"]) for e in listed] == [(d, SHIPPED) for d in SHIPPED_DEVICES]
    (entry,) = [e for e in listed if e["device"] == paths.DEFAULT_DEVICE]
    assert entry["error"] is None
    assert entry["path"] == str(SHIPPED_DIR) and entry["shadowed"] is False and 0 < entry["acc10"] <= 1
    for key in ("cpu_model", "ort_version", "execution_provider", "intra_op_threads", "inter_op_threads",
                "opt_level", "created_at", "default_target", "rmspe", "n_held_out"):
        assert key in entry, key
    assert entry["host_mismatches"][0].startswith("CPU 'Other CPU 9000', the predictor's")
    assert entry["host_mismatches"][1].startswith("ONNX Runtime 9.9.9, the predictor's")
    assert main(["predictors"]) == 0
    assert "this host differs: CPU 'Other CPU 9000'" in capsys.readouterr().out


def test_a_user_trained_predictor_shadows_the_shipped_one(capsys, tmp_path, monkeypatch, host_like_the_predictor):
    user = tmp_path / "user"
    monkeypatch.setenv(paths.PREDICTORS_ENV, str(user))
    shipped = load_bundle(SHIPPED_DIR)
    save_bundle(user / paths.DEFAULT_DEVICE, shipped.manifest, shipped.predictors)
    assert main(["predictors", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["device"], e["source"], e["shadowed"]) for e in listed] == [
        (paths.DEFAULT_DEVICE, USER, False), *[(d, SHIPPED, d == paths.DEFAULT_DEVICE) for d in SHIPPED_DEVICES]]
    assert main(["predictors"]) == 0
    assert "hidden by the user-trained predictor above" in capsys.readouterr().out
    model = str(exported_model("hf_bert_tiny_s64_b2"))
    assert main(["predict", model, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predictor"]["path"] == str(user / paths.DEFAULT_DEVICE)
    assert main(["predict", model, "--json", "--predictors", str(paths.SHIPPED_PREDICTORS)]) == 0
    assert json.loads(capsys.readouterr().out)["predictor"]["source"] == "--predictors"


def test_an_unreadable_predictor_is_listed_with_its_reason_and_fails(capsys, tmp_path):
    root = tmp_path / "p"
    shipped = load_bundle(SHIPPED_DIR)
    d = save_bundle(root / "cpu-1t", shipped.manifest, shipped.predictors)
    (d / f"{shipped.manifest.default_target}.json").write_text("{}")  # damage a file the manifest lists
    assert main(["predictors", "--predictors", str(root)]) == 2
    out = capsys.readouterr().out
    assert "cpu-1t  --predictors:" in out and "cannot be used" in out and "sha256" in out
    assert main(["predictors", "--predictors", str(tmp_path / "empty")]) == 2
    assert "no predictors found" in capsys.readouterr().err


def test_predict_names_its_predictor_in_text_and_json(capsys, host_like_the_predictor):
    model = str(exported_model("hf_bert_tiny_s64_b2"))
    assert main(["predict", model, "--top", "2"]) == 0
    captured = capsys.readouterr()
    first = captured.out.splitlines()[0]
    assert first.startswith(f"predictor {paths.DEFAULT_DEVICE}: CPUExecutionProvider on ")
    opt_level = load_bundle(SHIPPED_DIR, []).manifest.device_meta.opt_level
    assert f"{opt_level} optimization; trained " in first and f"shipped: {SHIPPED_DIR}" in first
    assert "warning" not in captured.err
    assert main(["predict", model, "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)["predictor"]
    assert pred["source"] == SHIPPED and pred["path"] == str(SHIPPED_DIR) and pred["host_mismatches"] == []
    assert pred["device"] == paths.DEFAULT_DEVICE and pred["target"] == pred["default_target"]


def test_predict_warns_when_this_host_differs(capsys, another_host):
    model = str(exported_model("hf_bert_tiny_s64_b2"))
    assert main(["predict", model, "--json"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["predictor"]["host_mismatches"]) == 2
    warning = captured.err.strip()
    assert warning.startswith("warning: this host differs from the machine predictor 'cpu-1t' was trained on: "
                              "CPU 'Other CPU 9000'")
    assert "ONNX Runtime 9.9.9" in warning and "\n" not in warning
    assert main(["predict", model, str(Path(model).parent / "hf_gpt2_tiny_s64_b1.onnx")]) == 0  # batch mode too
    captured = capsys.readouterr()
    assert captured.out.startswith("predictor cpu-1t:") and "warning: this host differs" in captured.err


def test_training_refuses_the_shipped_directory_before_it_starts(capsys, tmp_path):
    store = tmp_path / "missing.sqlite"  # never opened: the refusal comes first
    config = str(REPO / paths.PREDICTOR_CONFIG)
    before = sorted(p.name for p in SHIPPED_DIR.iterdir())
    for out in (paths.SHIPPED_PREDICTORS, SHIPPED_DIR):
        assert main(["train", "--store", str(store), "--config", config, "--out", str(out)]) == 2
        assert "inside the predictors shipped with Hase" in capsys.readouterr().err
    assert sorted(p.name for p in SHIPPED_DIR.iterdir()) == before and not store.exists()


def test_training_defaults_to_the_user_directory():
    from hase.cli import build_parser

    parser = build_parser("train")
    assert parser.parse_args(["train"]).out is None  # resolved when the command runs: paths.user_predictors_dir()
    train = next(a for a in parser._actions if a.dest == "command").choices["train"]
    help_text = next(a.help for a in train._actions if "--out" in a.option_strings)
    assert paths.USER_PREDICTORS_HELP in help_text and "never the predictors shipped" in help_text


def test_the_shipped_cpu_mt_says_it_is_the_one_thread_forests_moved(capsys):
    """The shipped `cpu-mt` is a threaded device: its held-out figures are its one-thread source's, and it says so."""
    assert main(["predictors"]) == 0
    block = capsys.readouterr().out.split("\ncpu-mt ")[1].split("\n\n")[0]
    assert "of cpu-1t at one thread" in block and "threads   cpu-1t's one-thread forests moved" in block
    assert main(["predictors", "--json"]) == 0
    rows = {r["device"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["cpu-mt"]["moved_from"] == "cpu-1t" and rows["cpu-1t"]["moved_from"] == ""
