"""The `hase` command: parse arguments, call one library function per subcommand, print, exit code.

Each subcommand lives in `hase/commands/<name>.py` and exposes `register(subparsers)`, which adds its
parser and sets `func` to a `run(args) -> int`; options several commands share (`--store`, `--device`,
`--input-shape`, `--ep`, ...) are declared once in `hase/commands/common.py`, default paths in `hase.paths`.
HaseError becomes one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from hase import __version__
from hase.errors import HaseError

COMMANDS = ("zoo", "split", "collect", "profile", "train", "predict", "evaluate", "pipeline")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (with `only`) one that registers just that subcommand, so `hase predict`
    does not pay for importing every other command's dependencies."""
    parser = argparse.ArgumentParser(
        prog="hase",
        description="Predict ONNX model latency from kernel measurements, and explain where a run's time goes.",
    )
    parser.add_argument("--version", action="version", version=f"hase {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"hase.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `hase` console script; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    _setup_logging(level)
    try:
        return int(args.func(args) or 0)
    except HaseError as exc:
        print(f"hase: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug, not bad input: one line unless -v asks for the traceback
        if args.verbose:
            raise
        print(f"hase: internal error: {type(exc).__name__}: {exc} (rerun with -v for the traceback)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hase: interrupted; everything committed so far is kept — rerun to resume", file=sys.stderr)
        return 130


def _setup_logging(level: int) -> None:
    from rich.console import Console
    from rich.logging import RichHandler

    root = logging.getLogger("hase")  # logs go to stderr so `--json` output on stdout stays clean
    root.handlers[:] = [RichHandler(console=Console(stderr=True), show_path=False, markup=False)]
    root.setLevel(level)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
