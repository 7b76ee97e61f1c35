"""The `hase` command: parse arguments, call one library function per subcommand, print, exit code.

Each subcommand lives in `hase/commands/<name>.py` and exposes `register(subparsers)`, which adds its
parser and sets `func` to a `run(args) -> int`; options several commands share (`--store`, `--device`,
`--input-shape`, `--ep`, ...) are declared once in `hase/commands/common.py`, default paths in `hase.paths`.

Exit codes: 0 done; 2 bad input or environment — a bad option, a HaseError, or an OSError (permission denied,
read-only or full disk, a file where a directory belongs), MemoryError, UnicodeDecodeError or SQLite error —
always one line on stderr, never a traceback; 1 an internal error (a bug: rerun with -v for the traceback);
130 interrupted (Ctrl-C or SIGTERM; what was committed is kept); 141 stdout's reader went away
(`hase predict models/ | head -1`): the output stops there without a word, as `cat` or `seq` do when SIGPIPE ends
them (128 + SIGPIPE; Python ignores the signal, so Hase ends quietly itself).
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import logging
import os
import select
import signal
import sqlite3
import sys
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from hase import __version__
from hase.errors import HaseError, first_line
from hase.files import os_error_message  # not at start-up: a successful command may never need it

if TYPE_CHECKING:  # pragma: no cover - sqlite3 loads with the commands that use a store
    import sqlite3

COMMANDS = ("zoo", "split", "collect", "profile", "train", "predict", "predictors", "evaluate", "pipeline", "host",
            "adapt")

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 0, 1, 2, 130, 141

log = logging.getLogger("hase")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit 2), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        """Print `hase <command>: error: <message>` and where to find the usage, then exit 2."""
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (with `only`) one that registers just that subcommand, so `hase predict`
    does not pay for importing every other command's dependencies."""
    parser = OneLineParser(
        prog="hase",
        description="Predict ONNX model latency from kernel measurements, and explain where a run's time goes.",
    )
    parser.add_argument("--version", action="version", version=f"hase {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, tracebacks of errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"hase.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `hase` console script; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser = build_parser(first if first in COMMANDS else None)
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    _setup_logging(level)
    with _sigterm_as_interrupt():
        return _run(args)


# Commands that leave nothing for the interpreter's teardown to do (no store open, no child process, temporary
# folders already removed): the `hase` script ends them with os._exit once their output is flushed, since tearing
# down an interpreter with numpy, onnx and ONNX Runtime loaded costs ~50 ms, a tenth of a prediction.
QUICK_EXIT = ("predict",)


def console() -> NoReturn:
    """The `hase` console script (and `python -m hase`, `python -m hase.cli`): `main` on sys.argv, then exit with its
    code."""
    argv = sys.argv[1:]
    quick = next((a for a in argv if not a.startswith("-")), None) in QUICK_EXIT
    if quick:
        _keep_freed_memory()
    code = main(argv)
    try:
        sys.stdout.flush()  # what is still buffered: its reader may be gone by now
    except BrokenPipeError:
        code = _stdout_closed()
    if quick:
        try:
            logging.shutdown()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed or broken stream: let the interpreter report it as it always has
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def _stdout_closed() -> int:
    """Stdout's reader closed the pipe: nothing more goes there (the interpreter's last flush included), and the
    exit code says so without a message."""
    with contextlib.suppress(AttributeError, ValueError, OSError):  # no file descriptor (tests): nothing to silence
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def _is_stdout_pipe_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on its write end): a BrokenPipeError
    from anywhere else (a child process's pipe) is an error to report."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    if not hasattr(select, "poll"):  # pragma: no cover - Windows: stdout is the only pipe a command writes
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


# glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def _keep_freed_memory() -> None:
    """For a short-lived process: glibc keeps the memory it frees for reuse instead of returning it at once (no
    trimming, no mmap per large block). ONNX Runtime's optimizer allocates and frees weight-sized buffers (ResNet-50:
    ~270 MB) and every page handed out fresh costs a page fault: this saves ~15 % of them, ~25 ms of ResNet-50's
    kernel graph on this project's VM. Where the C library has no mallopt, nothing changes."""

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError, TypeError):  # no mallopt (macOS, Windows): its allocator as it is
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    for param, value in ((_M_MMAP_THRESHOLD, 1 << 30), (_M_TRIM_THRESHOLD, (1 << 31) - 1), (_M_TOP_PAD, 64 << 20)):
        mallopt(param, value)


def _run(args: argparse.Namespace) -> int:
    """Run the subcommand; every failure becomes one line on stderr and its exit code (see the module docstring)."""
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("hase: interrupted; everything committed so far is kept — rerun to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _is_stdout_pipe_closed():
            return _stdout_closed()
        message = user_error(exc)
        if message is None:  # a bug, not bad input: one line unless -v asks for the traceback
            if args.verbose:
                raise
            print(f"hase: internal error: {type(exc).__name__}: {first_line(exc)} (rerun with -v for the traceback)",
                  file=sys.stderr)
            return EXIT_INTERNAL
        if args.verbose and not isinstance(exc, HaseError):
            log.debug("the error's traceback", exc_info=exc)
        print(f"hase: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


def user_error(exc: BaseException) -> str | None:
    """The one-line message of an error caused by the user's input or the environment, None for a bug.

    Looks through explicit causes (`raise ... from exc`), so a library error wrapping a full disk still says so.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        message = _direct_user_error(cur)
        if message is not None:
            return message
        cur = cur.__cause__
    return None


def _direct_user_error(exc: BaseException) -> str | None:
    if isinstance(exc, HaseError):  # written for the user; kept whole, on one line
        return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    if isinstance(exc, OSError):

        return os_error_message(exc)
    if isinstance(exc, MemoryError):
        detail = first_line(exc) if str(exc).strip() else "an allocation failed"
        return (f"out of memory ({detail}): the inputs are too large for this machine; use smaller shapes "
                f"(--input-shape, batch size) or a machine with more memory")
    if isinstance(exc, UnicodeDecodeError):
        return (f"a file is not {exc.encoding} text ({exc.reason} at byte {exc.start}): "
                f"pass a UTF-8 text file where text is expected")
    sqlite = sys.modules.get("sqlite3")  # an SQLite error comes only from a command that imported it
    if sqlite is not None and isinstance(exc, sqlite.Error):
        return _sqlite_message(exc)
    return None


# SQLite's message -> the fix; errors that mean Hase misused SQLite (a bug) are not listed
_SQLITE_FIXES = (
    ("disk is full", "no space left on the device: free disk space or choose another --store location"),
    ("readonly database", "the store is read-only: check its permissions or choose another --store"),
    ("database is locked", "another process holds the store: wait for it to finish or use another --store"),
    ("file is not a database", "not an SQLite file: pass a store written by `hase collect` (--store)"),
    ("malformed", "the store is corrupt: restore it from a copy or collect into a new --store"),
    ("no such table", "not a Hase store: pass a store written by `hase collect` (--store)"),
    ("no such column", "a store of another Hase version: collect into a new --store"),
    ("unable to open", "cannot open the store: check the --store path and its directory's permissions"),
    ("disk i/o error", "input/output error: check the disk"),
)


def _sqlite_message(exc: sqlite3.Error) -> str | None:

    if isinstance(exc, (sqlite3.ProgrammingError, sqlite3.InterfaceError, sqlite3.NotSupportedError)):
        return None  # Hase used the API wrongly: a bug
    text = first_line(exc)
    fix = next((f for key, f in _SQLITE_FIXES if key in text.lower()), "check the --store file")
    return f"SQLite: {text}: {fix}"


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt so that `finally` blocks and context managers clean up (temp dirs)."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM unwinds like Ctrl-C instead of killing the process mid-write."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"  # a log line where stderr is not a terminal


class _StderrHandler(logging.Handler):
    """Plain log lines to whatever `sys.stderr` is when a record is emitted (not when the handler was made)."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write the formatted record and a newline; a failed write is logging's to report, never raised."""
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # logging's contract: a handler reports its own failures via handleError
            self.handleError(record)


def _setup_logging(level: int) -> None:
    """Logs go to stderr, so that `--json` output on stdout stays clean. On a terminal through rich, whose console
    progress bars share (`hase.commands.common.stderr_console`), so lines print above the bars; elsewhere (a log
    file, a pipe, CI) as plain lines, one per message, never wrapped."""
    root = logging.getLogger("hase")
    handler: logging.Handler | None = _rich_handler() if _maybe_terminal() else None
    if handler is None:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT, "%Y-%m-%d %H:%M:%S"))
    root.handlers[:] = [handler]
    root.setLevel(level)


def _maybe_terminal() -> bool:
    """Whether rich could take stderr for a terminal: it is a TTY, or an environment variable rich reads says so
    (TTY_COMPATIBLE, FORCE_COLOR). Otherwise rich is not imported at all (a log file, a pipe): importing it is
    ~25 ms of a `hase predict --json` call."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream: not a terminal (as rich decides)
        return False


def _rich_handler() -> logging.Handler | None:
    """Rich's log handler on a stderr console when rich takes it for a terminal, else None."""
    from rich.console import Console
    from rich.logging import RichHandler

    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    return RichHandler(console=console, show_path=False, markup=False)


if __name__ == "__main__":  # pragma: no cover
    console()
