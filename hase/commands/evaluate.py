"""`hase evaluate`: the report comparing every way of summing kernels with the measured model latency."""
from __future__ import annotations

import argparse
import json

from rich.console import Console

from hase import paths
from hase.commands.common import add_device_arg, add_json_arg, add_predictors_arg, add_store_arg, add_target_arg
from hase.files import check_output_dir, removed_on_error


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `evaluate` subcommand."""
    p = sub.add_parser("evaluate", help="write the evaluation report (CSV, Markdown, HTML with plots)",
                       description="For every measured model: measured latency, sum of ORT kernel_time, of in-model "
                                   "spans, of standalone kernels (warm, cold), the predicted sum and a*sum+b, each as "
                                   "a ratio to the measured latency, on held-out and training families.")
    add_store_arg(p)
    add_predictors_arg(p)
    add_device_arg(p, "device configuration to report on")
    add_target_arg(p)
    p.add_argument("--out", default=paths.REPORTS, help="output directory (default %(default)s)")
    add_json_arg(p, "print the headline figures as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate the device's predictor against the store, write the report, print its headline figures."""
    from hase.predict.bundle import predictor_dir
    from hase.predict.report import headline_lines, report_predictor

    out = check_output_dir(args.out, "--out")
    with removed_on_error(out):  # a failed report leaves no half of itself behind
        ev, paths = report_predictor(args.store, predictor_dir(args.device, args.predictors), out, args.target)
    if args.json:
        print(json.dumps(ev.headline.to_dict(), indent=1, default=str))
        return 0
    c = Console()
    for line in headline_lines(ev):
        c.print(line.replace("**", ""), markup=False)
    c.print(f"report: {paths['report.html']} and {paths['report.md']} (+ {len(paths) - 2} CSV/PNG/JSON files)",
            markup=False)
    return 0
