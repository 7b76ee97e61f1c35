"""`hase zoo`: build (or list) the ONNX model zoo described by a TOML config; `--ranges` measures the kernel sizes of
real models (the sampler's table), `--refine` writes the next adaptive round of sampled blocks."""
from __future__ import annotations

import argparse
import shutil
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from hase import paths, zoo
from hase.commands.common import plural, stdout_console, titled_table
from hase.errors import HaseError
from hase.files import check_output_dir, check_output_file, outermost_missing, write_atomic
from hase.sampler.config import read_zoo, zoo_sampler
from hase.sampler.ranges import extract_ranges, ranges_csv
from hase.sampler.refine import refine

KERNEL_RANGES = "configs/kernel_ranges.csv"  # the sampler's table of real kernel sizes (committed)
ROUNDS_DIR = "data/sampler"  # where `--refine` writes round configs (git-ignored)

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from hase.zoo import ModelSpec


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `zoo` subcommand to the CLI's subparsers."""
    p = sub.add_parser(
        "zoo",
        help="build the ONNX model zoo described by a config",
        description=(
            "Build every model of a zoo config into OUT/<config name>/ (rewriting only files that are missing or "
            "differ from what the builder writes now) "
            "and write OUT/<config name>/index.csv. Models are generated offline with seeded random weights."
        ),
    )
    p.add_argument("--config", default=paths.ZOO_CONFIG, help="zoo config (default: %(default)s)")
    p.add_argument("--out", default=paths.ZOO_DIR, help="root folder of the zoo (default: %(default)s)")
    p.add_argument("--list", action="store_true", help="list variants without building")
    p.add_argument("--ranges", nargs="+", metavar="DIR",
                   help="instead of building: split every .onnx in these folders (real models) at --opt-level and "
                        "write the kernel sizes per op family to --ranges-out (what [sampler] draws from)")
    p.add_argument("--ranges-out", default=KERNEL_RANGES, help="the kernel ranges table (default: %(default)s)")
    p.add_argument("--opt-level", default="all", help="ORT optimization level for --ranges (default: %(default)s)")
    p.add_argument("--refine", action="store_true",
                   help="instead of building: predict the config's measured sampled blocks k-fold and write the next "
                        "round of blocks around the worst ones into --rounds-dir (then `hase collect --zoo ROUND`)")
    p.add_argument("--store", default=paths.STORE, help="measurement store for --refine (default: %(default)s)")
    p.add_argument("--device", default=paths.DEFAULT_DEVICE, help="device config for --refine (default: %(default)s)")
    p.add_argument("--predictor-config", default=paths.PREDICTOR_CONFIG,
                   help="forest settings for --refine (default: %(default)s)")
    p.add_argument("--rounds-dir", default=ROUNDS_DIR, help="where --refine writes rounds (default: %(default)s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build or list the zoo; prints a progress bar and a per-family summary table."""


    console = stdout_console()
    if args.ranges:
        return _ranges(args, console)
    if args.refine:
        return _refine(args, console)
    config = read_zoo(args.config)
    specs = list(config.specs)
    if args.list:
        console.print(_variants_table(specs))
        return 0
    check_output_dir(args.out, "--out")
    built: Counter[str] = Counter()
    sizes: defaultdict[str, int] = defaultdict(int)
    made = outermost_missing(zoo.zoo_dir(args.config, args.out))
    try:
        with _progress(console) as progress:
            task = progress.add_task("building", total=len(specs))
            for entry in zoo.ensure_zoo(config, args.out):
                built[entry.spec.family] += entry.built
                sizes[entry.spec.family] += entry.path.stat().st_size
                progress.update(task, advance=1, description=escape(entry.spec.name))
    except BaseException:
        # models built before the failure stay (the zoo resumes), but folders made for nothing do not
        if made is not None and not any(p.is_file() for p in made.rglob("*")):
            shutil.rmtree(made, ignore_errors=True)
        raise
    console.print(_summary_table(specs, built, sizes))
    folder = zoo.zoo_dir(args.config, args.out)
    console.print(f"{plural(len(specs), 'model')} in {folder} ({sum(built.values())} built now), "
                  f"listed in {folder / zoo.INDEX_NAME}", markup=False)
    return 0


def _progress(console: Console) -> Progress:

    return Progress(TextColumn("[bold]zoo"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.description}"), console=console)


def _variants_table(specs: Sequence[ModelSpec]) -> Table:

    table = titled_table(f"{len(specs)} model variants")
    table.add_column("name", no_wrap=True)
    table.add_column("family")
    table.add_column("parameters")
    for spec in specs:
        table.add_row(escape(spec.name), escape(spec.family), escape(", ".join(f"{k}={v}" for k, v in spec.params)))
    return table


def _summary_table(specs: Sequence[ModelSpec], built: Mapping[str, int], sizes: Mapping[str, int]) -> Table:

    models = Counter(spec.family for spec in specs)
    table = Table("family", "models", "built now", "size MB", title="model zoo")
    for family in sorted(models):
        table.add_row(escape(family), str(models[family]), str(built[family]), f"{sizes[family] / 1e6:.1f}")
    table.add_row("total", str(len(specs)), str(sum(built.values())), f"{sum(sizes.values()) / 1e6:.1f}",
                  style="bold")
    return table


def _ranges(args: argparse.Namespace, console: Console) -> int:
    """`--ranges DIR...`: the kernel sizes of real models, written to --ranges-out."""


    check_output_file(args.ranges_out, "--ranges-out")
    models = []
    for folder in map(Path, args.ranges):
        if not folder.is_dir():
            raise HaseError(f"--ranges {folder}: not a folder: pass folders of real .onnx models")
        models += sorted(folder.glob("*.onnx"))
    if not models:
        raise HaseError(f"--ranges {' '.join(args.ranges)}: no .onnx files there: pass folders of real models")
    ranges = extract_ranges(models, args.opt_level, sources=" ".join(args.ranges))
    write_atomic(args.ranges_out, ranges_csv(ranges))
    families = ", ".join(ranges.families())
    console.print(f"kernel ranges of {ranges.provenance['n_models']} models ({families}) written to "
                  f"{args.ranges_out}", markup=False, soft_wrap=True)
    return 0


def _refine(args: argparse.Namespace, console: Console) -> int:
    """`--refine`: the next adaptive round of sampled blocks, as a zoo config."""

    if zoo_sampler(read_zoo(args.config)) is None:
        console.print(f"{args.config} has no [sampler] table: no sampled blocks to refine", markup=False,
                      soft_wrap=True)
        return 0
    check_output_dir(args.rounds_dir, "--rounds-dir")
    result = refine(args.config, args.store, args.device, args.predictor_config, args.rounds_dir)
    if result.points.empty:
        console.print(f"all rounds of {args.config}'s [sampler] are written ({result.round}): nothing to do",
                      markup=False, soft_wrap=True)
        return 0
    errors = result.points["error"].abs()
    console.print(f"{plural(len(result.points), 'sampled kernel')} on {args.device}: k-fold held-out error median "
                  f"{errors.median():.1%}, {(errors > 0.10).mean():.0%} above 10 %; {len(result.chosen)} refined",
                  markup=False, soft_wrap=True)
    if result.config_path is None:
        console.print("no sampled kernel above the threshold: no new round", markup=False, soft_wrap=True)
        return 0
    console.print(f"round {result.round}: {len(result.specs)} new blocks in {result.config_path}; measure them with "
                  f"`hase collect --zoo {result.config_path}`", markup=False, soft_wrap=True)
    return 0
