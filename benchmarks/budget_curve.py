"""A new host's own predictor against the minutes spent on it: collect for a budget, train, score; again.

From an empty store (or the one given, resumed), each step runs `hase collect --budget-s` up to the step's
cumulative collect minutes, then `hase train` into OUT/<step>, and records the wall time of both; at the end every
step's predictor is scored on this host's real models: a dev-set folder against its measured truth
(`benchmarks/score_predictors.py`'s figures: `--models DIR --truth RUN.csv ...`) and, when this host has a
committed survey (`hase host survey`), the survey's real models against their five-pass truth. Nothing is tuned
here: the steps, the order and the targets are the arguments.

    python benchmarks/budget_curve.py --steps 3,6,9,12 --store data/curve.sqlite --out data/curve \
        --models models/dev2/check --truth reports/dev2c-a/devset.csv reports/dev2c-b/devset.csv
    python benchmarks/budget_curve.py ... --order config --with-kernels     # the collect as it was, for comparison

Prints one row per step: collect and train seconds, minutes from the empty store, the store's models and kernels
with spans, then each predictor's scores (within ±10 %, RMSPE, median error, worst, rows beyond ±25 %).
"""
from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from score_predictors import predict_rows, summary, truth_rows

from hase import paths
from hase.cli import main as hase
from hase.predict.bundle import load_bundle
from hase.predict.survey import load_survey, real_predictions
from hase.runtime.host import host_fingerprint

DEVICE = "cpu-1t"


def store_counts(store: Path) -> dict[str, int]:
    """Models profiled and kernels with a span in the store (read-only)."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        models = db.execute("SELECT COUNT(DISTINCT model_id) FROM model_measurements WHERE device = ?",
                            (DEVICE,)).fetchone()[0]
        spans = db.execute("SELECT COUNT(DISTINCT kernel_id) FROM node_spans WHERE device = ?", (DEVICE,)).fetchone()[0]
        kernels = db.execute("SELECT COUNT(DISTINCT kernel_id) FROM kernel_measurements WHERE device = ?",
                             (DEVICE,)).fetchone()[0]
    return {"models": int(models), "span_kernels": int(spans), "timed_kernels": int(kernels)}


def run_steps(args: argparse.Namespace) -> pd.DataFrame:
    """Collect and train at each step; one row per step with its times and store counts."""
    rows, collected = [], 0.0
    for minutes in args.steps:
        budget = minutes * 60 - collected
        argv = ["collect", "--device", DEVICE, "--store", str(args.store), "--zoo", args.zoo, "--order", args.order]
        if not args.with_kernels:
            argv.append("--spans-only")
        if budget > 0:
            t0 = time.perf_counter()
            if hase([*argv, "--budget-s", f"{budget:.0f}"]) != 0:
                raise SystemExit(f"collect failed at step {minutes} min")
            collected += time.perf_counter() - t0
        out = args.out / f"{minutes:g}min"
        t0 = time.perf_counter()
        targets = "span" if not args.with_kernels else "warm,cold,span"
        if hase(["train", "--store", str(args.store), "--device", DEVICE, "--out", str(out), "--targets", targets,
                 "--config", args.config]) != 0:
            raise SystemExit(f"train failed at step {minutes} min")
        train_s = time.perf_counter() - t0  # a user trains once, on the store as it stands: not summed over steps
        rows.append({"step": f"{minutes:g}min", "collect_s": round(collected, 1), "train_s": round(train_s, 1),
                     "minutes": round((collected + train_s) / 60, 2), **store_counts(args.store),
                     "predictor": str(out / DEVICE)})
        print(pd.DataFrame(rows[-1:]).to_string(index=False), flush=True)
    return pd.DataFrame(rows)


def survey_scores(predictor: Path) -> dict[str, float] | None:
    """Scores on this host's survey's real models, or None when this host has no committed survey."""
    path = Path(paths.SURVEYS) / f"{host_fingerprint().digest}.survey.json.gz"
    if not path.exists():
        return None
    d = load_survey(path).devices[DEVICE]
    bundle = load_bundle(predictor)
    target = bundle.default_target
    rows = real_predictions(bundle.predictors[target], bundle.manifest.target(target).calibration.calibration, d)
    err = np.array([r["error_pct"] for r in rows])
    return {"survey_n": len(err), "survey_acc10": float(np.mean(np.abs(err) <= 10) * 100),
            "survey_rmspe": float(np.sqrt(np.mean(err ** 2))), "survey_worst": float(err[np.argmax(np.abs(err))]),
            "survey_truth_spread_pct": float(np.median([r["truth_spread"] for r in rows]) * 100)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="3,6,9,12", help="cumulative collect minutes, comma-separated")
    ap.add_argument("--store", type=Path, default=Path("data/curve.sqlite"))
    ap.add_argument("--out", type=Path, default=Path("data/curve"))
    ap.add_argument("--zoo", default=paths.ZOO_CONFIG)
    ap.add_argument("--config", default=paths.PREDICTOR_CONFIG)
    ap.add_argument("--order", choices=["coverage", "active", "config"], default="coverage")
    ap.add_argument("--with-kernels", action="store_true", help="also time every kernel standalone (warm, cold)")
    ap.add_argument("--models", type=Path, default=None, help="a dev-set folder to score on (with --truth)")
    ap.add_argument("--truth", nargs="*", default=[], help="devset.csv files of `hase evaluate --devset` runs")
    ap.add_argument("--score-only", action="store_true", help="score the predictors already under --out")
    args = ap.parse_args()
    args.steps = [float(s) for s in args.steps.split(",")]
    if args.score_only:
        steps = pd.DataFrame([{"step": f"{m:g}min", "predictor": str(args.out / f"{m:g}min" / DEVICE)}
                              for m in args.steps])
    else:
        steps = run_steps(args)
    truth = truth_rows(args.truth) if args.models is not None and args.truth else None
    if truth is not None:
        print(f"\n{args.models}: {len(truth)} rows, truth = min over {len(args.truth)} runs (slowest/quickest run per "
              f"row: median +{np.nanmedian(truth['run_spread_pct']):.1f} %)")
    table = []
    for row in steps.to_dict("records"):
        scored: dict[str, object] = {"step": row["step"]}
        if truth is not None:
            pred = predict_rows(truth, args.models, Path(row["predictor"]))
            scored.update(summary(truth.assign(predicted_ms=pred).dropna(subset=["predicted_ms"])))
        scored.update(survey_scores(Path(row["predictor"])) or {})
        table.append(scored)
    pd.set_option("display.width", 250)
    print("\n" + steps.drop(columns="predictor").merge(pd.DataFrame(table), on="step").round(2).to_string(index=False))


if __name__ == "__main__":
    main()
