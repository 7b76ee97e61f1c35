"""`hase evaluate`: the report comparing every way of summing kernels with the measured model latency."""
from __future__ import annotations

import argparse
import json

from rich.console import Console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="write the evaluation report (CSV, Markdown, HTML with plots)",
                       description="For every measured model: measured latency, sum of ORT kernel_time, of in-model "
                                   "spans, of standalone kernels (warm, cold), the predicted sum and a*sum+b, each as "
                                   "a ratio to the measured latency, on held-out and training families.")
    p.add_argument("--store", default="data/hase.sqlite", help="the measurement store (SQLite)")
    p.add_argument("--predictors", default=None, help="predictors root (default: the shipped data/predictors)")
    p.add_argument("--device", default="cpu-1t", help="device configuration to report on")
    p.add_argument("--target", default=None, help="target to report (default: the predictor's default)")
    p.add_argument("--out", default="reports", help="output directory")
    p.add_argument("--json", action="store_true", help="print the headline figures as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hase.predict.evaluate import evaluate_predictor
    from hase.predict.predictor import predictor_dir
    from hase.predict.report import headline_lines, write_report

    ev = evaluate_predictor(args.store, predictor_dir(args.device, args.predictors), args.target)
    paths = write_report(ev, args.out)
    if args.json:
        print(json.dumps(ev.headline, indent=1, default=str))
        return 0
    c = Console()
    for line in headline_lines(ev):
        c.print(line.replace("**", ""), markup=False)
    c.print(f"report: {paths['report.html']} and {paths['report.md']} (+ {len(paths) - 2} CSV/PNG/JSON files)")
    return 0
