"""What a command prints where stdout is not a terminal (a pipe, a file, a log): tables whole at any width, counts
in words that agree with them, and a reader that stops early (`| head -1`) ends the command without a word."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from conftest import _model, conv_bn_relu_model
from onnx import TensorProto, helper

from hase.cli import EXIT_BROKEN_PIPE, main
from hase.commands.common import plural

HASE = [sys.executable, "-m", "hase.cli"]
LONG = "a_model_whose_name_is_longer_than_a_terminal_line_of_eighty_columns_" + "x" * 30


def _relu() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    return _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y])


def test_a_piped_table_is_never_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rich sizes tables to 80 columns where stdout is not a terminal, and cut cells (`sta…`, `3.224–5.…`)."""
    onnx.save(conv_bn_relu_model(), tmp_path / f"{LONG}.onnx")
    onnx.save(conv_bn_relu_model(c=4), tmp_path / "short.onnx")
    assert main(["predict", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    (row,) = [line for line in out.splitlines() if LONG in line]  # the whole name, on one line with its figures
    assert len(row) > 120 and "–" in row


def test_counts_agree_with_their_noun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (plural(1, "kernel"), plural(0, "kernel"), plural(2, "model")) == ("1 kernel", "0 kernels", "2 models")
    onnx.save(_relu(), tmp_path / "relu.onnx")
    assert main(["predict", str(tmp_path / "relu.onnx")]) == 0
    out = capsys.readouterr().out
    assert "(1 kernel, target" in out and "1 kernels" not in out
    assert main(["split", str(tmp_path / "relu.onnx"), "--out", str(tmp_path / "kernels")]) == 0
    assert "relu.onnx: 1 kernel node, 1 unique kernel ->" in capsys.readouterr().out


@pytest.mark.slow
def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """`hase predict m.onnx | head -1`: once the reader is gone the output stops, exit 141 (as SIGPIPE ends `cat`)
    with nothing about it on stderr; rich's own handling exited 1 without a word."""
    model = tmp_path / "m.onnx"
    onnx.save(conv_bn_relu_model(), model)
    for args in (["predict", str(model)], ["predict", "--json", str(model)]):
        proc = subprocess.Popen([*HASE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first line is written
        err = proc.stderr.read()
        assert proc.wait(timeout=300) == EXIT_BROKEN_PIPE, err
        # nothing about the pipe; on a host other than the shipped predictor's, its one-line warning comes first
        assert [line for line in err.splitlines() if not line.startswith("warning: this host differs")] == [], err
    done = subprocess.run([*HASE, "predict", str(model)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "predicted latency" in done.stdout  # a reader that stays: exit 0
