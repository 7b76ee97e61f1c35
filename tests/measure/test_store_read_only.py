"""A store Hase may not write (the file, or its folder, read-only): `hase collect` says so in one line on stderr
before any work starts, where it once measured a first job under its progress bars and left them on the screen
above the error.

Permissions are checked by a child process: a user's own, or, for root (whom chmod does not stop), root's without
the capabilities that override file permissions (`setpriv`).
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model

from hase.measure.store import Store

DEVICES = """
[kernel_timing]
warmup = 1
min_runs = 3
max_runs = 5
min_time_s = 0.0
max_time_s = 0.02
[model_timing]
warmup = 1
min_runs = 3
max_runs = 5
min_time_s = 0.0
max_time_s = 0.05
[canary]
enabled = false
[[device]]
name = "cpu-1t"
ep = "cpu"
intra_op_threads = 1
"""
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours and cursor movements


def _as_a_user() -> list[str]:
    """The command prefix under which file permissions hold for the child process."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: chmod cannot make a file read-only to this process")
    drop = "-dac_override,-dac_read_search"
    probe = subprocess.run([setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}", "true"], check=False)
    if probe.returncode != 0:
        pytest.skip("setpriv cannot drop capabilities here")
    return [setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}"]


@pytest.mark.slow
@pytest.mark.parametrize("read_only", ["file", "folder"])
def test_a_read_only_store_is_one_line_before_any_work(read_only: str, tmp_path: Path) -> None:
    prefix = _as_a_user()
    folder = tmp_path / "stores"
    folder.mkdir()
    store = folder / "s.sqlite"
    with Store(store):
        pass  # an empty store of this version
    (tmp_path / "devices.toml").write_text(DEVICES)
    onnx.save(conv_bn_relu_model(c=4), tmp_path / "m.onnx")
    target = store if read_only == "file" else folder
    mode = target.stat().st_mode
    target.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | (stat.S_IXUSR if read_only == "folder" else 0))
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "hase.cli", "collect", "--zoo", "none", "--model", str(tmp_path / "m.onnx"),
             "--devices", str(tmp_path / "devices.toml"), "--store", str(store)],
            capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
            env={**os.environ, "TTY_COMPATIBLE": "1"})  # a terminal to rich: progress bars, were any drawn
    finally:
        target.chmod(mode)
    lines = [line for line in ESCAPE.sub("", done.stderr).replace("\r", "\n").splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("hase: error: ") and str(store) in lines[0] and "corrupt" not in lines[0]
    assert re.search(r"cannot be written|cannot open store", lines[0]), lines[0]
    with Store(store, readonly=True) as s:
        assert s.counts()["models"] == 0  # nothing was measured
