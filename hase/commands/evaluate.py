"""`hase evaluate`: the report comparing every way of summing kernels with the measured model latency, and
(`--devset DIR`) the predictor on a folder of real exported models, predicted vs measured here."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from hase import paths
from hase.commands.common import add_device_arg, add_json_arg, add_predictors_arg, add_store_arg, add_target_arg
from hase.files import check_output_dir, removed_on_error

if TYPE_CHECKING:  # pragma: no cover
    from hase.predict.devset import DevsetEvaluation

DEVSET_CSV = "devset.csv"


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
    p.add_argument("--out", default=paths.REPORTS, help="output directory (default %(default)s)")
    add_json_arg(p, "print the headline figures as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate the device's predictor against the store (and the devset), write the report, print its figures."""
    from hase.predict.bundle import predictor_dir
    from hase.predict.evaluate import evaluate_predictor
    from hase.predict.report import devset_lines, headline_lines, write_report

    out = check_output_dir(args.out, "--out")
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
    c = Console()
    lines = (headline_lines(ev) if ev is not None else
             [f"- no store at {args.store}: the report has the real exported models only"])
    for line in lines + (devset_lines(dev) if dev is not None else []):
        c.print(line.replace("**", ""), markup=False)
    c.print(f"report: {written['report.html']} and {written['report.md']} (+ {len(written) - 2} CSV/PNG/JSON files)",
            markup=False)
    return 0


def run_devset(args: argparse.Namespace, out: Path) -> DevsetEvaluation:
    """Predict and measure the devset's models into OUT/devset.csv (resuming), warning when this host differs."""
    import dataclasses

    from hase.commands.common import stderr_console
    from hase.predict.devset import evaluate_devset
    from hase.predict.identity import open_predictor

    used = open_predictor(args.device, args.predictors, args.target)
    err = stderr_console()
    if used.mismatches:
        err.print(f"warning: this host differs from the machine predictor {used.identity.device!r} was trained on: "
                  f"{'; '.join(used.mismatches)}; the devset figures compare its predictions with this host",
                  markup=False)
    dev = evaluate_devset(args.devset, used.bundle, out / DEVSET_CSV,
                          progress=lambda job, i, n: err.print(f"[{i + 1}/{n}] {job.path.name} batch {job.batch}",
                                                               markup=False))
    return dataclasses.replace(dev, host_mismatches=used.mismatches)
