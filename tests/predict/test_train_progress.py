"""`hase.predict.train.train` reports each step through its progress callback and prints nothing; `hase train`
shows the steps as a spinner on a terminal and as one log line each elsewhere, so a log file sees them too."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tiny_store import TINY_CONFIG, build_tiny_store

from hase.cli import main
from hase.errors import HaseError
from hase.predict.calibration import size_balance
from hase.predict.crossval import calibration_weights, real_families
from hase.predict.dataset import load_device_data
from hase.predict.train import _choice_set, load_train_config, train

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO train cpu-1t: (.*) \[\d+ s\]$")
STEPS = ["span: holding out convnet (fold 1/3)", "span: holding out embed (fold 2/3)",
         "span: holding out mlp (fold 3/3)", "span: final forests on all families",
         "FLOPs baselines (leave-family-out)"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.getbasetemp() / "hase_tiny"  # shared with test_evaluate, built once
    root.mkdir(exist_ok=True)
    return build_tiny_store(root)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(TINY_CONFIG.replace('targets = ["warm", "span"]', 'targets = ["span"]'))
    return path


def test_train_reports_every_step_and_prints_nothing(store, config, tmp_path, capfd):
    steps: list[str] = []
    train(store, tmp_path / "p", load_train_config(config), "cpu-1t", progress=steps.append)
    assert steps == [*STEPS, f"saving to {tmp_path / 'p' / 'cpu-1t'}"]
    assert capfd.readouterr() == ("", "")


def test_cli_train_without_a_terminal_logs_each_step(store, config, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(tmp_path / "p")]) == 0
    lines = capsys.readouterr().err.splitlines()
    matches = [LOG_LINE.match(line) for line in lines]
    assert all(matches), lines
    assert [m.group(1) for m in matches if m] == [*STEPS, f"saving to {tmp_path / 'p' / 'cpu-1t'}", "done"]


def test_cli_train_on_a_terminal_shows_a_spinner_not_log_lines(store, config, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    assert main(["train", "--store", str(store), "--config", str(config), "--out", str(tmp_path / "p")]) == 0
    err = capsys.readouterr().err
    assert "training cpu-1t: span: holding out" in err and "0:00:0" in err  # the step and its running clock
    assert not any(LOG_LINE.match(line) for line in err.splitlines())


def test_the_default_target_is_chosen_on_real_families_when_the_store_has_enough(store, config):
    """`choose_on`: the (target, calibration) choice reads the held-out rows of families no zoo generator wrote (the
    tiny store's three), alone ("real") or weighed equally with the generated ones ("balanced"), once the store has
    `min_real_models` real models; below that, every held-out row ("all")."""
    data = load_device_data(store, "cpu-1t")
    assert sorted(real_families(data)) == ["convnet", "embed", "mlp"]
    held = pd.DataFrame({"model_id": list("abcdef"), "family": ["convnet", "mlp", "resnet", "resnet", "mlp", "vgg"],
                         "measured_ms": [1.0] * 6, "pred_ms": [1.1, 1.1, 2.0, 1.5, 1.1, 1.5], "split": ["held_out"] * 6,
                         "target": ["warm"] * 3 + ["span"] * 3, "calibration": ["raw"] * 6})
    chosen, scores = _choice_set(data, load_train_config(config, choose_on="real", min_real_models=9), held)
    assert chosen == "real" and scores["rmspe"].round(6).tolist() == [10.0, 10.0]  # the zoo's resnet and vgg left out
    chosen, scores = _choice_set(data, load_train_config(config, choose_on="balanced", min_real_models=9), held)
    assert chosen == "balanced" and scores[["target", "rmspe"]].round(6).values.tolist() == [["span", 30.0],
                                                                                          ["warm", 55.0]]
    chosen, scores = _choice_set(data, load_train_config(config, choose_on="balanced", min_real_models=10), held)
    assert chosen == "all" and scores["target"].tolist() == ["span", "warm"]  # 9 real models: too few
    with pytest.raises(HaseError, match="choose_on must be one of"):
        load_train_config(config, choose_on="zoo")


def test_the_choice_takes_only_the_configured_calibration_forms(store, config, tmp_path):
    """`calibration_forms`: every candidate is scored and reported, the chosen one is of a listed form."""
    default = load_train_config(config)
    assert default.calibration_forms == ("raw", "scale", "per_kernel")  # "size" scored, not chosen
    only_size = load_train_config(config, calibration_forms=["size"])
    result = train(store, tmp_path / "p", only_size, "cpu-1t")
    cal = result.manifest.targets[result.default_target].calibration.calibration
    assert cal.form == "size" and cal.delta != 0 and cal.sum_lo_ms < cal.sum_hi_ms
    scored = {c["calibration"] for c in result.manifest.to_dict()["targets"]["span"]["calibration_candidates"]}
    assert {"per_kernel/relative", "size/relative", "raw"} <= scored
    for bad in (["cubic"], [], "per_kernel"):
        with pytest.raises(HaseError, match="calibration_forms must be a non-empty list"):
            load_train_config(config, calibration_forms=bad)


def test_a_size_balanced_calibration_is_fitted_and_chosen_with_every_size_alike(store, config, tmp_path):
    """`calibration_balance = "size"`: the calibration's fit weights are the trust weights times
    calibration.size_balance of the measured latencies, and the choice reads RMSPE_BY_SIZE."""
    data = load_device_data(store, "cpu-1t")
    cfg = load_train_config(config, calibration_balance="size")
    ids = list(data.models["model_id"][:6])
    trust_only = calibration_weights(data, cfg.busy_policy(), ids)
    balanced = calibration_weights(data, cfg.busy_policy(), ids, "size")
    measured = data.models.set_index("model_id").loc[ids, "measured_ms"].to_numpy()
    assert np.allclose(balanced.to_numpy(), trust_only.to_numpy() * size_balance(measured))
    held = pd.DataFrame({"model_id": list("abcd") * 2, "family": ["convnet", "mlp", "embed", "mlp"] * 2,
                         "measured_ms": [0.1, 0.11, 0.12, 100.0] * 2, "pred_ms": [0.1, 0.11, 0.12, 120.0,
                                                                                 0.115, 0.1265, 0.138, 100.0],
                         "split": ["held_out"] * 8, "target": ["span"] * 8,
                         "calibration": ["raw"] * 4 + ["scale/ols"] * 4})
    _, plain = _choice_set(data, load_train_config(config, choose_on="all"), held)
    _, by_size = _choice_set(data, load_train_config(config, choose_on="all", calibration_balance="size"), held)
    assert plain["calibration"].iloc[0] == "raw"  # three small models exact, the large one 20 % off: 10 % vs 13 %
    assert by_size["calibration"].iloc[0] == "scale/ols"  # the large one exact weighs as much as the three
    result = train(store, tmp_path / "p", cfg, "cpu-1t")
    assert result.manifest.config["calibration_balance"] == "size"
    fit = pd.DataFrame(result.manifest.targets["span"].calibration.fit_data)
    trained_on = load_device_data(store, "cpu-1t", cfg.model_latency)  # the latencies training balanced by size
    assert np.allclose(fit["weight"], calibration_weights(trained_on, cfg.calibration_policy(), list(fit["model_id"]),
                                                          "size"), atol=1e-6)
    with pytest.raises(HaseError, match="calibration_balance must be one of"):
        load_train_config(config, calibration_balance="latency")
    with pytest.raises(HaseError, match="thread_model"):
        load_train_config(config, thread_model="yes")


def test_training_calibrates_on_the_quickest_run_unless_told_the_robust_latency(store, config, tmp_path):
    """`model_latency`: "quickest" (the default) calibrates on each model's quickest run (`min_ms`), "robust" on the
    minimum of its block medians; anything else is a one-line error."""
    quick = load_device_data(store, "cpu-1t", "quickest").models.set_index("model_id")["measured_ms"]
    robust = load_device_data(store, "cpu-1t").models.set_index("model_id")["measured_ms"]
    assert (quick <= robust).all() and (quick < robust).any()
    assert load_train_config(config).model_latency == "quickest"
    result = train(store, tmp_path / "p", load_train_config(config, model_latency="robust"), "cpu-1t")
    fit = pd.DataFrame(result.manifest.targets["span"].calibration.fit_data).set_index("model_id")
    assert np.allclose(fit["measured_ms"], robust.reindex(fit.index), rtol=1e-5)
    assert result.manifest.config["model_latency"] == "robust"
    with pytest.raises(HaseError, match="model_latency must be one of"):
        load_train_config(config, model_latency="median")
    with pytest.raises(HaseError, match="unknown model latency"):
        load_device_data(store, "cpu-1t", "median")
