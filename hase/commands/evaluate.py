"""`hase evaluate`: the report comparing every way of summing kernels with the measured model latency, and
(`--devset DIR`) the predictor on a folder of real exported models, predicted vs measured here."""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from hase import paths
from hase.commands.common import (
    add_device_arg,
    add_json_arg,
    add_predictors_arg,
    add_store_arg,
    add_target_arg,
    stderr_console,
    stdout_console,
)
from hase.errors import HaseError
from hase.evaluate.devset import evaluate_devset, list_models
from hase.evaluate.evaluation import evaluate_predictor
from hase.evaluate.report import devset_lines, headline_lines, write_report
from hase.evaluate.sweep import SWEEP_MAX_MS, make_sweep_models
from hase.files import check_output_dir, removed_on_error
from hase.predict.bundle import predictor_dir
from hase.predict.identity import open_predictor

if TYPE_CHECKING:  # pragma: no cover
    from hase.evaluate.devset import DevsetEvaluation
    from hase.evaluate.sweep import SweepModels

DEVSET_CSV = "devset.csv"
SWEEP_DIR = "dynamic"  # where --batch-sweep writes the symbolic-batch copies, under OUT


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `evaluate` subcommand."""
    p = sub.add_parser("evaluate", help="write the evaluation report (CSV, Markdown, HTML with plots)",
                       description="For every measured model: measured latency, sum of ORT kernel_time, of in-model "
                                   "spans, of standalone kernels (warm, cold), the predicted sum and a*sum+b, each as "
                                   "a ratio to the measured latency, on held-out and training families. With "
                                   "--devset DIR, also every model of DIR predicted and measured on this host in the "
                                   "predictor's configuration (resumable: rows go to OUT/devset.csv as they are "
                                   "measured); without a store, the report is that section alone.")
    add_store_arg(p)
    add_predictors_arg(p)
    add_device_arg(p, "device configuration to report on")
    add_target_arg(p)
    p.add_argument("--devset", "--models-dir", dest="devset", metavar="DIR", default=None,
                   help="a folder of real exported models (models.tsv optional; `make devset` builds one) to predict "
                        "and measure; a model with a symbolic batch dimension runs at batch 1, 2, 4 and 8")
    p.add_argument("--batch-sweep", action="store_true",
                   help="evaluate symbolic-batch copies of the --devset models instead (written to OUT/dynamic: the "
                        "batch dimension renamed `batch`, token counts `sequence`, kept where ONNX Runtime runs them "
                        "at any batch), each at --free-dim batch=1, 2, 4 and 8")
    p.add_argument("--sweep-also", nargs="+", default=[], metavar="DIR",
                   help="with --batch-sweep, also these folders of exports whose shapes are already symbolic "
                        "(`benchmarks/export_dynamic.py` writes one)")
    p.add_argument("--sweep-max-ms", type=float, default=None, metavar="MS",
                   help="with --batch-sweep, only models whose models.tsv batch-1 latency is at most MS "
                        "(default 15)")
    p.add_argument("--no-gate", dest="gate", action="store_false",
                   help="with --devset on a many-thread CPU device, time the models whether or not the host gives "
                        "their threads all its cores (default: wait for the cores; hase.runtime.gate)")
    p.add_argument("--out", default=paths.REPORTS, help="output directory (default %(default)s)")
    add_json_arg(p, "print the headline figures as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate the device's predictor against the store (and the devset), write the report, print its figures."""

    out = check_output_dir(args.out, "--out")
    if args.batch_sweep and not args.devset:
        raise HaseError("--batch-sweep needs --devset DIR: the folder of exported models to sweep")
    dev = run_devset(args, out) if args.devset else None
    with_store = dev is None or Path(args.store).is_file()
    with removed_on_error(out):  # a failed report leaves no half of itself behind (the devset rows stay)
        ev = evaluate_predictor(args.store, predictor_dir(args.device, args.predictors), args.target) \
            if with_store else None
        written = write_report(ev, out, dev)
    if args.json:
        head = ev.headline.to_dict() if ev is not None else {}
        if dev is not None:
            head["devset"] = dev.scores.to_dict("records")
        print(json.dumps(head, indent=1, default=str))
        return 0
    c = stdout_console()
    lines = (headline_lines(ev) if ev is not None else
             [f"- no store at {args.store}: the report has the real exported models only"])
    for line in lines + (devset_lines(dev) if dev is not None else []):
        c.print(line.replace("**", ""), markup=False)
    c.print(f"report: {written['report.html']} and {written['report.md']} (+ {len(written) - 2} CSV/PNG/JSON files)",
            markup=False)
    return 0


def run_devset(args: argparse.Namespace, out: Path) -> DevsetEvaluation:
    """Predict and measure the devset's models into OUT/devset.csv (resuming), warning when this host differs."""


    used = open_predictor(args.device, args.predictors, args.target)
    err = stderr_console()
    models_dir, left_out = args.devset, {}
    if args.batch_sweep:
        sweep = sweep_models(args, out)
        models_dir, left_out = sweep.folder, sweep.left_out
        err.print(f"batch sweep: {len(sweep.made)} symbolic-batch models in {sweep.folder}, {len(left_out)} left out",
                  markup=False)
    if used.mismatches:
        err.print(f"warning: this host differs from the machine predictor {used.identity.device!r} was trained on: "
                  f"{'; '.join(used.mismatches)}; the devset figures compare its predictions with this host",
                  markup=False)
    dev = evaluate_devset(models_dir, used.bundle, out / DEVSET_CSV,
                          progress=lambda job, i, n: err.print(f"[{i + 1}/{n}] {job.path.name} batch {job.batch}",
                                                               markup=False),
                          gated=args.gate)
    return dataclasses.replace(dev, host_mismatches=used.mismatches, left_out=left_out)


def sweep_models(args: argparse.Namespace, out: Path) -> SweepModels:
    """The symbolic-batch copies of the devset's quick models, in OUT/dynamic (made once, then reused)."""

    paths, info = list_models(args.devset)
    for extra in args.sweep_also:
        more, more_info = list_models(extra)
        paths, info = paths + more, {**info, **more_info}
    max_ms = SWEEP_MAX_MS if args.sweep_max_ms is None else args.sweep_max_ms
    return make_sweep_models(args.devset, out / SWEEP_DIR, info, paths, max_ms)
