"""Thread models judged on a host survey's real models, from the survey alone: the predicted two-thread speed-up
against the measured one (the one-thread predictor's own error divided out), and the two-thread latency's error.

A survey times its real models at one thread and at ORT's default threads in interleaved passes on a quiet host
(`hase host survey`) and keeps the kernel graph each ran, so a thread model fitted on spans of a busy minute can be
checked against it before any dev set is scored, with no model file at hand:

    python benchmarks/survey_threads.py --survey benchmarks/hosts/bd14ee861c62.survey.json.gz \
        --predictor data/predictors-own/cpu-1t --thread-model hase/predictors/threads/56e9708810e3.npz \
        --thread-model data/threads/bd14ee861c62.npz

Each model's measured latency is its quickest pass (`hase.predict.survey.RealModel.latency_ms`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from hase.errors import HaseError
from hase.predict.bundle import load_bundle
from hase.predict.survey import load_survey, real_predictions
from hase.predict.threads import load_thread_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--survey", required=True, help="a host survey (.survey.json.gz)")
    ap.add_argument("--predictor", required=True, help="a one-thread predictor folder (e.g. hase/predictors/cpu-1t)")
    ap.add_argument("--thread-model", action="append", required=True, help="a thread model .npz (repeatable)")
    ap.add_argument("--mt-device", default="cpu-mt", help="the survey's many-thread device configuration")
    args = ap.parse_args()
    survey = load_survey(args.survey)
    one_dev, many_dev = survey.device("cpu-1t"), survey.device(args.mt_device)
    threads = many_dev.intra_op_threads or survey.host.cores
    bundle = load_bundle(args.predictor)
    predictor = bundle.predictors[bundle.default_target]
    calibration = bundle.manifest.target(bundle.default_target).calibration.calibration
    one = {r["model"]: r for r in real_predictions(predictor, calibration, one_dev)}
    print(f"{len(one)} real models of {survey.digest} ({threads} threads), predictor {args.predictor}")
    for tm_path in args.thread_model:
        rows = real_predictions(predictor, calibration, many_dev, (load_thread_model(tm_path), threads))
        rows = [r for r in rows if r["model"] in one]
        speedup = np.array([(one[r["model"]]["predicted_ms"] / r["predicted_ms"])
                            / (one[r["model"]]["measured_ms"] / r["measured_ms"]) - 1 for r in rows]) * 100
        e = np.array([r["error_pct"] for r in rows])
        print(f"{Path(tm_path).name}: speed-up error median {np.median(speedup):+.1f} % "
              f"({' '.join(f'{x:+.0f}' for x in speedup)}); {threads}-thread latency median {np.median(e):+.1f} %, "
              f"RMSPE {np.sqrt(np.mean(e ** 2)):.1f} %, within ±10 % {np.mean(np.abs(e) <= 10) * 100:.0f} %")


if __name__ == "__main__":
    try:
        main()
    except HaseError as exc:
        sys.exit(f"survey_threads: error: {exc}")
