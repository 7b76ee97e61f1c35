"""File helpers every stage shares: atomic writes (a reader never sees half a file), files' sha256, TOML configs, output
paths checked before any work starts, and file-system errors said in one line with the path and the fix."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hase.errors import HaseError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks: a model's identity in the store and across hosts, a
    predictor file's in its manifest."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write `data` to a temporary file next to `path`, then rename it over `path` in one step.

    The parent directory is created. An interrupted or failed write (full disk, no permission) leaves `path` as
    it was and no temporary file; an OSError names `path`, not the temporary file.
    """
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 & ~umask, like open()
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.filename in (None, os.fspath(tmp)):  # say which file could not be written, not the temporary name
            raise OSError(exc.errno, exc.strerror, os.fspath(p)) from exc
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


def check_output_dir(path: str | os.PathLike[str], what: str) -> Path:
    """Check, before any work starts, that `path` is a directory Hase can write into or create.

    Raises HaseError naming `what` (e.g. "--out") when `path` or one of its parents is a file, or the nearest
    existing directory is read-only or not writable. Creates nothing.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise HaseError(f"{what} {str(p)!r} is a file, not a directory: choose another path")
    _check_parents(p, p, what)
    return p


def check_output_file(path: str | os.PathLike[str], what: str) -> Path:
    """Like `check_output_dir` for a file Hase will write: its directory must be writable, and `path` must not
    be a directory."""
    p = Path(path)
    if p.is_dir():
        raise HaseError(f"{what} {str(p)!r} is a directory: give a file name")
    _check_parents(p.parent, p, what)
    return p


def _check_parents(folder: Path, shown: Path, what: str) -> None:
    """The nearest existing folder of `folder` must be a writable directory; errors name `what` and `shown`."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise HaseError(f"{what} {str(shown)!r} cannot be written: {str(existing)!r} is a file, not a directory; "
                        f"choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "is on a read-only file system" if _read_only_fs(existing) else "is not writable (permission denied)"
        raise HaseError(f"{what} {str(shown)!r} cannot be written: {str(existing)!r} {why}; choose another path")


@contextlib.contextmanager
def removed_on_error(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Run the body; if it raises, remove what it added to `folder`, so a failed command leaves nothing half-written.

    When `folder` did not exist, it (and every parent made for it) is removed; otherwise the entries that are new
    in it are. Files the body overwrote stay as they are (Hase writes them atomically).
    """
    p = Path(folder)
    made = outermost_missing(p)
    before = set() if made is not None else {e.name for e in p.iterdir()} if p.is_dir() else set()
    try:
        yield p
    except BaseException:
        if made is not None:
            _remove(made)
        elif p.is_dir():
            for entry in p.iterdir():
                if entry.name not in before:
                    _remove(entry)
        raise


def outermost_missing(path: str | os.PathLike[str]) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what `mkdir(parents=True)` would create), or None."""
    p, top = Path(path), None
    while not p.exists() and p != p.parent:
        top, p = p, p.parent
    return top


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # pragma: no cover - statvfs is POSIX-only
        return False


# errno -> what it means for the user, and the fix
_OS_ERRORS: dict[int, tuple[str, str]] = {
    errno.EACCES: ("permission denied", "check its permissions or choose another path"),
    errno.EPERM: ("operation not permitted", "check its permissions or choose another path"),
    errno.EROFS: ("read-only file system", "choose a path on a writable file system"),
    errno.ENOSPC: ("no space left on the device", "free disk space or choose another location"),
    errno.EDQUOT: ("disk quota exceeded", "free disk space or choose another location"),
    errno.EFBIG: ("file too large for this file system", "choose another location"),
    errno.EISDIR: ("is a directory", "give a file path"),
    errno.ENOTDIR: ("a part of the path is not a directory", "check the path"),
    errno.ENOENT: ("no such file or directory", "check the path"),
    errno.EEXIST: ("already exists", "remove it or choose another path"),
    errno.ENAMETOOLONG: ("file name too long", "choose a shorter path"),
    errno.ELOOP: ("too many levels of symbolic links", "check the path"),
    errno.EMFILE: ("too many open files", "raise the limit (ulimit -n) and rerun"),
    errno.ENFILE: ("too many open files in the system", "close other programs and rerun"),
    errno.ENOMEM: ("out of memory", "free memory or use smaller inputs"),
    errno.EIO: ("input/output error", "check the disk"),
    errno.EPIPE: ("broken pipe", "the reader of Hase's output exited early"),
}


def os_error_message(exc: OSError) -> str:
    """One line for a file-system or OS error: the path(s), what went wrong, and the fix where known.

    >>> os_error_message(PermissionError(13, "Permission denied", "out/x.json"))
    "'out/x.json': permission denied: check its permissions or choose another path"
    """
    what, fix = _OS_ERRORS.get(exc.errno or -1, (exc.strerror or str(exc) or type(exc).__name__, "check the path"))
    paths = [os.fsdecode(f) for f in (exc.filename, exc.filename2) if f is not None]
    where = " -> ".join(repr(p) for p in paths)
    return f"{where}: {what}: {fix}" if where else f"{what}: {fix}"


def load_toml(path: str | os.PathLike[str], what: str = "config", hint: str = "") -> dict[str, Any]:
    """Parse the TOML file at `path`; a missing, unreadable or malformed file is a HaseError naming `what`.

    `hint` is appended to the missing-file message, e.g. "see configs/pipeline_example.toml".
    """
    p = Path(path)
    if p.is_dir():
        raise HaseError(f"{what} {str(p)!r} is a directory: pass the .toml file")
    if not p.is_file():
        raise HaseError(f"{what} {str(p)!r} not found" + (f": {hint}" if hint else ""))
    try:
        raw = p.read_bytes()
        return tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise HaseError(f"{what} {str(p)!r} is not valid TOML ({exc}): fix the syntax") from None
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise HaseError(f"{what} {str(p)!r} is not UTF-8 text (line {line}, byte {exc.start}): save it as UTF-8 "
                        f"TOML") from None
    except OSError as exc:
        raise HaseError(f"cannot read {what}: {os_error_message(exc)}") from None
