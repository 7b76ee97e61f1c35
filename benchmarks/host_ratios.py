"""How a surveyed host differs from a predictor's: its transfer kernels' measured/predicted, by size and intensity.

For one survey and one device, every transfer kernel the survey measured against the source predictor's prediction
(as it is, no adaptation), as the median ratio per forest, per half-decade of predicted size and per band of
arithmetic intensity (FLOPs per byte, from the kernel's features). What the host map (`hase.predict.host_map`)
fits, laid out: a host that differs by intensity shows opposite ratios in one row. Nothing is measured here.

    python benchmarks/host_ratios.py benchmarks/hosts/248e36c95a80.survey.json.gz [--device cpu-1t] [--forest Gemm]
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.predict.bundle import load_bundle
from hase.predict.host_map import forest_label
from hase.predict.locate import find_predictor
from hase.predict.predictor import KernelPredictor, intensity
from hase.predict.survey import DeviceSurvey, kernel_device, load_survey

SIZE_BINS = (-4.0, -2.5, -2.0, -1.5, -1.0, 0.0, 2.0)  # log10 predicted ms
AI_BINS = (-3.0, 0.0, 0.5, 1.0, 1.5, 2.0, 5.0)  # log10 FLOPs/byte


def kernel_ratios(pred: KernelPredictor, d: DeviceSurvey) -> pd.DataFrame:
    """One row per measured transfer kernel: forest, family of its model, predicted and measured ms, intensity."""
    rows = []
    for m in d.transfer:
        keep = [(s, v) for s, v in zip(m.specs, m.target_ms, strict=True) if math.isfinite(v) and v > 0]
        if not keep:
            continue
        specs = [s for s, _ in keep]
        p = pred.predict_routes(specs, 1)[2]
        ai = intensity(specs)
        for (s, v), x, a in zip(keep, p, ai, strict=True):
            key, source, member = pred.route(s)
            rows.append({"forest": forest_label(key, source, member.family), "model_family": m.family,
                         "predicted_ms": float(x), "measured_ms": v, "intensity": float(a)})
    df = pd.DataFrame(rows)
    df["ratio"] = df["measured_ms"] / df["predicted_ms"]
    df["size"] = pd.cut(np.log10(df["predicted_ms"]), SIZE_BINS)
    df["ai"] = pd.cut(np.log10(np.maximum(df["intensity"], 1e-3)), AI_BINS)
    return df


def main(argv: list[str] | None = None) -> int:
    """Print the median ratio by size and intensity for the largest forests (or the one asked for)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("survey", help="a *.survey.json.gz of `hase host survey`")
    ap.add_argument("--device", default="cpu-1t", help="device configuration (default %(default)s)")
    ap.add_argument("--forest", action="append", default=None, help="forest label(s) to show (default: the 4 largest)")
    args = ap.parse_args(argv)
    try:
        bundle = load_bundle(find_predictor(args.device, adapted=False).path)
        d = kernel_device(bundle, load_survey(args.survey), f"survey {args.survey}")
    except HaseError as exc:
        print(f"host_ratios: error: {exc}", file=sys.stderr)
        return 2
    df = kernel_ratios(bundle.predictors[bundle.default_target], d)
    forests = args.forest or list(df["forest"].value_counts().index[:4])
    print(f"{len(df)} kernels of {len(d.transfer)} transfer models; measured/predicted, median (kernels)")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        for f in forests:
            x = df[df["forest"] == f]
            table = x.groupby(["size", "ai"], observed=True)["ratio"].agg(
                lambda r: f"{np.median(r):.2f} ({len(r)})").unstack()
            print(f"\n{f}: size (log10 ms) by intensity (log10 FLOPs/byte)\n{table.fillna('').to_string()}")
        by_family = df[df["forest"].isin(forests)].groupby(["forest", "model_family"])
        print("\nby forest and transfer family: median ratio, median intensity, kernels")
        print(by_family.agg(ratio=("ratio", "median"), intensity=("intensity", "median"), n=("ratio", "size"))
              .round(2).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
