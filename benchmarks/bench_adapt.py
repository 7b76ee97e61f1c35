"""How much `hase adapt` gains on real models it never saw: source vs adapted predictor on devsets measured here.

    .venv/bin/python benchmarks/bench_adapt.py --source hase/predictors/cpu-1t --devset models/dev \
        --devset models/dev2/check --budget-s 300 --out /tmp/bench_adapt

1. Adapts the source predictor to this host (`hase.predict.adapt.adapt`, the transfer set `hase adapt` uses by
   default: tests/data/models and the zoo, never the devsets) within --budget-s, into OUT/adapted.
2. Measures every devset model here once (`hase.evaluate.devset.evaluate_devset` with the source predictor: robust
   latency, resumable CSV in OUT) and predicts it with the adapted predictor too.
3. Prints, per devset, the share within ±10 % and the RMSPE of both, and writes OUT/bench_adapt.json with this
   host's fingerprint and the source predictor's (None when it has none), so a figure always names its machines.

Run it on the host the predictor was NOT trained on (or a made-different one: another ORT version, a co-running
load, another thread count); on its own machine it only shows that adapting does no harm.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from hase.commands.adapt import transfer_sources
from hase.errors import HaseError
from hase.evaluate.devset import BATCH, ERROR, MEASURED_MS, MODEL, evaluate_devset, jobs_for, list_models
from hase.kernels.graph import resolve_input_shapes
from hase.predict.adapt import adapt
from hase.predict.bundle import PredictorBundle, load_bundle
from hase.predict.estimate import estimate_model
from hase.predict.metrics import score
from hase.runtime.host import host_fingerprint


def adapted_predictions(models_dir: Path, bundle: PredictorBundle, batches: tuple[int, ...]) -> pd.DataFrame:
    """(model, batch, adapted_ms) of every devset job, predicted with `bundle` (nothing is measured)."""
    paths, info = list_models(models_dir)
    rows = []
    for path in paths:
        try:
            jobs = list(jobs_for(path, info.get(path.name), batches))
        except HaseError:
            continue
        for job in jobs:
            try:
                est = estimate_model(job.path, bundle, None, resolve_input_shapes(job.path, {}, job.free_dims))
            except HaseError:
                continue
            rows.append({MODEL: path.name, BATCH: job.batch, "adapted_ms": est.latency_ms})
    return pd.DataFrame(rows, columns=[MODEL, BATCH, "adapted_ms"])


def main(argv: list[str] | None = None) -> int:
    """Adapt, measure the devsets, print and save the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="the source predictor's folder, e.g. hase/predictors/cpu-1t")
    ap.add_argument("--devset", action="append", required=True, help="a devset folder (repeatable)")
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--out", default="/tmp/bench_adapt", help="where the adapted predictor and the CSVs go")
    ap.add_argument("--batches", default="1", help="batch sizes of models with a symbolic batch (default 1)")
    args = ap.parse_args(argv)
    source, out = Path(args.source), Path(args.out)
    batches = tuple(int(b) for b in args.batches.split(","))
    t0 = time.perf_counter()
    result = adapt(source.name, transfer_sources(None), args.budget_s, out / "adapted", source.parent,
                   progress=lambda m: print(f"adapt: {m}", file=sys.stderr))
    adapt_s = time.perf_counter() - t0
    src, dst = load_bundle(source), load_bundle(result.out_dir)
    summary = {"host": host_fingerprint().to_dict(), "source_host": src.manifest.host.to_dict()
               if src.manifest.host is not None else None, "source": str(source), "adapted": str(result.out_dir),
               "budget_s": args.budget_s, "adapt_s": adapt_s, "global_scale": result.global_scale,
               "calibration": result.calibration_choice, "devsets": {}}
    print(f"adapted {source} -> {result.out_dir} in {adapt_s:.0f} s (global kernel scale ×{result.global_scale:.2f}, "
          f"calibration {result.calibration_choice})")
    print(f"{'devset':<24}{'n':>4}  {'source ±10 %':>13}{'RMSPE':>8}  {'adapted ±10 %':>14}{'RMSPE':>8}")
    for d in args.devset:
        dev = Path(d)
        measured = evaluate_devset(dev, src, out / f"{dev.name}_source.csv", batches=batches).rows
        ok = measured[(measured[ERROR].fillna("") == "") & measured[MEASURED_MS].notna()]
        both = ok.merge(adapted_predictions(dev, dst, batches), on=[MODEL, BATCH], how="inner")
        s, a = score(both[MEASURED_MS], both["predicted_ms"]), score(both[MEASURED_MS], both["adapted_ms"])
        summary["devsets"][str(dev)] = {"n": s.n, "source": s.to_dict(), "adapted": a.to_dict()}
        print(f"{dev!s:<24}{s.n:>4}  {s.acc10:>13.1%}{s.rmspe:>7.1f}%  {a.acc10:>14.1%}{a.rmspe:>7.1f}%")
    (out / "bench_adapt.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"wrote {out / 'bench_adapt.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
