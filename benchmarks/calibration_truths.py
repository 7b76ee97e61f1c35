"""Several `make own-predictor` runs' calibrations, as fitted and with a per-kernel term read off each store, scored
against the minimum and against the median of a real set's timing passes.

The fitted calibration (alpha * sum + gamma * n + beta) trades alpha against gamma on the zoo's many-small-kernel
models; here gamma is instead each store's own measurement (its sub-2 ms models' summed in-model spans minus their
latency, per node, median, negated) and alpha, beta are fitted with it (relative least squares, the fit's trust
weights). Prints per run and set the median error and the share within ±10 % of both calibrations against both
truth statistics (docs/results.md, "Why the six runs differ").

    python benchmarks/calibration_truths.py --models models/dev2/check \\
        --truth reports/dev2c-{a,b,c,d,e}/devset.csv --run run4=data/curve-cov4.sqlite:data/curve-cov4/12min/cpu-1t ...
"""
from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from hase.evaluate.devset import BATCH, MEASURED_MS, MODEL, jobs_for, list_models
from hase.kernels.graph import resolve_input_shapes
from hase.predict.bundle import load_bundle
from hase.predict.calibration import relative_lstsq
from hase.predict.estimate import build_kernel_graph, estimate_graph

SMALL_MS = 2.0  # the store's models whose span sum minus latency gives the per-node term


def measured_gamma(store: Path, model_ids: list[str], device: str) -> float:
    """-(median over the store's models under SMALL_MS of (summed spans - latency) / nodes), in ms per kernel."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as con:
        m = pd.read_sql("SELECT model_id, latency_ms, node_span_sum_us, n_kernel_nodes FROM model_measurements "
                        "WHERE device = ?", con, params=(device,)).set_index("model_id")
    m = m.reindex(model_ids).dropna()
    per_node = (m["node_span_sum_us"] / 1e3 - m["latency_ms"]) / m["n_kernel_nodes"]
    return -float(np.median(per_node[m["latency_ms"] < SMALL_MS]))


def score(pred: pd.Series, truth: pd.Series) -> str:
    """Median error and share within ±10 %, in words."""
    err = pred / truth - 1
    return f"{np.median(err) * 100:+6.1f} % / {(err.abs() <= 0.10).mean() * 100:3.0f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, type=Path)
    ap.add_argument("--truth", nargs="+", required=True, help="devset.csv of each pass")
    ap.add_argument("--run", action="append", required=True, metavar="NAME=STORE:PREDICTOR")
    args = ap.parse_args()
    passes = pd.concat([pd.read_csv(f).set_index([MODEL, BATCH])[MEASURED_MS].rename(f) for f in args.truth],
                       axis=1).dropna()
    low, mid = passes.min(axis=1), passes.median(axis=1)
    paths, info = list_models(args.models)
    jobs = {j.key: j for p in paths for j in jobs_for(p, info.get(p.name))}
    runs = {}
    for item in args.run:
        name, _, rest = item.partition("=")
        store, _, predictor = rest.partition(":")
        runs[name] = (Path(store), load_bundle(Path(predictor)))
    ep = next(iter(runs.values()))[1].ep_config()
    rows = []
    for key in passes.index:
        job = jobs.get((str(key[0]), int(key[1])))
        if job is None:
            continue
        kg, _ = build_kernel_graph(job.path, ep, resolve_input_shapes(job.path, {}, job.free_dims))
        for name, (_, bundle) in runs.items():
            e = estimate_graph(job.path, kg, bundle)
            rows.append({"run": name, "key": key, "sum_ms": e.sum_ms, "n": e.n_kernels, "fitted_ms": e.latency_ms})
    table = pd.DataFrame(rows)
    print(f"{args.models}: {table['key'].nunique()} rows, {len(args.truth)} passes (median of the slowest over the "
          f"quickest {np.median(passes.max(axis=1) / low - 1) * 100:.0f} %); median error / within ±10 %")
    for name, (store, bundle) in runs.items():
        fit = pd.DataFrame(bundle.manifest.target(bundle.default_target).calibration.fit_data)
        gamma = measured_gamma(store, list(fit["model_id"]), bundle.device)
        X = np.column_stack([fit["sum_ms"], np.ones(len(fit))])
        alpha, beta = relative_lstsq(X, (fit["measured_ms"] - gamma * fit["n_kernels"]).to_numpy(float),
                                     fit["weight"].to_numpy(float))
        t = table[table["run"] == name].set_index("key")
        measured = alpha * t["sum_ms"] + gamma * t["n"] + beta
        lo, md = low.reindex(t.index), mid.reindex(t.index)
        print(f"{name}: fitted vs min {score(t['fitted_ms'], lo)}, vs median {score(t['fitted_ms'], md)} | measured "
              f"gamma {gamma * 1e3:+.2f} us, alpha {alpha:.3f}: vs min {score(measured, lo)}, vs median "
              f"{score(measured, md)}")


if __name__ == "__main__":
    main()
