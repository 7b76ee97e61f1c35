"""`hase zoo`: build (or list) the ONNX model zoo described by a TOML config."""
from __future__ import annotations

import argparse
import shutil
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.markup import escape

from hase import paths

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
            "Build every model of a zoo config into OUT/<config name>/ (skipping files that already exist) "
            "and write OUT/<config name>/index.csv. Models are generated offline with seeded random weights."
        ),
    )
    p.add_argument("--config", default=paths.ZOO_CONFIG, help="zoo config (default: %(default)s)")
    p.add_argument("--out", default=paths.ZOO_DIR, help="root folder of the zoo (default: %(default)s)")
    p.add_argument("--list", action="store_true", help="list variants without building")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build or list the zoo; prints a progress bar and a per-family summary table."""
    from rich.console import Console

    from hase import zoo
    from hase.files import check_output_dir, outermost_missing

    console = Console()
    specs = zoo.load_zoo_config(args.config)
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
            for entry in zoo.ensure_zoo(args.config, args.out):
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
    console.print(f"{len(specs)} models in {folder} ({sum(built.values())} built now), "
                  f"listed in {folder / zoo.INDEX_NAME}", markup=False)
    return 0


def _progress(console: Console) -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]zoo"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.description}"), console=console)


def _variants_table(specs: Sequence[ModelSpec]) -> Table:
    from rich.table import Table

    table = Table(title=f"{len(specs)} model variants")
    table.add_column("name", no_wrap=True)
    table.add_column("family")
    table.add_column("parameters")
    for spec in specs:
        table.add_row(escape(spec.name), escape(spec.family), escape(", ".join(f"{k}={v}" for k, v in spec.params)))
    return table


def _summary_table(specs: Sequence[ModelSpec], built: Mapping[str, int], sizes: Mapping[str, int]) -> Table:
    from rich.table import Table

    models = Counter(spec.family for spec in specs)
    table = Table("family", "models", "built now", "size MB", title="model zoo")
    for family in sorted(models):
        table.add_row(escape(family), str(models[family]), str(built[family]), f"{sizes[family] / 1e6:.1f}")
    table.add_row("total", str(len(specs)), str(sum(built.values())), f"{sum(sizes.values()) / 1e6:.1f}",
                  style="bold")
    return table
