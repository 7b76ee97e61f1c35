"""The report's first lines carry the store's noise: busy share, noisy models, spread, and say when it was mostly
busy."""
from __future__ import annotations

from pathlib import Path

import pytest
from tiny_store import build_tiny_store, train_tiny

from hase.evaluate.evaluation import evaluate_predictor
from hase.evaluate.report import headline_lines, noise_lines

QUIET = {"jobs": 40, "busy_jobs": 2, "busy_share": 0.05, "models": 9, "noisy_models": 1, "noisy_share": 0.11,
         "model_spread_median": 0.03, "model_spread_p90": 0.12}


def test_a_mostly_busy_store_is_said_first_and_loudly():
    quiet = noise_lines(QUIET)
    assert quiet == ["- store noise: 2 of 40 jobs (5%) measured on a busy host, 1 of 9 models noisy; block spread "
                     "of the model measurements median 3%, p90 12%"]
    busy = noise_lines({**QUIET, "busy_jobs": 30, "busy_share": 0.75})
    assert len(busy) == 2 and "mostly busy store: 75%" in busy[0] and busy[1].startswith("- store noise: 30 of 40")
    assert noise_lines({}) == []


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_store(root)
    train_tiny(root)
    return root


def test_the_evaluation_of_a_store_opens_with_its_noise(root):
    ev = evaluate_predictor(root / "tiny.sqlite", root / "predictors" / "cpu-1t")
    assert ev.noise["models"] == 9 and ev.noise["jobs"] > 9
    assert headline_lines(ev)[0].startswith("- store noise:") or "mostly busy" in headline_lines(ev)[0]
