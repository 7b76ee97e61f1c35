"""Each node's in-model time against its predicted time, for real models run at several batch sizes: where a
batched model's error sits (issue 29, cache-state-aware kernel times).

For every model of a folder (a spent dev set: the symbolic-batch copies `hase evaluate --batch-sweep` makes) and
each batch size of --batches whose estimated latency (models.tsv's batch-1 latency x batch) stays under --max-ms,
the predictor's kernels are predicted (raw forest time before calibration, `pred_ms`) and the model is profiled
(--runs profiled runs after the warm-up; each node's median ORT kernel_time, `in_model_ms`). One row per node,
appended to --out after each (model, batch), so a rerun resumes:

    model | batch | node_name | op_type | family | key| pred_ms | in_model_ms | flops | bytes | act_bytes | weight_bytes

`act_bytes` are the node's non-constant inputs and outputs, `weight_bytes` its constant inputs: the working set a
cache holds or not. Then:

    python benchmarks/batch_spans.py --models models/dev2/check --predictors data/curve-cov4/12min \
        --out data/batch-spans.csv --batches 1,8,32
    python benchmarks/batch_spans.py --summary data/batch-spans.csv --l3-mib 32

The summary prints, per feature family and working-set band (activation bytes against the last-level cache), the
median in-model / predicted ratio of the nodes' time-weighted totals, and each batch's model-level sum ratio.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hase.evaluate import devset, sweep
from hase.evaluate.measured import kernel_times_ms
from hase.files import write_atomic
from hase.kernels import split
from hase.kernels.graph import resolve_input_shapes
from hase.predict import features
from hase.predict.bundle import PredictorBundle, load_bundle
from hase.predict.estimate import build_kernel_graph, estimate_graph
from hase.predict.features.common import present, tensor_bytes

COLUMNS = ("model", "batch", "node_name", "op_type", "family", "key", "pred_ms", "in_model_ms", "flops", "bytes",
           "act_bytes", "weight_bytes")


def node_rows(path: Path, job: devset.Job, bundle: PredictorBundle, runs: int) -> pd.DataFrame:
    """One (model, batch): every node's prediction, its profiled in-model time and its working set."""
    ep = bundle.ep_config()
    shapes = resolve_input_shapes(path, {}, job.free_dims)
    kg, _ = build_kernel_graph(path, ep, shapes)
    est = estimate_graph(path, kg, bundle)
    specs = {n.node_name: n.spec for n in split.split(kg)}
    times = kernel_times_ms(path, ep, shapes, runs=runs, est=est)
    out = []
    for k in est.kernels:
        spec = specs[k.node_name]
        cost = features.cost_frame([spec]).iloc[0]
        ins = present(spec.inputs)
        act = sum(tensor_bytes(t) for t in ins if not t.const) + sum(tensor_bytes(t) for t in present(spec.outputs))
        out.append({"model": path.name, "batch": job.batch, "node_name": k.node_name, "op_type": k.op_type,
                    "family": cost[features.FAMILY], "key": k.key, "pred_ms": k.pred_ms,
                    "in_model_ms": times.get(k.node_name, np.nan), "flops": float(cost[features.FLOPS]),
                    "bytes": float(cost[features.BYTES]), "act_bytes": float(act),
                    "weight_bytes": float(sum(tensor_bytes(t) for t in ins if t.const))})
    return pd.DataFrame(out, columns=list(COLUMNS))


def collect(args: argparse.Namespace) -> None:
    paths, info = devset.list_models(args.models)
    copies = sweep.make_sweep_models(args.models, Path(args.out).with_suffix(".models"), info, paths,
                                     max_ms=float("inf"))
    out = Path(args.out)
    have = pd.read_csv(out) if out.is_file() else pd.DataFrame(columns=list(COLUMNS))
    done = set(zip(have["model"], have["batch"], strict=True))
    batches = [int(b) for b in args.batches.split(",")]
    bundle = load_bundle(args.predictors)
    copy_info = devset.list_models(copies.folder)[1]
    skip = set(filter(None, args.skip.split(",")))
    for name in copies.made:
        if devset.sweep_name(name) in skip:
            continue
        path = copies.folder / name
        row = copy_info.get(name, {})
        ms = pd.to_numeric(row.get(sweep.LATENCY_COLUMN, ""), errors="coerce")
        for job in devset.jobs_for(path, row, batches):
            if (name, job.batch) in done or (not pd.isna(ms) and float(ms) * job.batch > args.max_ms):
                continue
            print(f"{name} batch {job.batch}", file=sys.stderr, flush=True)
            try:
                rows = node_rows(path, job, bundle, args.runs)
            except Exception as exc:  # one model's failure must not lose the others' rows
                print(f"  failed: {exc}", file=sys.stderr)
                continue
            have = pd.concat([have, rows], ignore_index=True) if len(have) else rows
            write_atomic(out, have.to_csv(index=False))


def summary(csv: str, l3_mib: float) -> None:
    d = pd.read_csv(csv).dropna(subset=["in_model_ms"])
    l3 = l3_mib * 2**20
    d["ws"] = pd.cut(d["act_bytes"] / l3, [0, 0.125, 0.5, 1, 2, 8, np.inf],
                     labels=["<1/8 L3", "1/8-1/2", "1/2-1", "1-2 L3", "2-8 L3", ">8 L3"])
    pd.set_option("display.width", 200)
    by_batch = d.groupby(["model", "batch"])[["pred_ms", "in_model_ms"]].sum()
    by_batch["ratio"] = by_batch["in_model_ms"] / by_batch["pred_ms"]
    print("per batch: median over models of Σ in-model / Σ predicted (raw forests)")
    print(by_batch.groupby("batch")["ratio"].describe()[["count", "25%", "50%", "75%"]].round(3).to_string())
    g = d.groupby(["family", "ws"], observed=True)
    t = pd.DataFrame({"nodes": g.size(), "in_model_ms": g["in_model_ms"].sum(), "pred_ms": g["pred_ms"].sum()})
    t["ratio"] = t["in_model_ms"] / t["pred_ms"]
    t["share"] = t["in_model_ms"] / d["in_model_ms"].sum()
    print("\nby feature family and activation working set: Σ in-model / Σ predicted")
    print(t[t["share"] > 0.002].round(3).to_string())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="a folder of real exported models with models.tsv")
    ap.add_argument("--predictors", help="predictor folder (one device configuration's, e.g. data/x/cpu-1t)")
    ap.add_argument("--out", help="the per-node CSV (appended, resumable)")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--max-ms", type=float, default=3000.0, help="skip a (model, batch) estimated slower than this")
    ap.add_argument("--runs", type=int, default=3, help="profiled runs per (model, batch)")
    ap.add_argument("--skip", default="", help="models to leave out, comma-separated names without .onnx")
    ap.add_argument("--summary", help="print the summary of this CSV instead")
    ap.add_argument("--l3-mib", type=float, default=32.0, help="the last-level cache the summary bands against")
    args = ap.parse_args()
    if args.summary:
        summary(args.summary, args.l3_mib)
    elif args.models and args.predictors and args.out:
        collect(args)
    else:
        ap.error("give --models, --predictors and --out, or --summary CSV")


if __name__ == "__main__":
    main()
