"""`hase adapt --device cpu-1t [--budget-s 300] [--out DIR]`: move a trained predictor to this host in minutes."""
from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from hase import paths
from hase.commands.common import add_device_arg, add_json_arg, add_predictors_arg, stderr_console, stdout_console
from hase.errors import HaseError
from hase.predict.adapt import BUDGET_S, AdaptResult, adapt, noise_text
from hase.predict.locate import check_not_shipped, find_predictor
from hase.predict.survey import adapt_from_survey, load_survey
from hase.sampler.transfer import transfer_sources


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `adapt` subcommand."""
    p = sub.add_parser("adapt", help="adapt a trained predictor to this host from a few minutes of measurements",
                       description="Measure, within --budget-s, this host's speed signature and a transfer set "
                                   "(real exported models and the zoo's models and sampled blocks: one model of every "
                                   "family, smallest first, then the families the source predictor is most wrong "
                                   "about here), then write an adapted predictor: a host map of the kernel "
                                   "predictions (a curve over their size, an offset per forest), the calibration "
                                   "refitted on the "
                                   "measured models, this host's fingerprint and signature, the source recorded. "
                                   "It is written as <device>@<host digest> into the user directory (or --out), "
                                   "where `hase predict --device <device>` picks it on this host. Ctrl-C leaves "
                                   "nothing behind. See docs/host.md.")
    add_device_arg(p, "device configuration whose predictor to adapt")
    add_predictors_arg(p)
    p.add_argument("--budget-s", type=float, default=BUDGET_S, help="seconds of measuring (default %(default)g)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help=f"predictors root to write into (default: the user directory, {paths.USER_PREDICTORS_HELP})")
    p.add_argument("--models", metavar="DIR", action="append", default=None,
                   help="transfer models: every .onnx of DIR (repeatable; default: the zoo of the config shipped "
                        f"with Hase, built where missing into {paths.ZOO_DIR}/ in a checkout, else the user cache)")
    p.add_argument("--survey", metavar="FILE", default=None,
                   help="adapt from a host survey's measurements (`hase host survey`) instead of measuring here; "
                        "written as <device>@<the surveyed host's digest>")
    add_json_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Adapt (from measurements made now, or from a survey's), then print what was written and the scores."""
    if args.out is not None:
        check_not_shipped(args.out)
    find_predictor(args.device, args.predictors, adapted=False)  # a wrong device fails before anything is built
    log = stderr_console()

    def say(msg: str) -> None:
        log.print(f"adapt: {msg}", markup=False, highlight=False)

    if args.survey is not None:
        if args.models:
            raise HaseError("--survey and --models both name a transfer set: give one (a survey holds its own)")
        result = adapt_from_survey(args.device, load_survey(args.survey), args.survey, args.out, args.predictors)
    else:
        t0 = time.perf_counter()
        sources = transfer_sources(args.models, say)
        result = adapt(args.device, sources, args.budget_s, args.out, args.predictors, progress=say,
                       started=t0)  # building the transfer set is part of the budget
    if args.json:
        print(json.dumps(result_dict(result), indent=1, default=str))
    else:
        print_result(result)
    return 0


def result_dict(r: AdaptResult) -> dict[str, Any]:
    """JSON of an adaptation."""
    return {"name": r.name, "out_dir": str(r.out_dir), "source": str(r.source), "target": r.target,
            "global_scale": r.global_scale, "scales": r.scales, "calibration_before": r.calibration_before.to_dict(),
            "calibration_after": r.calibration_after.to_dict(), "calibration_choice": r.calibration_choice,
            "n_models": r.n_models, "n_kernels": r.n_kernels, "n_repeated": r.n_repeated,
            "transfer_spread": r.transfer_spread if math.isfinite(r.transfer_spread) else None,
            "in_sample": {"source": {"acc10": r.source_acc10, "rmspe": r.source_rmspe},
                          "adapted": {"acc10": r.adapted_acc10, "rmspe": r.adapted_rmspe}},
            "spent_s": r.spent_s, "skipped": list(r.skipped)}


def print_result(r: AdaptResult) -> None:
    """What was written, from what, and how it changed."""
    c = stdout_console(highlight=False, soft_wrap=True)
    c.print(f"adapted predictor {r.name} written to {r.out_dir} (from {r.source}, target {r.target}) in "
            f"{r.spent_s:.0f} s: {r.n_models} transfer models, {r.n_kernels} kernel measurements; "
            f"{noise_text(r.transfer_spread, r.n_repeated)}", markup=False)
    top = sorted(r.scales.items(), key=lambda kv: -kv[1]["n"])[:8]
    c.print(f"kernel scales: global ×{r.global_scale:.2f}; by size {r.host_map.describe()}; forests beyond "
            "that: " + ", ".join(f"{k} ×{v['scale']:.2f} (n={int(v['n'])})" for k, v in top), markup=False)
    b, a = r.calibration_before, r.calibration_after
    c.print(f"calibration ({r.calibration_choice}): {b.describe()} → {a.describe()}", markup=False)
    c.print(f"on the measured transfer models (in-sample): ±10 % {r.source_acc10:.0%} → {r.adapted_acc10:.0%}, RMSPE "
            f"{r.source_rmspe:.1f} % → {r.adapted_rmspe:.1f} %; judge it on models it never saw "
            f"(benchmarks/bench_adapt.py)", markup=False)
    if r.adapted_rmspe > r.source_rmspe:
        stderr_console().print(f"warning: the adapted predictor fits the transfer models worse than its source (RMSPE "
                               f"{r.source_rmspe:.1f} % → {r.adapted_rmspe:.1f} %): the host was busy while it "
                               f"measured (rerun when it is quiet) or the source already fits this host (`hase host "
                               f"check --device {r.name.split('@')[0]}`); keep using the source then",
                               markup=False, soft_wrap=True)
    if r.skipped:
        c.print(f"skipped: {'; '.join(r.skipped[:5])}", markup=False)
