"""How well `hase.predict.threads` turns one-thread kernel times into T-thread ones: real models, leave-one-out.

Input: the folders `benchmarks/thread_scaling.py --sweep` wrote (nodes.csv, models.csv; several folders of one
host are pooled as more passes). For each model, a thread model is fitted on the other models' kernels at 1 and
the `--fit` thread counts, and predicts the model's kernels at every measured T from their measured one-thread
spans; the model's predicted span sum is compared with its measured one (each kernel's quickest pass). Beside
it: `ideal` (t1 / T) and `op speed-up` (each op type's summed speed-up at T in the other models: only where T was
fitted). The truth's own noise: the median and p90 over models of |pass / first pass - 1| of the span sum, per T.

    python benchmarks/thread_model.py --sweep DIR [DIR ...] --fit 2 [--fit 16] --models DIR [--skeletons DIR]
        [--save FILE]

The kernels' signatures come from the models themselves (`--models`, `--skeletons`: the sweep's inputs), joined
to the spans by node name; kernels whose name this ORT does not give (another ORT version's renames) are left out
and counted. `--save` also fits one model on every kernel and writes it (`hase.predict.threads`).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from hase.kernels import graph, split
from hase.kernels.types import KernelSpec
from hase.predict.threads import fit_thread_model, pairs_with_specs, save_thread_model
from hase.runtime.types import EPConfig


def kernel_specs(dirs: list[Path], skeletons: list[Path]) -> dict[tuple[str, str], KernelSpec]:
    """(model, node name) -> the kernel's signature, from ORT's optimized graph of every model (skeletons
    inflated first)."""
    import tempfile

    import onnx
    from skeleton import inflate  # type: ignore[import-not-found]  # benchmarks/ is on sys.path when run

    files = {p.stem: p for d in dirs for p in sorted(d.glob("*.onnx"))}
    out: dict[tuple[str, str], KernelSpec] = {}
    with tempfile.TemporaryDirectory(prefix="hase_threads_") as tmp:
        for d in skeletons:
            for p in sorted(d.glob("*.onnx")):
                onnx.save(inflate(onnx.load(str(p))), str(Path(tmp) / p.name))
                files[p.stem] = Path(tmp) / p.name
        for name, path in files.items():
            kg = graph.file_kernel_graph(path, EPConfig(name="1t", intra_op_threads=1))
            out.update({(name, n.node_name): n.spec for n in split.split(kg)})
    return out


def load(dirs: list[Path]) -> pd.DataFrame:
    """The long span table of all folders, passes renumbered so that folders do not collide. A folder holds the
    sweep's nodes.csv, or the committed wide form spans.csv.gz (model, node, op_type, then one column t{T}_p{pass}
    per thread count and pass: a fifth of the size)."""
    frames, offset = [], 0
    for d in dirs:
        if (d / "nodes.csv").exists():
            f = pd.read_csv(d / "nodes.csv")
        else:
            wide = pd.read_csv(d / "spans.csv.gz")
            f = wide.melt(id_vars=["model", "node", "op_type"], var_name="col", value_name="span_ms").dropna()
            parts = f["col"].str.extract(r"t(\d+)_p(\d+)").astype(int)
            f = f.assign(threads=parts[0], **{"pass": parts[1]}).drop(columns="col")
        f["pass"] = f["pass"] + offset
        offset = int(f["pass"].max()) + 1
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def noise(spans: pd.DataFrame) -> pd.DataFrame:
    """Per T: the median and p90 over models and later passes of |span sum / first pass's - 1|."""
    sums = spans.groupby(["model", "threads", "pass"])["span_ms"].sum().unstack("pass")
    first = sums.iloc[:, 0]
    dev = sums.iloc[:, 1:].div(first, axis=0).sub(1).abs().stack()
    g = dev.groupby(level="threads")
    return pd.DataFrame({"noise_median": g.median(), "noise_p90": g.quantile(0.9), "passes": sums.shape[1]})


def joined(spans: pd.DataFrame, specs: dict[tuple[str, str], KernelSpec]) -> tuple[pd.DataFrame, list[KernelSpec]]:
    """The kernel pairs that have a signature, and the signatures in row order."""
    pairs, signatures, share = pairs_with_specs(spans, specs)
    print(f"{share:.1%} of the kernel pairs joined to a signature by node name")
    return pairs, signatures


def evaluate(pairs: pd.DataFrame, specs: list[KernelSpec], fit_threads: list[int]) -> pd.DataFrame:
    """Per model and T: measured and predicted span sums (thread model, ideal, op speed-up)."""
    rows = []
    for model in sorted(pairs["model"].unique()):
        sel = ((pairs["model"] != model) & pairs["threads"].isin(fit_threads)).to_numpy()
        tm = fit_thread_model(pairs[sel], [s for s, k in zip(specs, sel, strict=True) if k])
        test = pairs[pairs["model"] == model]
        test_specs = [specs[i] for i in test.index]
        for t, g in test.groupby("threads"):
            g_specs = [test_specs[test.index.get_loc(i)] for i in g.index]
            pred = float(tm.predict(g_specs, g["t1_ms"].to_numpy(), int(t)).sum())
            row = {"model": model, "threads": int(t), "measured_ms": float(g["t_ms"].sum()),
                   "t1_ms": float(g["t1_ms"].sum()), "thread_model_ms": pred, "ideal_ms": float(g["t1_ms"].sum()) / t}
            same = pairs[(pairs["model"] != model) & (pairs["threads"] == t)]
            if t in fit_threads and not same.empty:
                speed = same.groupby("op_type")["t1_ms"].sum() / same.groupby("op_type")["t_ms"].sum()
                overall = same["t1_ms"].sum() / same["t_ms"].sum()
                row["op_speedup_ms"] = float((g["t1_ms"] / g["op_type"].map(speed).fillna(overall)).sum())
            rows.append(row)
    return pd.DataFrame(rows)


def score(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per T: within ±10 %, RMSPE and median error of `column` against the measured sum."""
    if column not in table:
        return pd.DataFrame()
    e = (table[column] / table["measured_ms"] - 1).rename("e")
    g = pd.concat([table["threads"], e], axis=1).dropna().groupby("threads")["e"]
    return pd.DataFrame({"n": g.size(), "within10": g.apply(lambda x: (x.abs() <= 0.10).mean()),
                         "rmspe": g.apply(lambda x: float(np.sqrt((x ** 2).mean()))), "median": g.median()})


def main(argv: list[str] | None = None) -> int:
    """Print the noise and the scores per T and method."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", nargs="+", type=Path, required=True)
    ap.add_argument("--fit", type=int, action="append", required=True, help="thread counts to fit on (besides 1)")
    ap.add_argument("--models", nargs="*", type=Path, default=[], help="folders of the sweep's .onnx models")
    ap.add_argument("--skeletons", nargs="*", type=Path, default=[], help="folders of its weight-less models")
    ap.add_argument("--csv", type=Path, default=None, help="write the per-model table here")
    ap.add_argument("--save", type=Path, default=None, help="fit on every model and write the thread model here")
    args = ap.parse_args(argv)
    spans = load(args.sweep)
    host = (args.sweep[0] / "host.txt").read_text().splitlines() if (args.sweep[0] / "host.txt").exists() else []
    print(f"host {' | '.join(host)}; {spans['model'].nunique()} models, {spans['pass'].nunique()} passes, "
          f"threads {sorted(int(t) for t in spans['threads'].unique())}; fitted on 1 and {args.fit}; "
          "leave-one-model-out")
    pairs, specs = joined(spans, kernel_specs(args.models, args.skeletons))
    table = evaluate(pairs, specs, args.fit)
    if args.save:
        sel = pairs["threads"].isin(args.fit).to_numpy()
        cores = re.search(r"(\d+) cores", host[1]) if len(host) > 1 else None
        meta = {"sweep": [str(d) for d in args.sweep], "models": int(pairs["model"].nunique()),
                "cores": int(cores.group(1)) if cores else 0, "fingerprint": host[1] if len(host) > 1 else "",
                "ort": host[2] if len(host) > 2 else ""}
        tm = fit_thread_model(pairs[sel], [s for s, k in zip(specs, sel, strict=True) if k],
                              host=host[0] if host else "", meta=meta)
        print(f"saved {save_thread_model(tm, args.save)}")
    if args.csv:
        table.to_csv(args.csv, index=False)
    parts = {"truth noise": noise(spans)}
    for column in ("thread_model_ms", "op_speedup_ms", "ideal_ms"):
        s = score(table, column)
        if not s.empty:
            parts[column.removesuffix("_ms")] = s
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.float_format", "{:.3f}".format):
        for name, frame in parts.items():
            print(f"\n{name}:")
            print(frame.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
