"""Accuracy across hosts, from the committed host surveys alone (nothing is measured here).

For every device configuration, every source host and every surveyed target host: the source predictor's and the
adapted predictor's accuracy on the target's real models, as the target ran them (its survey's kernel graphs and
timings). Source hosts are the shipped predictor's own machine (the shipped predictor as it is) and each surveyed
host (the shipped predictor adapted to it from its survey); "adapted" moves that source to the target with the
target's survey, as `hase adapt --survey` does. The diagonal of a surveyed host is the shipped predictor adapted
to it (not adapted a second time): its real models were never in its transfer set. A threaded device (a one-thread
predictor moved to threads, `hase.predict.threaded`) is adapted with the survey's one-thread transfer kernels and
predicts the target's many-thread real models moved by the target host's shipped thread model (else the one of the
nearest core count; on the device's own host its own), as `hase predict --device cpu-mt` does there.

    python benchmarks/cross_host.py [--surveys benchmarks/hosts] [--device cpu-1t --device cpu-mt] [--models]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.predict.adapt import fit_adaptation
from hase.predict.bundle import PredictorBundle, load_bundle
from hase.predict.calibration import Calibration
from hase.predict.locate import find_predictor
from hase.predict.predictor import KernelPredictor
from hase.predict.survey import Survey, adapt_in_memory, kernel_device, load_survey, real_predictions
from hase.predict.thread_estimate import pick_thread_model
from hase.predict.threaded import is_threaded
from hase.predict.threads import ThreadModel


@dataclass(frozen=True)
class Source:
    """A predictor standing for one host: its name, forests and calibration."""

    host: str
    predictor: KernelPredictor
    calibration: Calibration


def target_threads(bundle: PredictorBundle, t: Survey, device: str) -> tuple[ThreadModel, int] | None:
    """For a threaded device, the thread model `hase predict` picks on the target host (the device's own on its own
    host, else the target's shipped one, else the nearest core count's; never a user file) and its thread count;
    else None."""
    if not is_threaded(bundle):
        return None
    model, _ = pick_thread_model(t.host, path=None, bundle=bundle, user=False)
    return model, t.devices[device].intra_op_threads or t.host.cores


def scores(rows: list[dict[str, object]]) -> dict[str, float]:
    """Share within ±10 %, RMSPE (%), median error (%), worst |error| (%), the truth's median pass spread (%)."""
    err = np.array([float(r["error_pct"]) for r in rows])  # type: ignore[arg-type]
    spread = np.array([float(r["truth_spread"]) for r in rows])  # type: ignore[arg-type]
    return {"n": len(err), "acc10": float(np.mean(np.abs(err) <= 10) * 100), "rmspe": float(np.sqrt(np.mean(err ** 2))),
            "median": float(np.median(err)), "worst": float(err[np.argmax(np.abs(err))]),
            "truth_spread": float(np.median(spread) * 100)}


def sources_for(device: str, surveys: list[Survey]) -> list[Source]:
    """The shipped predictor on its own machine, then the shipped predictor adapted to each surveyed host."""
    bundle = load_bundle(find_predictor(device, adapted=False).path)
    target = bundle.default_target
    host = bundle.manifest.host.digest if bundle.manifest.host is not None else "shipped"
    cal = bundle.manifest.target(target).calibration.calibration
    out = [Source(f"{host} (shipped)", bundle.predictors[target], cal)]
    for s in surveys:
        if device in s.devices:
            a = adapt_in_memory(bundle, kernel_device(bundle, s, f"survey of {s.digest}"))
            out.append(Source(s.digest, a.predictor, a.calibration))
    return out


def matrix(device: str, surveys: list[Survey], per_model: bool) -> pd.DataFrame:
    """One row per (source host, target host): the source's and the adapted predictor's scores on the target."""
    rows = []
    bundle = load_bundle(find_predictor(device, adapted=False).path)
    for src in sources_for(device, surveys):
        for t in surveys:
            if device not in t.devices:
                continue
            d, moved = t.devices[device], target_threads(bundle, t, device)
            before = real_predictions(src.predictor, src.calibration, d, moved)
            if src.host == t.digest:  # already adapted to this very survey: adapting again would fit it twice
                after = before
            else:
                transfer = kernel_device(bundle, t, f"survey of {t.digest}").transfer
                a = fit_adaptation(src.predictor, src.calibration, transfer)
                after = real_predictions(a.predictor, a.calibration, d, moved)
            b, c = scores(before), scores(after)
            rows.append({"device": device, "source": src.host, "target": t.digest, "n": b["n"],
                         "truth_spread_pct": b["truth_spread"], "others_cores": d.others_cores,
                         "source_acc10": b["acc10"], "source_rmspe": b["rmspe"],
                         "source_median": b["median"], "adapted_acc10": c["acc10"], "adapted_rmspe": c["rmspe"],
                         "adapted_median": c["median"], "adapted_worst": c["worst"]})
            if per_model:
                for x, y in zip(before, after, strict=True):
                    print(f"  {device} {src.host} -> {t.digest} {x['model']}: measured {x['measured_ms']:.3f} ms "
                          f"(spread {float(x['truth_spread']):.1%}), source {x['predicted_ms']:.3f} "  # type: ignore[arg-type]
                          f"({x['error_pct']:+.1f} %), adapted {y['predicted_ms']:.3f} ({y['error_pct']:+.1f} %)")
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the matrix for every surveyed host pair."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--surveys", default="benchmarks/hosts", help="folder of *.survey.json.gz (default %(default)s)")
    ap.add_argument("--device", action="append", default=None, help="device configuration (default cpu-1t, cpu-mt)")
    ap.add_argument("--models", action="store_true", help="also print every real model's errors")
    args = ap.parse_args(argv)
    files = sorted(Path(args.surveys).glob("*.survey.json.gz"))
    if not files:
        print(f"cross_host: no surveys in {args.surveys}: run `hase host survey` on a host first", file=sys.stderr)
        return 2
    try:
        surveys = [load_survey(f) for f in files]
        print(f"{len(surveys)} surveyed host(s): " + "; ".join(f"{s.digest} ({s.host.summary()}, {s.created_at})"
                                                             for s in surveys))
        if len(surveys) == 1:
            print("only one host has been surveyed: the matrix has one target column")
        table = pd.concat([matrix(d, surveys, args.models) for d in args.device or ["cpu-1t", "cpu-mt"]])
    except HaseError as exc:
        print(f"cross_host: error: {exc}", file=sys.stderr)
        return 2
    noisy = table[(table["truth_spread_pct"] > 5) | (table["others_cores"] > 0.1)]
    for r in noisy[["device", "target", "truth_spread_pct", "others_cores"]].drop_duplicates().itertuples():
        print(f"warning: {r.device} on {r.target}: the truth's median noise is {r.truth_spread_pct:.1f} % and other "
              f"processes kept {r.others_cores:.2f} cores busy: survey that host again when it is quiet",
              file=sys.stderr)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.1f}".format):
        print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
