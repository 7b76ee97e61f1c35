"""Progress and logs of long commands: on a terminal, rich bars sharing the log handler's console (log lines print
above the bars, never through them); elsewhere (a log file, CI) plain log lines, one per model or training step.

`TTY_COMPATIBLE` is rich's switch for "is this a terminal": 1 makes the captured stderr one, 0 makes it not.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model

from hase.cli import _setup_logging, main
from hase.commands.common import stderr_console
from hase.measure import collect

# One device and short timing: these tests are about the logs and bars, not the shipped configurations (which
# measure every model once per device, at the shipped timing).
DEVICES = """
[kernel_timing]
warmup = 1
min_runs = 3
max_runs = 10
min_time_s = 0.0
max_time_s = 0.05
[model_timing]
warmup = 1
min_runs = 3
max_runs = 10
min_time_s = 0.0
max_time_s = 0.1
[profile]
warmup = 1
runs = 2
[[device]]
name = "cpu-1t"
ep = "cpu"
intra_op_threads = 1
"""
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (INFO|WARNING) ")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # colours; cursor movements stay


@pytest.fixture
def models(tmp_path: Path) -> list[Path]:
    """Two small real models and a file that is not ONNX (its job is skipped with a warning)."""
    paths = [tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "broken.onnx"]
    onnx.save(conv_bn_relu_model(c=4), paths[0])
    onnx.save(conv_bn_relu_model(c=8, hw=12), paths[1])
    paths[2].write_text("not onnx")
    return paths


def _collect(models: list[Path], store: Path, canary: str = "") -> int:
    devices = store.parent / "devices.toml"
    devices.write_text(canary + DEVICES)
    argv = ["collect", "--zoo", "none", "--devices", str(devices), "--store", str(store)]
    for m in models:
        argv += ["--model", str(m)]
    return main(argv)


def test_log_handler_follows_the_terminal(monkeypatch):
    from rich.logging import RichHandler

    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    _setup_logging(logging.INFO)
    (handler,) = logging.getLogger("hase").handlers
    assert isinstance(handler, RichHandler) and stderr_console() is handler.console  # bars and logs: one console
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    _setup_logging(logging.INFO)
    (handler,) = logging.getLogger("hase").handlers
    assert not isinstance(handler, RichHandler) and not stderr_console().is_terminal


def test_plain_log_lines_go_to_the_current_stderr(monkeypatch, capsys):
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    _setup_logging(logging.INFO)
    long = "x" * 300
    logging.getLogger("hase.test").info("one line %s", long)
    (line,) = capsys.readouterr().err.splitlines()  # not wrapped at 80 columns
    assert LOG_LINE.match(line) and line.endswith(f"INFO one line {long}")


def _check_one_line_per_model(lines: list[str]) -> None:
    """Every line a plain log line; the per-model lines, counted among whatever else the run logs (a host-busy
    warning, the host's peaks): those depend on the host, so the count takes only the lines it is about."""
    assert all(LOG_LINE.match(line) for line in lines), lines
    progress = [line for line in lines if " INFO collect model " in line]
    assert [re.sub(r".* INFO |\[\d+ s\]$", "", line) for line in progress] == [
        "collect model 1/3 on cpu-1t: a ", "collect model 2/3 on cpu-1t: b ", "collect model 3/3 on cpu-1t: broken "]
    (warning,) = [line for line in lines if " WARNING skipped " in line]
    assert "skipped broken on cpu-1t (split)" in warning
    assert "━" not in "".join(lines)  # no progress bar dumped into the log


def test_collect_without_a_terminal_logs_one_line_per_model(models, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert _collect(models, tmp_path / "s.sqlite") == 0
    _check_one_line_per_model(capsys.readouterr().err.splitlines())


def test_a_busy_host_adds_warnings_not_model_lines(models, tmp_path, monkeypatch, capsys):
    """On a loaded host the canary warns between the model lines (a fresh clone's `make test` once failed so): here
    the canary's clock is a fixed sequence, every check after the first one ten times slower."""
    timings = iter([1.0] + [10.0] * 1000)
    monkeypatch.setattr(collect, "canary_timer", lambda ep, policy: lambda: next(timings))
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert _collect(models, tmp_path / "s.sqlite", canary="[canary]\nretries = 0\nwait_s = 0.0\n") == 0
    lines = capsys.readouterr().err.splitlines()
    assert any(" WARNING host busy on cpu-1t" in line for line in lines), lines
    _check_one_line_per_model(lines)


def test_collect_on_a_terminal_prints_warnings_above_the_bars(models, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    assert _collect(models, tmp_path / "s.sqlite") == 0
    err = SGR.sub("", capsys.readouterr().err)
    assert "━" in err and "models [cpu-1t] b" in err  # the bars were drawn
    assert "collect model" not in err  # no per-model log lines: the bars say it
    # rich erased the bars (ESC[2K), printed the warning on its own lines, then drew the bars again below it
    (start,) = [m.start() for m in re.finditer(r"WARNING +skipped broken", err)]
    before, after = err[max(0, start - 60):start], err[start:start + 400]
    assert re.search(r"\x1b\[2K(\[[^\]]*\])? *$", before), repr(before)
    assert "━" not in after.split("\n")[0] and re.search(r"\n(models|kernels)", after), repr(after)
