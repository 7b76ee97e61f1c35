"""hase.cli: how every kind of failure reaches the user — one stderr line and exit code 2 for bad input and the
environment (OSError, MemoryError, UnicodeDecodeError, SQLite), "internal error" and exit 1 for bugs, 130 for an
interrupt (Ctrl-C or SIGTERM, with temporary folders cleaned up); a real full file system, through a subprocess."""
from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import onnx
import pytest
from conftest import conv_bn_relu_model

from hase.cli import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, main, user_error
from hase.commands import split
from hase.errors import HaseError

REPO = Path(__file__).resolve().parents[2]


def _failing(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """Make `hase split` raise `exc` as its library call would."""
    def run(args):
        raise exc

    monkeypatch.setattr(split, "run", run)


def _run_split(capfd: pytest.CaptureFixture[str], *flags: str) -> tuple[int, list[str]]:
    capfd.readouterr()
    code = main([*flags, "split", "model.onnx", "--out", "out"])
    err = capfd.readouterr().err
    return code, [ln for ln in err.splitlines() if ln.strip()]


def _wrapped() -> RuntimeError:
    try:
        raise OSError(errno.ENOSPC, "No space left on device", "data/hase.sqlite")
    except OSError as exc:
        try:
            raise RuntimeError("saving failed") from exc
        except RuntimeError as outer:
            return outer


ENVIRONMENT = [
    (PermissionError(errno.EACCES, "Permission denied", "out/trace.json"),
     "'out/trace.json': permission denied: check its permissions or choose another path"),
    (OSError(errno.EROFS, "Read-only file system", "/ro/report.md"), "'/ro/report.md': read-only file system"),
    (OSError(errno.ENOSPC, "No space left on device", "kernels/a.onnx"),
     "'kernels/a.onnx': no space left on the device: free disk space"),
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device: free disk space"),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "configs"), "'configs': is a directory: give a file path"),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "a.txt/out"), "'a.txt/out': a part of the path is not"),
    (FileExistsError(errno.EEXIST, "File exists", "x", None, "y"), "'x' -> 'y': already exists"),
    (OSError(errno.EMFILE, "Too many open files"), "too many open files: raise the limit"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "No route to host: check the path"),
    (MemoryError("Unable to allocate 224. GiB for an array with shape (1000000000, 3, 8, 8)"),
     "out of memory (Unable to allocate 224. GiB"),
    (MemoryError(), "out of memory (an allocation failed)"),
    (UnicodeDecodeError("utf-8", b"\xff\xfe", 0, 1, "invalid start byte"),
     "a file is not utf-8 text (invalid start byte at byte 0)"),
    (sqlite3.OperationalError("database or disk is full"),
     "SQLite: database or disk is full: no space left on the device"),
    (sqlite3.DatabaseError("file is not a database"), "file is not a database: not an SQLite file"),
    (sqlite3.OperationalError("database is locked"), "another process holds the store"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "the store is read-only"),
    (sqlite3.OperationalError("no such table: kernels"), "not a Hase store"),
    (HaseError("first line\nsecond line"), "first line second line"),
    (_wrapped(), "'data/hase.sqlite': no space left on the device"),
]


@pytest.mark.parametrize(("exc", "expected"), ENVIRONMENT, ids=[type(e).__name__ + str(i)
                                                                 for i, (e, _) in enumerate(ENVIRONMENT)])
def test_input_and_environment_errors_are_one_line_exit_2(exc, expected, monkeypatch, capfd):
    _failing(monkeypatch, exc)
    code, lines = _run_split(capfd)
    assert code == EXIT_BAD_INPUT
    assert len(lines) == 1 and lines[0].startswith("hase: error: "), lines
    assert expected in lines[0]


@pytest.mark.parametrize("exc", [ValueError("boom"), KeyError("rmspe"), TypeError("'<' not supported"),
                                 sqlite3.ProgrammingError("Cannot operate on a closed database."),
                                 sqlite3.InterfaceError("bad parameter"), RecursionError("too deep")])
def test_bugs_stay_internal_errors(exc, monkeypatch, capfd):
    _failing(monkeypatch, exc)
    code, lines = _run_split(capfd)
    assert code == EXIT_INTERNAL
    assert len(lines) == 1 and lines[0].startswith(f"hase: internal error: {type(exc).__name__}")
    assert lines[0].endswith("(rerun with -v for the traceback)")
    assert user_error(exc) is None


def test_verbose_shows_a_bugs_traceback(monkeypatch):
    _failing(monkeypatch, ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        main(["-v", "split", "model.onnx", "--out", "out"])


def test_verbose_environment_error_logs_the_traceback_then_one_line(monkeypatch, capfd):
    _failing(monkeypatch, OSError(errno.ENOSPC, "No space left on device", "x.json"))
    capfd.readouterr()
    assert main(["-v", "split", "model.onnx", "--out", "out"]) == EXIT_BAD_INPUT
    err = capfd.readouterr().err
    assert "No space left on device" in err  # the traceback, for whoever asked with -v
    assert err.strip().splitlines()[-1] == "hase: error: 'x.json': no space left on the device: free disk space " \
                                           "or choose another location"


def test_keyboard_interrupt(monkeypatch, capfd):
    _failing(monkeypatch, KeyboardInterrupt())
    code, lines = _run_split(capfd)
    assert code == EXIT_INTERRUPTED and len(lines) == 1 and "interrupted" in lines[0]


def test_sigterm_unwinds_like_ctrl_c_and_cleans_temporary_folders(monkeypatch, tmp_path, capfd):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []

    def run(args):
        with tempfile.TemporaryDirectory(prefix="hase_kg_") as tmp:
            seen.append(tmp)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises long before this ends
        return 0

    monkeypatch.setattr(split, "run", run)
    before = signal.getsignal(signal.SIGTERM)
    code, lines = _run_split(capfd)
    assert code == EXIT_INTERRUPTED and "interrupted" in lines[0]
    assert seen and not Path(seen[0]).exists() and not list(tmp_path.iterdir())
    assert signal.getsignal(signal.SIGTERM) == before  # restored after the command


@pytest.mark.parametrize(("argv", "code"), [(["predict"], 2), (["nosuch"], 2), (["split", "m.onnx"], 2),
                                             (["profile", "--runs", "x"], 2), (["--help"], 0), (["--version"], 0)])
def test_usage_errors_are_one_line_and_help_still_works(argv, code, capfd):
    assert main(argv) == code
    out, err = capfd.readouterr()
    if code:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and "error:" in lines[0] and "--help" in lines[0]
    else:
        assert out.strip()


# ---------------------------------------------------------------- a file system that fills up, for real

FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    from hase.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def _with_file_size_limit(limit: int, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(cwd / "tmp")}
    (cwd / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", FULL_DISK, str(limit), *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["split", "profile", "zoo"])
def test_a_full_file_system_mid_write_is_one_line_and_leaves_nothing(command, tmp_path):
    onnx.save(conv_bn_relu_model(), tmp_path / "m.onnx")
    (tmp_path / "zoo.toml").write_text("[families]\nalexnet = [{ width = 0.125, resolution = 64 }]\n")
    argv = {"split": ["split", "m.onnx", "--out", "out"], "profile": ["profile", "m.onnx", "--workdir", "out"],
            "zoo": ["zoo", "--config", "zoo.toml", "--out", "out"]}[command]
    proc = _with_file_size_limit(3000, argv, tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("hase: error:") and "Traceback" not in proc.stderr, proc.stderr
    assert any(word in lines[0] for word in ("too large", "no space", "free space")), lines[0]
    assert not (tmp_path / "out").exists()
    left = [p.name for p in (tmp_path / "tmp").iterdir() if p.name != ".ses"]  # .ses: ORT's own session-id file
    assert not left, left
