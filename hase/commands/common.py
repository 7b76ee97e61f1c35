"""Arguments several subcommands share, declared once so that each one means the same in every command."""
from __future__ import annotations

import argparse
import errno
import logging
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table
from rich.text import Text

from hase import paths
from hase.kernels.graph import resolve_input_shapes
from hase.kernels.shapes import parse_free_dims, parse_input_shapes
from hase.runtime.types import EP_PROVIDERS, OPT_LEVELS

if TYPE_CHECKING:  # pragma: no cover - rich loads when a command shows progress
    from rich.console import Console

#: the width of a command's output where stdout is not a terminal (a pipe, a file): wide enough that no table column
#: is cut (`sta…`) and no line wrapped (rich's default there is 80 columns); tables stay as wide as their cells
PIPE_WIDTH = 10_000

DEFAULT_OPT_LEVEL = "all"  # ONNX Runtime's own default: what a user's session runs
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
    """`--input-shape NAME=D0,D1,...` and `--free-dim NAME=SIZE`, both repeatable: fix symbolic input dimensions,
    a whole input's shape or one named dimension in every input (read them with `input_shapes`)."""
    parser.add_argument("--input-shape", action="append", metavar=INPUT_SHAPE_METAVAR,
                        help="the whole shape of an input with symbolic dimensions (repeatable)")
    parser.add_argument("--free-dim", action="append", metavar="NAME=SIZE",
                        help="the size of a named symbolic dimension in every input, e.g. batch=4 (repeatable; "
                             "onnxruntime_perf_test's -f batch:4)")


def input_shapes(args: argparse.Namespace, model: str) -> dict[str, tuple[int, ...]]:
    """A command's `--input-shape` and `--free-dim` as the full shape of each input they set in `model`
    (a HaseError for a malformed item, a name the model does not have or an input left symbolic)."""

    shapes = parse_input_shapes(args.input_shape)
    free = parse_free_dims(args.free_dim)
    return resolve_input_shapes(model, shapes, free) if free else shapes


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


class _StdoutConsole(Console):
    """A stdout console whose closed pipe (`hase predict ... | head -1`) raises BrokenPipeError for the CLI to end
    quietly (`hase.cli`), where rich's own would exit 1 without a word."""

    def on_broken_pipe(self) -> None:
        """Print nothing more on this console, and tell the caller that stdout's reader is gone."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "stdout's reader closed the pipe")


def stdout_console(*, highlight: bool = True, soft_wrap: bool = False) -> Console:
    """The console a command prints its results on: a terminal's own width, or `PIPE_WIDTH` where stdout is a pipe
    or a file, so `hase predict models/ | grep resnet` sees every cell whole."""
    console = _StdoutConsole(highlight=highlight, soft_wrap=soft_wrap)
    if console.is_terminal:
        return console
    return _StdoutConsole(highlight=highlight, soft_wrap=soft_wrap, width=PIPE_WIDTH)


def titled_table(title: str, **kwargs: Any) -> Table:
    """A rich Table at least as wide as its title (rich markup), so that a title holding a path or a model's name is
    never wrapped over lines that break wherever that name's length puts them."""
    return Table(title=title, min_width=Text.from_markup(title).cell_len, **kwargs)


def plural(n: int, noun: str) -> str:
    """A count and its noun, singular for one: `plural(1, "kernel")` is "1 kernel", `plural(3, "kernel")` is
    "3 kernels"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def stderr_console() -> Console:
    """The console the CLI's log handler writes to on a terminal, so that a progress bar and log lines share it
    (rich then prints the lines above the bar instead of through it); a new stderr console otherwise.
    `console.is_terminal` tells a command whether to draw progress bars or log one plain line per step."""

    for handler in logging.getLogger("hase").handlers:
        if isinstance(handler, RichHandler):
            return handler.console
    return Console(stderr=True)
