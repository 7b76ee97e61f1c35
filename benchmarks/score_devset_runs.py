"""Score one development-set run's predictions against a ground truth measured over several runs.

One `hase evaluate --devset` run measures every model once (the minimum of block medians), and on a shared VM the
same model moves by a median 9 % between runs of one day. So the README scores predictions against the minimum,
per model (and batch), of the latencies that several runs measured: the quietest the host was seen to run it.
Baselines (FLOPs and FLOPs+bytes lines, leave-one-model-out) are refitted on that ground truth.

Usage: python benchmarks/score_devset_runs.py RUN/devset.csv OTHER_RUN/devset.csv ... [--worst 8]
           [--report OUT --models DIR]
(the first file's predictions are scored; every file's measurements make the ground truth). With --report, the
devset report page (report.md, report.html, plots, CSVs; a batch sweep's per-batch scores and one plot per family)
is written to OUT against that truth, each row's `spread` then the slowest over the quickest pass; --models names
the models folder whose models.tsv gives each model's family.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from hase.evaluate.devset import DevsetEvaluation, devset_scores, families_of, list_models, with_baselines
from hase.evaluate.report import write_report
from hase.files import write_atomic

KEY = ["model", "batch"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="devset.csv files of `hase evaluate --devset`; the first is scored")
    ap.add_argument("--worst", type=float, default=8.0, help="list the rows off by more than this many %%")
    ap.add_argument("--report", help="write the devset report page against the truth to this folder")
    ap.add_argument("--models", help="the models folder (its models.tsv names each model's family)")
    args = ap.parse_args()
    rows = pd.read_csv(args.runs[0])
    measured = pd.concat([pd.read_csv(f).set_index(KEY)["measured_ms"].rename(f) for f in args.runs], axis=1)
    truth = measured.min(axis=1)
    spread = (measured.max(axis=1) / truth - 1) * 100
    rows["measured_ms"] = rows.set_index(KEY).index.map(truth)
    rows["error_pct"] = (rows["predicted_ms"] / rows["measured_ms"] - 1) * 100
    scores = devset_scores(with_baselines(rows))
    print(f"{len(args.runs)} runs; slowest / quickest run per row: median +{np.nanmedian(spread):.0f} %, "
          f"p90 +{np.nanpercentile(spread, 90):.0f} %")
    pd.set_option("display.width", 200)
    print(scores.round(3).to_string(index=False))
    err = rows.set_index(KEY)["error_pct"]
    print(err[err.abs() > args.worst].sort_values().round(1).to_string())
    if args.report:
        rows["spread"] = rows.set_index(KEY).index.map(spread / 100)
        families = families_of(list_models(args.models)[1]) if args.models else {}
        dev = DevsetEvaluation(rows, devset_scores(rows), str(rows["device"].dropna().iloc[0]), families=families)
        paths = write_report(None, args.report, dev)
        paths["devset.csv"] = write_atomic(Path(args.report) / "devset.csv", rows.to_csv(index=False))
        print(f"report: {paths['report.md']}")


if __name__ == "__main__":
    main()
