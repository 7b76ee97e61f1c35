"""The predict stage's import graph: training never imports evaluation; `hase predict` never loads the trainers."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


def loaded_after(module: str, watch: tuple[str, ...]) -> list[str]:
    """Which of `watch` a fresh interpreter has loaded after importing `module`."""
    code = f"import sys, {module}; print(__import__('json').dumps([m for m in {list(watch)!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


@pytest.mark.parametrize("module", ["hase.predict.train", "hase.predict.crossval", "hase.predict.calibration"])
def test_training_never_imports_evaluation(module):
    assert loaded_after(module, ("hase.evaluate.evaluation", "hase.evaluate.report", "hase.evaluate.ratios")) == []


def test_predicting_a_model_loads_neither_scikit_learn_nor_matplotlib():
    assert loaded_after("hase.predict.estimate", ("sklearn", "matplotlib", "hase.predict.train")) == []
