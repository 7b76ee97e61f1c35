"""Where ONNX Runtime's default threads go, measured on real models: each kernel's in-model time (the profiler's
span) at 1 intra-op thread and at ORT's default, bucketed by its 1-thread time, per op type, and the time outside
the kernels (session.run wall time less the sum of the spans, per kernel) at both.

It separates the usual suspects of a multi-thread predictor that predicts too fast: kernels too small to split
(their speed-up stays near 1 in the smallest buckets), the thread pool's fork/join per kernel (time outside the
kernels per kernel grows with threads), and shared memory bandwidth (large memory-bound kernels, e.g. depthwise
convs and element-wise ops over big tensors, gain less than compute-bound GEMMs and convs). Interleaved passes
(1, default, 1, default, ...); each figure is the quickest pass.

    python benchmarks/thread_scaling.py [--models DIR ...] [--passes 2] [--threads 0]
    python benchmarks/thread_scaling.py --sweep 1,2,4,8,16 --out DIR [--skeletons DIR] [--budget-s 400]

`--sweep` times every model at each listed intra-op thread count, pass after pass (threads interleaved within a
model), and appends each model's rows to DIR/nodes.csv (model, node, op_type, threads, pass, span_ms) and
DIR/models.csv (model, threads, pass, wall_ms, wall_p90_ms, span_sum_ms, kernels) as it goes, so a run cut off
by its budget keeps what it measured. `--skeletons` takes weight-less models (`benchmarks/skeleton.py`) and
inflates them first: how real models travel to a lent machine.
"""
from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd

from hase.evaluate.measured import kernel_times_ms
from hase.kernels import graph
from hase.measure.model import time_model
from hase.measure.types import MeasureSettings
from hase.runtime.host import host_fingerprint
from hase.runtime.types import EPConfig

BUCKETS_MS = (0.0, 0.005, 0.02, 0.1, 0.5, np.inf)


def measure(path: Path, eps: list[EPConfig], passes: int, settings: MeasureSettings) -> tuple[pd.DataFrame, dict]:
    """Per node and configuration the quickest pass's span (ms); per configuration the quickest wall time."""
    model = graph.load_model(path)
    spans: dict[str, list[dict[str, float]]] = {ep.name: [] for ep in eps}
    walls: dict[str, list[float]] = {ep.name: [] for ep in eps}
    for _ in range(passes):
        for ep in eps:
            spans[ep.name].append(kernel_times_ms(path, ep, runs=10))
            walls[ep.name].append(float(time_model(model, ep, settings)[0].latency_ms))
    per = {name: pd.DataFrame(p).min(axis=0) for name, p in spans.items()}  # node -> quickest pass
    nodes = pd.DataFrame(per).dropna()  # nodes both sessions named alike (ORT renames ReorderOutputs)
    ops = {n.name: n.op_type for n in graph.kernel_graph(model, eps[0]).nodes}
    nodes["op_type"] = [ops.get(str(n), str(n).split("_token")[0]) for n in nodes.index]
    return nodes, {name: min(w) for name, w in walls.items()}


def sweep(files: dict[str, Path], threads: list[int], passes: int, out: Path, budget_s: float,
          max_ms: float) -> None:
    """Every model at every thread count, pass after pass, appended to out/nodes.csv and out/models.csv."""
    import time

    t0 = time.monotonic()
    settings = MeasureSettings()
    out.mkdir(parents=True, exist_ok=True)
    skip: set[str] = set()
    for p in range(passes):
        for name, path in files.items():
            if name in skip:
                continue
            if time.monotonic() - t0 > budget_s:
                print(f"budget {budget_s:.0f} s spent at pass {p}, model {name}", flush=True)
                return
            model = graph.load_model(path)
            ops = {n.name: n.op_type for n in graph.kernel_graph(model, EPConfig(name="1t", intra_op_threads=1)).nodes}
            nodes, walls = [], []
            for t in threads:
                ep = EPConfig(name=f"t{t}", intra_op_threads=t)
                timing = time_model(model, ep, settings)[0]
                if t == threads[0] and timing.latency_ms > max_ms:
                    print(f"{name}: {timing.latency_ms:.1f} ms at {t} threads, over --max-ms; skipped", flush=True)
                    skip.add(name)
                    break
                spans = kernel_times_ms(path, ep, runs=10)
                nodes += [{"model": name, "node": n, "op_type": ops.get(n, n.split("_token")[0]), "threads": t,
                           "pass": p, "span_ms": ms} for n, ms in spans.items()]
                walls.append({"model": name, "threads": t, "pass": p, "wall_ms": timing.latency_ms,
                              "wall_p90_ms": timing.p90_ms, "span_sum_ms": sum(spans.values()),
                              "kernels": len(spans)})
            if name in skip:
                continue
            for rows, file in ((nodes, out / "nodes.csv"), (walls, out / "models.csv")):
                pd.DataFrame(rows).to_csv(file, mode="a", header=not file.exists(), index=False)
            print(f"pass {p} {name}: " + ", ".join(f"{w['threads']}t {w['wall_ms']:.2f} ms" for w in walls)
                  + f" ({time.monotonic() - t0:.0f} s)", flush=True)


def run_sweep(args: argparse.Namespace) -> int:
    """The sweep mode: inflate the skeletons, print the host, measure."""
    import tempfile

    from skeleton import inflate  # type: ignore[import-not-found]  # benchmarks/ is on sys.path when run

    fp = host_fingerprint()
    print(f"host {fp.digest}: {fp.summary()}; ORT {ort.__version__} CPU EP, level all; threads {args.sweep}",
          flush=True)
    files = {p.stem: p for d in (args.models or []) for p in sorted(Path(d).glob("*.onnx"))}
    tmp = Path(tempfile.mkdtemp(prefix="hase_sweep_"))
    for d in args.skeletons:
        for p in sorted(Path(d).glob("*.onnx")):
            onnx.save(inflate(onnx.load(str(p))), str(tmp / p.name))
            files[p.stem] = tmp / p.name
    out = args.out or Path("reports/thread_sweep")
    (out).mkdir(parents=True, exist_ok=True)
    (out / "host.txt").write_text(f"{fp.digest}\n{fp.summary()}\nORT {ort.__version__}\n")
    sweep(files, [int(t) for t in args.sweep.split(",")], args.passes, out, args.budget_s, args.max_ms)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Measure every model, print the buckets, the op types and the per-model overheads."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", action="append", default=None, help="folder of .onnx (default tests/data/models and "
                    "../shared/models/exported)")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="the second configuration's intra-op threads (0: ORT's "
                    "default, one per physical core)")
    ap.add_argument("--sweep", default="", help="comma-separated thread counts: the sweep mode (see above)")
    ap.add_argument("--out", type=Path, default=None, help="the sweep's output folder")
    ap.add_argument("--skeletons", action="append", default=[], help="folder of weight-less models to inflate")
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--max-ms", type=float, default=1e9, help="skip models slower than this at the first count")
    args = ap.parse_args(argv)
    if args.sweep:
        return run_sweep(args)
    dirs = args.models or [d for d in ("tests/data/models", "../shared/models/exported") if Path(d).is_dir()]
    files = {p.stem: p for d in dirs for p in sorted(Path(d).glob("*.onnx"))}
    one, many = EPConfig(name="1t", intra_op_threads=1), EPConfig(name="mt", intra_op_threads=args.threads)
    settings = MeasureSettings()
    fp = host_fingerprint()
    print(f"host {fp.digest}: {fp.summary()}; ORT {ort.__version__} CPU EP, level all; 1 thread against "
          f"intra_op_threads={args.threads}; {args.passes} interleaved passes, quickest kept; python "
          f"{platform.python_version()}")
    rows, models = [], []
    for name, path in files.items():
        nodes, wall = measure(path, [one, many], args.passes, settings)
        nodes["model"] = name
        rows.append(nodes)
        s1, sm, n = nodes["1t"].sum(), nodes["mt"].sum(), len(nodes)
        models.append({"model": name, "kernels": n, "wall_1t_ms": wall["1t"], "wall_mt_ms": wall["mt"],
                       "speedup_wall": wall["1t"] / wall["mt"], "speedup_kernels": s1 / sm,
                       "outside_1t_us_per_kernel": (wall["1t"] - s1) / n * 1e3,
                       "outside_mt_us_per_kernel": (wall["mt"] - sm) / n * 1e3})
    table = pd.concat(rows)
    table["bucket"] = pd.cut(table["1t"], BUCKETS_MS, right=False)
    total = table["1t"].sum()
    buckets = table.groupby("bucket", observed=True).agg(kernels=("1t", "size"), t1_ms=("1t", "sum"),
                                                          tmt_ms=("mt", "sum"))
    buckets["share_of_1t"] = buckets["t1_ms"] / total
    buckets["speedup"] = buckets["t1_ms"] / buckets["tmt_ms"]
    ops = table.groupby("op_type").agg(kernels=("1t", "size"), t1_ms=("1t", "sum"), tmt_ms=("mt", "sum"))
    ops["speedup"] = ops["t1_ms"] / ops["tmt_ms"]
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print("\nper kernel, by its 1-thread in-model time (ms):")
        print(buckets.to_string())
        print("\nper op type (the 12 with the most 1-thread time):")
        print(ops.sort_values("t1_ms", ascending=False).head(12).to_string())
        print("\nper model:")
        print(pd.DataFrame(models).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
