"""`hase predict MODEL.onnx ...`: predicted latency of models never measured, from the trained kernel predictors."""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hase.commands.common import (
    add_device_arg,
    add_input_shape_arg,
    add_json_arg,
    add_predictors_arg,
    add_target_arg,
)
from hase.errors import HaseError

if TYPE_CHECKING:  # pragma: no cover - the predictor stack loads only when a command runs
    from hase.predict.estimate import ModelEstimate, ModelResult
    from hase.predict.identity import UsedPredictor
    from hase.predict.metrics import Scores


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `predict` subcommand."""
    p = sub.add_parser("predict", help="predict a model's latency on a device from kernel predictors",
                       description="Split each model into ORT kernels, predict every kernel (batched per forest), "
                                   "sum, and calibrate: latency = a*sum + g*n_kernels + b. Kernels predicted by a "
                                   "fallback forest are listed; none is ever counted as 0 ms.")
    p.add_argument("models", nargs="+", metavar="MODEL", help=".onnx files or directories of them (batch mode)")
    add_device_arg(p, "device configuration whose predictor to use")
    add_predictors_arg(p)
    add_target_arg(p)
    add_input_shape_arg(p)
    p.add_argument("--top", type=int, default=10, help="how many of the slowest kernels to list")
    add_json_arg(p, "print JSON (one object per model, a list for several)")
    p.set_defaults(func=run)


def model_files(items: list[str]) -> list[Path]:
    """The .onnx files named, directories expanded (sorted); a path that does not exist is a HaseError."""
    files: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(p.glob("*.onnx"))
            if not found:
                raise HaseError(f"{p} holds no .onnx files")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise HaseError(f"model file not found: {p} (check the path)")
    return files


def run(args: argparse.Namespace) -> int:
    """Predict every model named; in batch mode a model that fails is listed and the exit status is 2."""
    from hase.kernels.graph import parse_input_shapes
    from hase.predict.estimate import ModelEstimate, PredictFailure, estimate_models
    from hase.predict.identity import open_predictor

    if args.top < 0:
        raise HaseError(f"--top must be >= 0 (got {args.top})")
    t0 = time.perf_counter()
    files = model_files(args.models)
    shapes = parse_input_shapes(args.input_shape)
    used = open_predictor(args.device, args.predictors, args.target)
    bundle = used.bundle
    load_s = time.perf_counter() - t0
    results = estimate_models(files, bundle, args.target, shapes)
    failures = [r for r in results if isinstance(r, PredictFailure)]
    if len(results) == 1 and failures:  # one model: its error is the command's error (one line, no warning)
        raise HaseError(failures[0].error)
    warn_host(used)  # beside predictions, which it is about
    if args.json:
        out = [r.to_dict(args.top) if isinstance(r, ModelEstimate) else r.to_dict() for r in results]
        for o in out:
            o.setdefault("timings_s", {})["load_predictor_s"] = load_s
            o["predictor"] = used.to_dict()
        print(json.dumps(out[0] if len(out) == 1 else out, indent=1, default=float))
    elif len(results) == 1 and isinstance(results[0], ModelEstimate):
        print_predictor(used)
        print_one(results[0], args.top, bundle.manifest.target(results[0].target).held_out)
    else:
        print_predictor(used)
        print_batch(results, time.perf_counter() - t0)
    return 2 if failures else 0


def print_predictor(used: UsedPredictor) -> None:
    """The predictor every figure below comes from: what it is, where it was found, how good it was held out."""
    from hase.predict.identity import describe

    Console(highlight=False, soft_wrap=True).print(f"predictor {describe(used.identity)}", markup=False)


def warn_host(used: UsedPredictor) -> None:
    """A warning on stderr (also with --json) for each way this host differs from the predictor's machine."""
    if used.mismatches:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"warning: this host differs from the machine predictor {used.identity.device!r} was trained on: "
            f"{'; '.join(used.mismatches)}. Its predictions describe that machine and may be off here; "
            f"train a predictor on this host with `make collect train` (see `hase predictors`)", markup=False)


def print_one(est: ModelEstimate, top: int, held_out: Scores) -> None:
    """One model: latency and interval, sum and calibration, per-op totals, top kernels, fallbacks."""
    c = Console()
    cal = est.calibration
    c.print(f"[bold]{escape(est.model)}[/] on [bold]{escape(est.device)}[/] ({est.n_kernels} kernels, "
            f"target {escape(est.target)})")
    c.print(f"predicted latency [bold]{est.latency_ms:.3f} ms[/]  (p10–p90 of the trees: {est.low_ms:.3f} – "
            f"{est.high_ms:.3f} ms)")
    c.print(f"Σ kernel {est.sum_ms:.3f} ms; calibration {escape(cal.name)}: α={cal.alpha:.4f}, β={cal.beta:.4f} ms, "
            f"γ={cal.gamma * 1e3:.2f} µs/kernel; held-out accuracy of this predictor: ±10 % {held_out.acc10:.0%}, "
            f"RMSPE {held_out.rmspe:.1f} %")
    ops = Table(title="per op type")
    for col in ("op type", "kernels", "Σ ms", "share"):
        ops.add_column(col, justify="left" if col == "op type" else "right")
    for r in est.by_op().itertuples():
        ops.add_row(escape(str(r.op_type)), str(r.n), f"{r.pred_ms:.3f}", f"{r.share:.0%}")
    c.print(ops)
    tk = Table(title=f"top {top} kernels by predicted time")
    for col in ("node", "op type", "ms", "predictor"):
        tk.add_column(col, justify="right" if col == "ms" else "left")
    for r in est.top(top).itertuples():
        tk.add_row(escape(str(r.node_name)[:60]), escape(str(r.op_type)), f"{r.pred_ms:.4f}",
                   escape(f"{r.key} ({r.source})"))
    c.print(tk)
    fb = est.fallback
    if len(fb):
        counts = fb.groupby(["op_type", "source"]).size().reset_index(name="n")
        c.print(f"[yellow]{len(fb)} kernels used a fallback forest[/] (no forest of their own): "
                + escape(", ".join(f"{r.op_type} x{r.n} -> {r.source}" for r in counts.itertuples())))
    else:
        c.print("every kernel was predicted by its own op type's forest")


def print_batch(results: Sequence[ModelResult], wall_s: float) -> None:
    """One row per model (failures included, with their reason)."""
    from hase.predict.estimate import PredictFailure

    c = Console()
    t = Table(title=f"{len(results)} models predicted in {wall_s:.1f} s")
    for col in ("model", "kernels", "Σ kernel ms", "predicted ms", "p10–p90 ms", "fallback"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for r in results:
        if isinstance(r, PredictFailure):
            t.add_row(escape(Path(r.model).name), "", "", "[red]error[/]", escape(r.error[:60]), "")
        else:
            t.add_row(escape(Path(r.model).name), str(r.n_kernels), f"{r.sum_ms:.3f}", f"{r.latency_ms:.3f}",
                      f"{r.low_ms:.3f}–{r.high_ms:.3f}", str(len(r.fallback)))
    c.print(t)
