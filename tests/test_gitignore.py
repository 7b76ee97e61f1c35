"""What `make demo` (and the devset targets) write in a checkout is git-ignored, so `git status` stays clean."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from conftest import REPO

WRITTEN = ("data/hase.sqlite", "data/hase.sqlite-wal", "data/predictors/cpu-1t/manifest.json", "data/demo.sqlite",
           "data/predictors-demo/cpu-1t/manifest.json", "data/predictors-adapted/cpu-1t@0123456789ab/manifest.json",
           "reports/demo/report.html", "model_zoo/zoo_demo/resnet.onnx",
           "data/sampler/zoo_small.round1.toml", "reports/report.html", "model_zoo/zoo_small/resnet.onnx",
           "models/dev/models.tsv", "models/dev-dynamic-text/hf_bert_mini_dyn.onnx", "hase_profiles/x.json")


# an output path in the docs' commands: after --trace/--csv/--out, a shell redirect, or a write_* call's string
# (placeholders such as `--csv EVENTS.csv` are upper case)
OUTPUT = re.compile(r"""(?:--(?:trace|csv|out) |> |write_\w+\([^"]*")([a-z][\w./-]*\.(?:json|csv|md|html))""")


def _ignored(paths: list[str]) -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True, text=True,
                         check=False)  # exit 1 when a path is not ignored: the assertions say which
    return sorted(out.stdout.split())


def test_everything_the_demo_writes_is_ignored():
    assert _ignored(list(WRITTEN)) == sorted(WRITTEN)


def test_the_pipeline_docs_commands_write_only_ignored_files():
    """Run from a checkout as shown, docs/pipeline.md's commands once left trace.json and events.csv to commit."""
    written = sorted(set(OUTPUT.findall((REPO / "docs" / "pipeline.md").read_text())))
    assert {"reports/pipeline/trace.json", "reports/pipeline/events.csv"} <= set(written)
    assert _ignored(written) == written
