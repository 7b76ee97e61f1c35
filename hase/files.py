"""File helpers every stage shares: atomic writes (a reader never sees half a file) and TOML configs."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from hase.errors import HaseError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write `data` to a temporary file next to `path`, then rename it over `path` in one step.

    The parent directory is created. An interrupted write leaves `path` as it was and no temporary file.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 & ~umask, like open()
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return p


def load_toml(path: str | os.PathLike[str], what: str = "config", hint: str = "") -> dict[str, Any]:
    """Parse the TOML file at `path`; a missing, unreadable or malformed file is a HaseError naming `what`.

    `hint` is appended to the missing-file message, e.g. "see configs/pipeline_example.toml".
    """
    p = Path(path)
    if not p.is_file():
        raise HaseError(f"{what} {str(p)!r} not found" + (f": {hint}" if hint else ""))
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise HaseError(f"{what} {str(p)!r} is not valid TOML ({exc}): fix the syntax") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HaseError(f"cannot read {what} {str(p)!r} ({exc}): check the path") from None
