"""A one-thread predictor plus a thread model, scored at ORT's default threads on real models, against the truth
of `hase evaluate --devset ... --device cpu-mt` runs (the same truth a `cpu-mt` predictor is scored on).

The thread model is fitted on a thread sweep (`benchmarks/thread_scaling.py --sweep`), in `--folds` folds by model:
a model of the scored set that the sweep also measured is predicted by the thread model fitted without it, so no
model is predicted with its own kernels' thread timings. Prints the scores (`benchmarks/score_predictors.py`'s
figures) and, with --truth-1t, the one-thread predictor's own scores on the same models at one thread.

    python benchmarks/thread_predict.py --models models/dev2/check --truth reports/dev2c-mt-{a,b}/devset.csv \\
        --predictor data/curve-cov4/12min/cpu-1t --threads 2 --sweep benchmarks/hosts/threads/3b6d76f0225a \\
        --sweep-models tests/data/models --skeletons models/skel [--truth-1t reports/dev2c-{a,b}/devset.csv] \
        [--store-1t data/own.sqlite --store-mt data/own-mt.sqlite [--no-sweep-fit]]

`--store-1t`/`--store-mt` add the zoo's kernel pairs of two stores of the same zoo (one at one thread, one at
--threads) to every fold's fit; with `--no-sweep-fit`, the thread model is fitted on them alone.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from score_predictors import KEY, predict_rows, summary, truth_rows  # type: ignore[import-not-found]
from thread_model import joined, kernel_specs, load  # type: ignore[import-not-found]

from hase.evaluate.devset import MEASURED_MS, MODEL, PREDICTED_MS, jobs_for, list_models
from hase.kernels.graph import resolve_input_shapes
from hase.predict.bundle import load_bundle
from hase.predict.thread_estimate import estimate_threads
from hase.predict.threads import ThreadModel, fit_thread_model, load_thread_model, pairs_with_specs, store_spans


def fold_models(pairs: pd.DataFrame, specs: list, folds: int, extra: pd.DataFrame | None = None,
                extra_specs: list | None = None) -> tuple[dict[str, int], list[ThreadModel]]:
    """Each sweep model's fold and one thread model per fold fitted without that fold's models (plus every `extra`
    pair: the zoo's, which the scored set does not have)."""
    names = sorted(pairs["model"].unique())
    fold_of = {m: i % folds for i, m in enumerate(names)}
    fitted = []
    for k in range(folds):
        sel = (pairs["model"].map(fold_of) != k).to_numpy()
        p, sp = pairs[sel], [s for s, keep in zip(specs, sel, strict=True) if keep]
        if extra is not None and extra_specs is not None:
            p, sp = pd.concat([p, extra], ignore_index=True), sp + extra_specs
        fitted.append(fit_thread_model(p, sp))
    return fold_of, fitted


def thread_models(args: argparse.Namespace) -> tuple[dict[str, int], list[ThreadModel], ThreadModel]:
    """The folds' thread models and the one fitted on everything, from the sweep and (optionally) the stores."""
    spans = load(args.sweep)
    spans = spans[spans["threads"].isin([1, args.threads])]
    pairs, specs = joined(spans, kernel_specs(args.sweep_models, args.skeletons))
    extra, extra_specs = None, None
    if args.store_1t and args.store_mt:
        one, s1 = store_spans(args.store_1t, "cpu-1t", 1)
        many, s2 = store_spans(args.store_mt, "cpu-mt", args.threads)
        extra, extra_specs, share = pairs_with_specs(pd.concat([one, many], ignore_index=True), {**s1, **s2})
        print(f"{len(extra)} zoo kernel pairs from the stores ({share:.1%} with a signature)")
    if args.no_sweep_fit and extra is not None and extra_specs is not None:
        fold_of, fitted = {}, []
        everything = fit_thread_model(extra, extra_specs)
    else:
        fold_of, fitted = fold_models(pairs, specs, args.folds, extra, extra_specs)
        everything = fit_thread_model(pd.concat([pairs, extra]) if extra is not None else pairs,
                                      specs + (extra_specs or []))
    return fold_of, fitted, everything


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, type=Path)
    ap.add_argument("--truth", nargs="+", required=True, help="devset.csv files of the multi-thread runs")
    ap.add_argument("--truth-1t", nargs="*", default=[], help="devset.csv files of one-thread runs (reference)")
    ap.add_argument("--predictor", required=True, type=Path, help="a one-thread predictor directory")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--sweep", nargs="*", type=Path, default=[])
    ap.add_argument("--sweep-models", nargs="*", type=Path, default=[])
    ap.add_argument("--skeletons", nargs="*", type=Path, default=[])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--store-1t", nargs="*", default=[], help="stores of one-thread spans of a zoo (their minimum)")
    ap.add_argument("--store-mt", nargs="*", default=[], help="stores of the same zoo's spans at --threads")
    ap.add_argument("--no-sweep-fit", action="store_true", help="fit on the stores' pairs alone")
    ap.add_argument("--thread-model", type=Path, default=None,
                    help="score this thread model (e.g. what `hase host threads` wrote) instead of fitting one; "
                         "--sweep is then not read")
    ap.add_argument("--worst", type=float, default=15.0)
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.thread_model is not None:
        fold_of, fitted, everything = {}, [], load_thread_model(args.thread_model)
    elif args.sweep:
        fold_of, fitted, everything = thread_models(args)
    else:
        raise SystemExit("give --sweep (fit the thread model here) or --thread-model FILE")
    bundle = load_bundle(args.predictor)
    rows = truth_rows(args.truth)
    paths, info = list_models(args.models)
    jobs = {j.key: j for p in paths for j in jobs_for(p, info.get(p.name))}
    pred, own = [], []
    for model, batch in zip(rows[MODEL], rows["batch"], strict=True):
        job = jobs.get((str(model), int(batch)))
        stem = Path(str(model)).stem
        tm = fitted[fold_of[stem]] if stem in fold_of else everything
        own.append(stem in fold_of)
        if job is None:
            pred.append(np.nan)
            continue
        shapes = resolve_input_shapes(job.path, {}, job.free_dims)
        pred.append(estimate_threads(job.path, bundle, tm, [args.threads], input_shapes=shapes).latency_ms[0])
    rows[PREDICTED_MS] = pred
    rows["in_sweep"] = own
    print(f"{args.models}: {len(rows)} rows, truth = min over {len(args.truth)} runs at {args.threads} threads "
          f"(slowest/quickest: median +{np.nanmedian(rows['run_spread_pct']):.1f} %); {sum(own)} of them in the "
          f"sweep (predicted by the fold without them), {args.folds} folds over {len(fold_of)} sweep models")
    scored = rows.dropna(subset=[PREDICTED_MS])
    which = args.thread_model or "thread model"
    table = [{"predictor": f"{args.predictor} + {which}, {args.threads} threads", **summary(scored)}]
    if args.truth_1t:
        one = truth_rows(args.truth_1t)
        one[PREDICTED_MS] = predict_rows(one, args.models, args.predictor)
        table.append({"predictor": f"{args.predictor} at 1 thread (reference)",
                      **summary(one.dropna(subset=[PREDICTED_MS]))})
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(pd.DataFrame(table).to_string(index=False))
        err = (scored[PREDICTED_MS] / scored[MEASURED_MS] - 1) * 100
        worst = scored.assign(error_pct=err)[err.abs() > args.worst]
        if len(worst):
            print(f"\nrows off by more than {args.worst:g} %:")
            print(worst[[*KEY, MEASURED_MS, PREDICTED_MS, "error_pct", "in_sweep"]].to_string(index=False))


if __name__ == "__main__":
    main()
