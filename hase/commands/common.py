"""Arguments several subcommands share, declared once so that each one means the same in every command."""
from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from hase import paths
from hase.measure.types import EP_PROVIDERS, OPT_LEVELS

if TYPE_CHECKING:  # pragma: no cover - rich loads when a command shows progress
    from rich.console import Console

DEFAULT_OPT_LEVEL = "extended"
EPS = tuple(EP_PROVIDERS)  # execution providers a command can measure on: cpu, cuda
INPUT_SHAPE_METAVAR = "NAME=D0,D1,..."


def add_store_arg(parser: argparse.ArgumentParser) -> None:
    """`--store`: the SQLite measurement store."""
    parser.add_argument("--store", default=paths.STORE, help=f"the measurement store (SQLite; default {paths.STORE})")


def add_predictors_arg(parser: argparse.ArgumentParser) -> None:
    """`--predictors`: the root of the trained predictors (one folder per device configuration)."""
    parser.add_argument("--predictors", metavar="DIR", default=None,
                        help=f"predictors root, one folder per device configuration, e.g. {paths.PREDICTORS} of "
                             f"`make train` (default: the user directory ({paths.USER_PREDICTORS_HELP}), then the "
                             f"predictors shipped with Hase; see `hase predictors`)")


def add_device_arg(parser: argparse.ArgumentParser, help: str, *, repeatable: bool = False) -> None:
    """`--device`: one device configuration (default `paths.DEFAULT_DEVICE`), or with `repeatable` any number."""
    if repeatable:
        parser.add_argument("--device", action="append", metavar="NAME", help=help)
    else:
        parser.add_argument("--device", default=paths.DEFAULT_DEVICE, metavar="NAME",
                            help=f"{help} (default %(default)s)")


def add_target_arg(parser: argparse.ArgumentParser) -> None:
    """`--target`: which kernel target of a predictor to use."""
    parser.add_argument("--target", default=None,
                        help="kernel target: warm, cold or span (default: the predictor's default target)")


def add_input_shape_arg(parser: argparse.ArgumentParser) -> None:
    """`--input-shape NAME=D0,D1,...`, repeatable: fixes symbolic input dimensions."""
    parser.add_argument("--input-shape", action="append", metavar=INPUT_SHAPE_METAVAR,
                        help="fix a symbolic input dimension (repeatable)")


def add_ep_arg(parser: argparse.ArgumentParser, *, default: str | None = "cpu",
               help: str = "execution provider (default %(default)s)") -> None:
    """`--ep cpu|cuda`: the ONNX Runtime execution provider."""
    parser.add_argument("--ep", default=default, choices=EPS, help=help)


def add_threads_arg(parser: argparse.ArgumentParser,
                    help: str = "intra-op threads (default 1; 0 lets ORT choose)") -> None:
    """`--threads N`: ONNX Runtime intra-op threads, default 1."""
    parser.add_argument("--threads", type=int, default=1, help=help)


def add_opt_level_arg(parser: argparse.ArgumentParser) -> None:
    """`--opt-level`: ONNX Runtime's graph optimization level (which fusions apply)."""
    parser.add_argument("--opt-level", default=DEFAULT_OPT_LEVEL, choices=OPT_LEVELS,
                        help="graph optimization level (default %(default)s)")


def add_ep_args(parser: argparse.ArgumentParser, *, threads: bool = True) -> None:
    """`--ep`, `--opt-level` and (with `threads`) `--threads`: one ONNX Runtime session configuration."""
    add_ep_arg(parser)
    add_opt_level_arg(parser)
    if threads:
        add_threads_arg(parser)


def add_json_arg(parser: argparse.ArgumentParser, help: str = "print JSON instead of tables") -> None:
    """`--json`: machine-readable output on stdout (logs go to stderr)."""
    parser.add_argument("--json", action="store_true", help=help)


def stderr_console() -> Console:
    """The console the CLI's log handler writes to on a terminal, so that a progress bar and log lines share it
    (rich then prints the lines above the bar instead of through it); a new stderr console otherwise.
    `console.is_terminal` tells a command whether to draw progress bars or log one plain line per step."""
    from rich.console import Console
    from rich.logging import RichHandler

    for handler in logging.getLogger("hase").handlers:
        if isinstance(handler, RichHandler):
            return handler.console
    return Console(stderr=True)
