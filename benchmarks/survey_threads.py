"""Thread models judged on a host survey's real models, from the survey alone: the predicted two-thread speed-up
against the measured one (the one-thread predictor's own error divided out), and the two-thread latency's error.

A survey times its real models at one thread and at ORT's default threads in interleaved passes on a quiet host
(`hase host survey`); a thread model fitted on spans of a busy minute can be checked against it before any dev set
is scored:

    python benchmarks/survey_threads.py --survey benchmarks/hosts/bd14ee861c62.survey.json.gz \
        --predictor data/predictors-own/cpu-1t --thread-model hase/predictors/threads/56e9708810e3.npz \
        --thread-model data/threads/bd14ee861c62.npz

Each model's measured latency is its quickest pass; the real models are looked up by name in --models folders
(default: the checkout's exported test models, as the survey takes them).
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np

from hase.predict.bundle import load_bundle
from hase.predict.thread_estimate import estimate_threads
from hase.predict.threads import load_thread_model

HERE = Path(__file__).resolve().parent
DEFAULT_MODELS = (HERE.parent / "tests/data/models", HERE.parent.parent / "shared/models/exported")


def quickest(survey: dict[str, Any], device: str) -> dict[str, float]:
    """Real model name -> its quickest pass (ms) on one device configuration of the survey."""
    return {str(m["name"]): float(min(m["pass_ms"])) for m in survey["devices"][device]["real"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--survey", required=True, help="a host survey (.survey.json.gz)")
    ap.add_argument("--predictor", required=True, help="a one-thread predictor folder (e.g. hase/predictors/cpu-1t)")
    ap.add_argument("--thread-model", action="append", required=True, help="a thread model .npz (repeatable)")
    ap.add_argument("--models", action="append", type=Path, help="folders of the survey's real models (repeatable)")
    ap.add_argument("--mt-device", default="cpu-mt", help="the survey's many-thread device configuration")
    ap.add_argument("--threads", type=int, default=2, help="the thread count the many-thread passes ran at")
    args = ap.parse_args()
    with gzip.open(args.survey, "rt") as f:
        survey = json.load(f)
    one, many = quickest(survey, "cpu-1t"), quickest(survey, args.mt_device)
    paths = {p.stem: p for folder in (args.models or DEFAULT_MODELS) if folder.is_dir() for p in folder.glob("*.onnx")}
    names = [n for n in one if n in many and n in paths]
    if not names:
        raise SystemExit("none of the survey's real models is in --models: give the folders they are in")
    bundle = load_bundle(args.predictor)
    print(f"{len(names)} real models of {survey['digest']} ({args.threads} threads), predictor {args.predictor}")
    for tm_path in args.thread_model:
        tm = load_thread_model(tm_path)
        speedup, latency = [], []
        for name in names:
            est = estimate_threads(paths[name], bundle, tm, [1, args.threads]).latency_ms
            speedup.append((est[0] / est[1]) / (one[name] / many[name]) - 1)
            latency.append(est[1] / many[name] - 1)
        s, e = np.array(speedup) * 100, np.array(latency) * 100
        print(f"{Path(tm_path).name}: speed-up error median {np.median(s):+.1f} % "
              f"({' '.join(f'{x:+.0f}' for x in s)}); {args.threads}-thread latency median {np.median(e):+.1f} %, "
              f"RMSPE {np.sqrt(np.mean(e ** 2)):.1f} %, within ±10 % {np.mean(np.abs(e) <= 10) * 100:.0f} %")


if __name__ == "__main__":
    main()
