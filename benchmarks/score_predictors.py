"""Score several predictors on real models against one ground truth measured over several runs.

Measuring is the slow part of a dev-set evaluation and predicting is cheap, so the ground truth is measured once
(`hase evaluate --devset DIR` run one or more times: the minimum per model and batch over the runs' measured
latencies, the quietest the host was seen to run it) and every predictor is scored against the same figures:
the shipped one, a retrained one, an adapted one. Each predictor predicts each row itself here (its own kernel
graph: EP, threads, optimization level from its manifest); the FLOPs and FLOPs+bytes lines are refitted
leave-one-model-out on the same truth.

Usage:
    python benchmarks/score_predictors.py --models models/dev2/heldout \
        --truth reports/heldout-a/devset.csv reports/heldout-b/devset.csv \
        --predictor shipped=hase/predictors/cpu-1t --predictor retrained=data/predictors/cpu-1t [--worst 10] \
        [--agreement]

Prints, per predictor: n, within ±10 % and ±5 %, RMSPE, median error, the largest |error| and how many rows are
beyond ±25 %; with --worst, the rows off by more than that many percent (not for a frozen held-out part while
tuning: use --worst 0 there); with --agreement, how far the predictors' predictions lie apart, which needs no truth
(e.g. several runs of one recipe: how reproducible it is).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from hase.evaluate.devset import (
    BATCH,
    ERROR,
    MEASURED_MS,
    MODEL,
    PREDICTED_MS,
    devset_scores,
    jobs_for,
    list_models,
)
from hase.kernels.graph import resolve_input_shapes
from hase.predict.bundle import load_bundle
from hase.predict.estimate import estimate_model

KEY = [MODEL, BATCH]


def truth_rows(runs: list[str]) -> pd.DataFrame:
    """The first run's rows (group, FLOPs, bytes) with measured_ms the minimum over all runs; the spread kept."""
    rows = pd.read_csv(runs[0])
    rows = rows[rows[ERROR].isna() | (rows[ERROR].astype(str) == "")].copy()  # rows without an error
    measured = pd.concat([pd.read_csv(f).set_index(KEY)[MEASURED_MS].rename(f) for f in runs], axis=1)
    truth = measured.min(axis=1)
    rows[MEASURED_MS] = rows.set_index(KEY).index.map(truth)
    rows["run_spread_pct"] = rows.set_index(KEY).index.map((measured.max(axis=1) / truth - 1) * 100)
    return rows.reset_index(drop=True)


def predict_rows(rows: pd.DataFrame, models_dir: Path, predictor: Path) -> pd.Series:
    """Each row's latency predicted by one predictor (NaN where it cannot predict the model)."""
    bundle = load_bundle(predictor)
    paths, info = list_models(models_dir)
    jobs = {j.key: j for p in paths for j in jobs_for(p, info.get(p.name))}
    out = []
    for model, batch in zip(rows[MODEL], rows[BATCH], strict=True):
        job = jobs.get((str(model), int(batch)))
        if job is None:
            out.append(np.nan)
            continue
        shapes = resolve_input_shapes(job.path, {}, job.free_dims)
        out.append(estimate_model(job.path, bundle, None, shapes).latency_ms)
    return pd.Series(out, index=rows.index, dtype=float)


def summary(rows: pd.DataFrame) -> dict[str, float]:
    """The figures of one predictor's rows: ±10 %, ±5 %, RMSPE, median, max |error|, rows beyond ±25 %."""
    scores = devset_scores(rows)
    hase = scores[(scores["group"] == "all") & (scores["method"] == "hase")].iloc[0]
    err = (rows[PREDICTED_MS] / rows[MEASURED_MS] - 1) * 100
    return {"n": int(hase["n"]), "acc10": float(hase["acc10"]), "acc5": float(hase["acc5"]),
            "rmspe": float(hase["rmspe"]), "median_pct": float(hase["median_error_pct"]),
            "max_abs_pct": float(err.abs().max()), "beyond25": int((err.abs() > 25).sum())}


def agreement(preds: pd.DataFrame) -> pd.Series:
    """How far several predictors' predictions (one column each) of the same rows lie apart: per row the standard
    deviation of ln(prediction) in % and max/min - 1 in %; their median and p90 over the rows with every column."""
    logs = np.log(preds.dropna())
    sd, span = logs.std(axis=1, ddof=1) * 100, (np.exp(logs.max(axis=1) - logs.min(axis=1)) - 1) * 100
    return pd.Series({"rows": float(len(logs)), "sd_ln_median_pct": sd.median(), "sd_ln_p90_pct": sd.quantile(0.9),
                      "max_over_min_median_pct": span.median(), "max_over_min_p90_pct": span.quantile(0.9)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, type=Path, help="the dev-set folder the runs evaluated")
    ap.add_argument("--truth", nargs="+", required=True, help="devset.csv files of `hase evaluate --devset` runs")
    ap.add_argument("--predictor", action="append", required=True, metavar="NAME=DIR",
                    help="a predictor directory to score, named (repeatable)")
    ap.add_argument("--worst", type=float, default=0.0, help="list rows off by more than this many %% (0: none)")
    ap.add_argument("--csv", type=Path, default=None, help="also write every row's predictions here")
    ap.add_argument("--agreement", action="store_true",
                    help="also print how far the predictors' predictions of the same rows lie apart (no truth "
                         "needed): per row the standard deviation of ln(prediction) over the predictors, in %%, "
                         "and the largest over the smallest; their median and p90 over the rows")
    args = ap.parse_args()
    rows = truth_rows(args.truth)
    print(f"{args.models}: {len(rows)} rows, truth = min over {len(args.truth)} runs "
          f"(slowest/quickest run per row: median +{np.nanmedian(rows['run_spread_pct']):.0f} %)")
    table, all_rows = [], rows.copy()
    for item in args.predictor:
        name, _, folder = item.partition("=")
        pred = predict_rows(rows, args.models, Path(folder))
        scored = rows.assign(**{PREDICTED_MS: pred}).dropna(subset=[PREDICTED_MS])
        table.append({"predictor": name, **summary(scored)})
        all_rows[name] = pred
        if args.worst > 0:
            err = ((scored[PREDICTED_MS] / scored[MEASURED_MS] - 1) * 100).rename("error_pct")
            worst = scored.assign(error_pct=err).loc[err.abs() > args.worst, [*KEY, PREDICTED_MS, MEASURED_MS,
                                                                             "error_pct"]]
            print(f"\n{name}: rows beyond ±{args.worst:g} %\n{worst.round(2).to_string(index=False)}")
    scores = devset_scores(rows.assign(**{PREDICTED_MS: all_rows[table[0]["predictor"]]}).dropna(
        subset=[PREDICTED_MS]))
    base = scores[(scores["group"] == "all") & (scores["method"] != "hase")]
    pd.set_option("display.width", 200)
    print("\n" + pd.DataFrame(table).round(3).to_string(index=False))
    print("\nbaselines (leave-one-model-out on the same truth):\n" + base.round(3).to_string(index=False))
    if args.agreement:
        print("\nagreement between the predictors (same rows, no truth):\n" + agreement(
            all_rows[[t["predictor"] for t in table]]).round(2).to_string())
    if args.csv is not None:
        all_rows.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
