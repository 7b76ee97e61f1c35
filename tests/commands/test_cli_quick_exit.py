"""hase.cli.console: `hase predict` ends with os._exit once its output is flushed (skipping the interpreter's
teardown); nothing it prints may be lost and its exit codes stay those of `main`."""
from __future__ import annotations

import json
import subprocess
import sys

import onnx
from conftest import conv_bn_relu_model

from hase.cli import QUICK_EXIT

HASE = [sys.executable, "-m", "hase.cli"]


def hase(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HASE, *args], capture_output=True, text=True, timeout=300, check=False)


def test_predict_is_a_quick_exit_command_and_collect_is_not():
    assert "predict" in QUICK_EXIT and "collect" not in QUICK_EXIT  # collect may hold a store or a Ray cluster


def test_a_quick_exit_loses_no_output_and_keeps_the_exit_code(tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(), model)
    files = [str(model)] * 30  # a long JSON array: more than a pipe's buffer, all of it must arrive
    done = hase("-q", "predict", *files, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert len(out) == 30 and all(o["latency_ms"] > 0 for o in out)
    text = hase("predict", str(model))
    assert text.returncode == 0 and "predicted latency" in text.stdout
    bad = hase("predict", str(tmp_path / "none.onnx"))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [f"hase: error: model file not found: {tmp_path / 'none.onnx'} "
                                               f"(check the path)"]


def test_python_m_hase_is_the_hase_command():
    done = subprocess.run([sys.executable, "-m", "hase", "predictors", "--json"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "cpu-1t" in {p["device"] for p in json.loads(done.stdout)}
