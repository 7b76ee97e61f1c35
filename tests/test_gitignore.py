"""What `make demo` (and the devset targets) write in a checkout is git-ignored, so `git status` stays clean."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import REPO

WRITTEN = ("data/hase.sqlite", "data/hase.sqlite-wal", "data/predictors/cpu-1t/manifest.json",
           "data/sampler/zoo_small.round1.toml", "reports/report.html", "model_zoo/zoo_small/resnet.onnx",
           "models/dev/models.tsv", "models/dev-dynamic-text/hf_bert_mini_dyn.onnx", "hase_profiles/x.json")


def test_everything_the_demo_writes_is_ignored():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "--no-index", *WRITTEN], cwd=REPO, capture_output=True, text=True,
                         check=False)  # exit 1 when a path is not ignored: the assertion below says which
    assert sorted(out.stdout.split()) == sorted(WRITTEN)
