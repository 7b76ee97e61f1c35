"""`hase adapt --device cpu-1t [--budget-s 300] [--out DIR]`: move a trained predictor to this host in minutes."""
from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hase import paths
from hase.commands.common import add_device_arg, add_json_arg, add_predictors_arg, stderr_console, stdout_console
from hase.errors import HaseError
from hase.measure.collect import dir_sources
from hase.measure.types import ModelSource
from hase.predict.adapt import AdaptResult, adapt
from hase.predict.locate import check_not_shipped
from hase.sampler.config import read_zoo
from hase.zoo import ensure_zoo

EXPORTED = Path("tests/data/models")  # real exported models of a checkout (never the devset's: those judge it)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `adapt` subcommand."""
    p = sub.add_parser("adapt", help="adapt a trained predictor to this host from a few minutes of measurements",
                       description="Measure, within --budget-s, this host's speed signature and a transfer set "
                                   "(real exported models and the zoo's models and sampled blocks: one model of every "
                                   "family, smallest first, then the families the source predictor is most wrong "
                                   "about here), then write an adapted predictor: per-forest "
                                   "scale factors shrunk toward the global one, the calibration refitted on the "
                                   "measured models, this host's fingerprint and signature, the source recorded. "
                                   "It is written as <device>@<host digest> into the user directory (or --out), "
                                   "where `hase predict --device <device>` picks it on this host. Ctrl-C leaves "
                                   "nothing behind. See docs/host.md.")
    add_device_arg(p, "device configuration whose predictor to adapt")
    add_predictors_arg(p)
    p.add_argument("--budget-s", type=float, default=300.0, help="seconds of measuring (default %(default)g)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help=f"predictors root to write into (default: the user directory, {paths.USER_PREDICTORS_HELP})")
    p.add_argument("--models", metavar="DIR", action="append", default=None,
                   help="transfer models: every .onnx of DIR (repeatable; default: tests/data/models, then the zoo "
                        f"of {paths.ZOO_CONFIG} in {paths.ZOO_DIR}, built where missing)")
    add_json_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Adapt, then print what was written and the in-sample scores before and after."""
    if args.out is not None:
        check_not_shipped(args.out)
    sources = transfer_sources(args.models)
    log = stderr_console()
    result = adapt(args.device, sources, args.budget_s, args.out, args.predictors,
                   progress=lambda msg: log.print(f"adapt: {msg}", markup=False, highlight=False))
    if args.json:
        print(json.dumps(result_dict(result), indent=1, default=str))
    else:
        print_result(result)
    return 0


def transfer_sources(dirs: Sequence[str] | None) -> list[ModelSource]:
    """The transfer set in measuring order: the given directories, else the checkout's exported test models and the
    zoo (built where missing), its families taken in turn, smallest model first."""
    if dirs:
        return [s for d in dirs for s in dir_sources(d, Path(d).name)]
    out = dir_sources(EXPORTED) if EXPORTED.is_dir() else []
    zoo = Path(paths.ZOO_DIR) / Path(paths.ZOO_CONFIG).stem
    if not (zoo / "index.csv").is_file():
        if not Path(paths.ZOO_CONFIG).is_file():
            if not out:
                raise HaseError(f"no transfer models: neither {EXPORTED} nor {paths.ZOO_CONFIG} is here; give --models "
                                f"DIR (small .onnx models, not the ones you will judge the predictor on)")
            return out
        for _ in ensure_zoo(read_zoo(paths.ZOO_CONFIG), paths.ZOO_DIR):
            pass
    return out + zoo_order(zoo)


def zoo_order(zoo: Path) -> list[ModelSource]:
    """The zoo's models, one family after another in turn (round robin), each family's smallest first."""
    families: dict[str, list[tuple[int, ModelSource]]] = {}
    with (zoo / "index.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            src = ModelSource(row["name"], row["family"], zoo / row["file"])
            families.setdefault(row["family"], []).append((int(row.get("size_bytes") or 0), src))
    queues = [[s for _, s in sorted(v, key=lambda t: t[0])] for _, v in sorted(families.items())]
    order: list[ModelSource] = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def result_dict(r: AdaptResult) -> dict[str, Any]:
    """JSON of an adaptation."""
    return {"name": r.name, "out_dir": str(r.out_dir), "source": str(r.source), "target": r.target,
            "global_scale": r.global_scale, "scales": r.scales, "calibration_before": r.calibration_before.to_dict(),
            "calibration_after": r.calibration_after.to_dict(), "calibration_choice": r.calibration_choice,
            "n_models": r.n_models, "n_kernels": r.n_kernels,
            "in_sample": {"source": {"acc10": r.source_acc10, "rmspe": r.source_rmspe},
                          "adapted": {"acc10": r.adapted_acc10, "rmspe": r.adapted_rmspe}},
            "spent_s": r.spent_s, "skipped": list(r.skipped)}


def print_result(r: AdaptResult) -> None:
    """What was written, from what, and how it changed."""
    c = stdout_console(highlight=False, soft_wrap=True)
    c.print(f"adapted predictor {r.name} written to {r.out_dir} (from {r.source}, target {r.target}) in "
            f"{r.spent_s:.0f} s: {r.n_models} transfer models, {r.n_kernels} kernel measurements", markup=False)
    top = sorted(r.scales.items(), key=lambda kv: -kv[1]["n"])[:8]
    c.print(f"kernel scales: global ×{r.global_scale:.2f}; " + ", ".join(
        f"{k} ×{v['scale']:.2f} (n={int(v['n'])})" for k, v in top), markup=False)
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
