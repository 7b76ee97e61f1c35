"""hase.files: atomic writes, output paths checked before work starts, undo of a failed command's files, TOML
loading and one-line file-system errors."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from hase import files
from hase.errors import HaseError
from hase.files import (
    check_output_dir,
    check_output_file,
    load_toml,
    os_error_message,
    outermost_missing,
    removed_on_error,
    write_atomic,
)


def test_write_atomic_failure_names_the_target_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "report.md"
    target.mkdir()  # the rename onto it fails
    with pytest.raises(IsADirectoryError) as info:
        write_atomic(target, "text")
    assert info.value.filename == str(target)
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match=r"Not a directory|File exists"):
        write_atomic(blocker / "sub" / "x.json", "{}")
    assert write_atomic(tmp_path / "a" / "b.txt", "ok").read_text() == "ok"


def test_check_output_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert check_output_dir(tmp_path / "new" / "deeper", "--out") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    with pytest.raises(HaseError, match=r"--out '.*file' is a file, not a directory"):
        check_output_dir(blocker, "--out")
    with pytest.raises(HaseError, match=r"--out '.*file/a/b' cannot be written: '.*file' is a file"):
        check_output_dir(blocker / "a" / "b", "--out")


def test_check_output_dir_not_writable(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(HaseError, match="is not writable"):
        check_output_dir(tmp_path / "out", "--workdir")
    monkeypatch.setattr(files, "_read_only_fs", lambda path: True)
    with pytest.raises(HaseError, match="read-only file system"):
        check_output_file(tmp_path / "t.json", "--trace")


def test_check_output_file(tmp_path):
    with pytest.raises(HaseError, match="is a directory: give a file name"):
        check_output_file(tmp_path, "--trace")
    (tmp_path / "f").write_text("")
    with pytest.raises(HaseError, match=r"--csv '.*f/e.csv' cannot be written"):
        check_output_file(tmp_path / "f" / "e.csv", "--csv")
    assert check_output_file(tmp_path / "x" / "t.json", "--trace") == tmp_path / "x" / "t.json"


def test_removed_on_error(tmp_path):
    out = tmp_path / "a" / "b"
    assert outermost_missing(out) == tmp_path / "a"
    with pytest.raises(OSError), removed_on_error(out):
        out.mkdir(parents=True)
        (out / "k.onnx").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert not (tmp_path / "a").exists()  # the folder and the parents made for it
    out.mkdir(parents=True)
    (out / "old.onnx").write_text("kept")
    with pytest.raises(KeyboardInterrupt), removed_on_error(out):
        (out / "new.onnx").write_text("x")
        (out / "plots").mkdir()
        raise KeyboardInterrupt
    assert [p.name for p in out.iterdir()] == ["old.onnx"]
    with removed_on_error(out):
        (out / "done.onnx").write_text("x")
    assert sorted(p.name for p in out.iterdir()) == ["done.onnx", "old.onnx"]


@pytest.mark.parametrize(("exc", "text"), [
    (PermissionError(errno.EACCES, "Permission denied", "o.json"),
     "'o.json': permission denied: check its permissions or choose another path"),
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device: free disk space or choose "
                                                       "another location"),
    (OSError(errno.EXDEV, "Invalid cross-device link", "a", None, "b"),
     "'a' -> 'b': Invalid cross-device link: check the path"),
    (OSError("no errno at all"), "no errno at all: check the path"),
])
def test_os_error_message(exc, text):
    assert os_error_message(exc) == text


def test_load_toml_errors(tmp_path, monkeypatch):
    with pytest.raises(HaseError, match=r"is a directory: pass the \.toml file"):
        load_toml(tmp_path, "zoo config")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"a = 1\n# caf\xe9\n")
    with pytest.raises(HaseError, match=r"is not UTF-8 text \(line 2, byte 11\): save it as UTF-8"):
        load_toml(bad, "pipeline config")
    good = tmp_path / "good.toml"
    good.write_text("a = 1\n")

    def denied(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(HaseError, match=r"cannot read device config: '.*good.toml': permission denied"):
        load_toml(good, "device config")
