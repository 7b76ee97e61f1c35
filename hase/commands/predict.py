"""`hase predict MODEL.onnx ...`: predicted latency of models never measured, from the trained kernel predictors."""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape

from hase import paths
from hase.commands.common import (
    add_device_arg,
    add_input_shape_arg,
    add_json_arg,
    add_predictors_arg,
    add_target_arg,
    plural,
    stdout_console,
    titled_table,
)
from hase.errors import HaseError
from hase.kernels.shapes import parse_free_dims, parse_input_shapes
from hase.predict.bundle import manifest_ep_config, predictor_dir, read_manifest
from hase.predict.compare import compare_models
from hase.predict.estimate import KernelGraphs, ModelEstimate, PredictFailure, estimate_models
from hase.predict.identity import describe, open_predictor, threads_text
from hase.predict.noise import busy_note
from hase.runtime.robust import BlockPolicy

if TYPE_CHECKING:  # pragma: no cover - the predictor stack loads only when a command runs
    from hase.evaluate.measured import PredictionCheck
    from hase.predict.compare import Comparison
    from hase.predict.estimate import ModelEstimate, ModelResult
    from hase.predict.identity import UsedPredictor
    from hase.predict.metrics import Scores
    from hase.runtime.robust import BlockPolicy


BLOCKS, NOISE_PCT = 5, 10.0  # --measure: timed blocks, and the spread of their medians that marks a noisy host


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `predict` subcommand."""
    p = sub.add_parser("predict", help="predict a model's latency on a device from kernel predictors",
                       description="Split each model into ORT kernels, predict every kernel (batched per forest), "
                                   "sum, and calibrate: latency = a*sum + g*n_kernels + b. Kernels predicted by a "
                                   "fallback forest are listed; none is ever counted as 0 ms.")
    p.add_argument("models", nargs="+", metavar="MODEL", help=".onnx files or directories of them (batch mode)")
    add_device_arg(p, f"device configuration whose predictor to use (default {paths.DEFAULT_DEVICE}); with "
                      "--compare, one of the configurations to compare (repeatable; default: every installed one)",
                   repeatable=True)
    add_predictors_arg(p)
    add_target_arg(p)
    add_input_shape_arg(p)
    p.add_argument("--top", type=int, default=10, help="how many of the slowest kernels to list")
    p.add_argument("--compare", action="store_true",
                   help="predict each model with every installed predictor (user-trained and shipped, see `hase "
                        "predictors`), each in its own configuration (execution provider, threads, optimization "
                        "level: its own kernel graph), and rank them: which is fastest and by how much")
    th = p.add_argument_group("thread counts (--threads)")
    th.add_argument("--threads", default=None, metavar="N[,N...]",
                    help="predict each model at these intra-op thread counts (e.g. 1,2,4,8,16) from the one-thread "
                         "predictor (--device cpu-1t) and a thread model: each kernel's time at T threads = "
                         "t1*(s+(1-s)/T)+sigma*log2(T), s from the kernel's shape (hase.predict.threads)")
    th.add_argument("--thread-model", default=None, metavar="FILE",
                    help="the thread model (.npz) to use (default: the shipped one of this host, else of the host "
                         "with the nearest core count)")
    m = p.add_argument_group("checking a prediction (--measure)")
    m.add_argument("--measure", action="store_true",
                   help="also run each model here, in the predictor's configuration (execution provider, threads, "
                        "optimization level), and print predicted vs measured latency with the error, and the top "
                        "kernels' predicted vs in-model time (ORT profile). Measured latency is the minimum of the "
                        "block medians (warm-up, then --blocks blocks of IOBinding runs), with its spread")
    m.add_argument("--blocks", type=int, default=None, help=f"timed blocks per model (default {BLOCKS})")
    m.add_argument("--no-gate", dest="gate", action="store_false",
                   help="on a many-thread CPU device, time the models whether or not the host gives their threads "
                        "all its cores (default: wait for them; hase.runtime.gate)")
    m.add_argument("--noise-bound", type=float, default=None, metavar="PCT",
                   help=f"flag a measurement whose block medians differ by more than PCT %% (default {NOISE_PCT:g})")
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

    if args.top < 0:
        raise HaseError(f"--top must be >= 0 (got {args.top})")
    if args.compare:
        return run_compare(args)
    if args.threads is not None:
        return run_threads(args)
    if args.thread_model is not None:
        raise HaseError("--thread-model goes with --threads N[,N...]: add the thread counts to predict")
    policy = measure_policy(args)
    t0 = time.perf_counter()
    files = model_files(args.models)
    shapes, free = parse_input_shapes(args.input_shape), parse_free_dims(args.free_dim)
    device = one_device(args.device)
    ep = manifest_ep_config(read_manifest(predictor_dir(device, args.predictors)))
    with KernelGraphs(files, ep, shapes, free) as graphs:  # ORT builds them while the predictor loads
        used = open_predictor(device, args.predictors, args.target)
        bundle = used.bundle
        load_s = time.perf_counter() - t0
        estimates = estimate_models(files, bundle, args.target, shapes, free, graphs=graphs)
    results: Sequence[ModelResult | PredictionCheck] = estimates
    if policy is not None:

        from hase.evaluate.measured import check_models  # noqa: PLC0415 - measuring pulls pandas: plain predict stays light
        from hase.runtime.gate import gate_for  # noqa: PLC0415

        gate = gate_for(bundle.ep_config()) if args.gate else None
        results = check_models(estimates, bundle, shapes, free, policy=policy, top=args.top, gate=gate)
    failures = [r for r in results if isinstance(r, PredictFailure)]
    if len(results) == 1 and failures:  # one model: its error is the command's error (one line, no warning)
        raise HaseError(failures[0].error)
    warn_host(used)  # beside predictions, which it is about
    if args.json:
        out = [r.to_dict() if isinstance(r, PredictFailure) else r.to_dict(args.top) for r in results]
        for o in out:
            o.setdefault("timings_s", {})["load_predictor_s"] = load_s
            o["predictor"] = used.to_dict()
        print(json.dumps(out[0] if len(out) == 1 else out, indent=1, default=float))
        return 2 if failures else 0
    print_predictor(used)
    one = results[0] if len(results) == 1 else None
    if isinstance(one, ModelEstimate):
        print_one(one, args.top, bundle.manifest.target(one.target).held_out)
    elif one is not None and not isinstance(one, PredictFailure):  # a PredictionCheck (--measure)
        print_one(one.estimate, args.top, bundle.manifest.target(one.estimate.target).held_out)
        print_check(one)
    elif policy is not None:
        print_check_batch(results, time.perf_counter() - t0)
    else:
        print_batch(estimates, time.perf_counter() - t0)
    return 2 if failures else 0


def one_device(devices: list[str] | None) -> str:
    """The one `--device` of a prediction (default `paths.DEFAULT_DEVICE`); several need --compare."""
    if not devices:
        return paths.DEFAULT_DEVICE
    if len(devices) > 1:
        raise HaseError(f"--device names one predictor to use (got {devices}): add --compare to rank several")
    return devices[0]


def run_compare(args: argparse.Namespace) -> int:
    """`--compare`: every model predicted in every installed configuration, ranked; exit 2 when a model could not
    be predicted in any configuration (with one model, that is the command's error)."""


    if args.measure or args.blocks is not None or args.noise_bound is not None:
        raise HaseError("--compare ranks predictions and measures nothing: drop --measure (check one configuration "
                        "with `hase predict MODEL --device NAME --measure`)")
    t0 = time.perf_counter()
    files = model_files(args.models)
    shapes, free = parse_input_shapes(args.input_shape), parse_free_dims(args.free_dim)
    results = compare_models(files, args.device, args.predictors, args.target, shapes, free)
    failed = [r for r in results if not r.predicted]
    if len(results) == 1 and failed:
        raise HaseError(f"{results[0].model}: no configuration could predict it: "
                        + "; ".join(f"{r.config}: {r.error}" for r in failed[0].rows))
    if args.json:
        out = [r.to_dict() for r in results]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=1, default=float))
    else:
        for r in results:
            print_comparison(r)
        if len(results) > 1:
            stdout_console(highlight=False).print(f"{plural(len(results), 'model')} compared in "
                                                  f"{time.perf_counter() - t0:.1f} s")
    return 2 if failed else 0


def parse_threads(text: str) -> list[int]:
    """`--threads 1,2,4`: positive integers, comma-separated."""
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise HaseError(f"--threads takes comma-separated thread counts of at least 1 (e.g. 1,2,4,8), got {text!r}")
    return counts


def run_threads(args: argparse.Namespace) -> int:
    """`--threads`: every model's predicted latency at each thread count; exit 2 when a model failed."""
    from hase.predict.thread_estimate import estimate_threads, pick_thread_model  # noqa: PLC0415 - only this mode
    from hase.runtime.host import host_fingerprint  # noqa: PLC0415

    if args.compare or args.measure or args.blocks is not None or args.noise_bound is not None:
        raise HaseError("--threads predicts thread counts and measures nothing: drop --compare and --measure")
    counts = parse_threads(args.threads)
    files = model_files(args.models)
    shapes, free = parse_input_shapes(args.input_shape), parse_free_dims(args.free_dim)
    used = open_predictor(one_device(args.device), args.predictors, args.target)
    model, which = pick_thread_model(host_fingerprint(), args.thread_model, bundle=used.bundle)
    results, failed = [], []
    for f in files:
        try:
            results.append(estimate_threads(f, used.bundle, model, counts, which, args.target, shapes, free))
        except HaseError as err:
            if len(files) == 1:
                raise
            failed.append((f, str(err)))
    warn_host(used)
    if args.json:
        out = [r.to_dict() for r in results] + [{"model": str(f), "error": msg} for f, msg in failed]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=1, default=float))
        return 2 if failed else 0
    c = stdout_console(highlight=False, soft_wrap=True)
    print_predictor(used)
    fitted = max(model.threads)
    beyond = [n for n in counts if n > fitted]
    c.print(which + (f"; fitted at 1 and {', '.join(map(str, model.threads))} threads: "
                     f"{', '.join(map(str, beyond))} extrapolated" if beyond else ""), markup=False)
    t = titled_table("predicted latency (ms) by intra-op threads", box=box.SIMPLE_HEAD, pad_edge=False,
                     padding=(0, 1, 0, 0))
    t.add_column("model")
    for n in counts:
        t.add_column(f"{n} thr", justify="right")
    for r in results:
        t.add_row(escape(Path(r.model).name), *(f"{ms:.3f}" for ms in r.latency_ms))
    c.print(t)
    for f, msg in failed:
        c.print(f"[red]not predicted[/] {escape(str(f))}: {escape(msg)}")
    return 2 if failed else 0


def print_comparison(comp: Comparison) -> None:
    """One table per model, fastest configuration first (* marks a predictor whose machine differs from this host),
    then the one-sentence verdict and the host differences."""

    c = stdout_console(highlight=False, soft_wrap=True)
    t = titled_table(f"{escape(comp.model)}: predicted latency per configuration", box=box.SIMPLE_HEAD, pad_edge=False,
              padding=(0, 1, 0, 0))
    for col in ("config", "opt", "thr", "kernels", "ms", "p10–p90", "±10 %", "RMSPE", "×"):
        t.add_column(col, justify="left" if col in ("config", "opt") else "right")
    for r in comp.rows:
        ident, est = r.identity, r.estimate
        settings = [escape(r.config) + ("[yellow]*[/]" if r.mismatches else ""),
                    escape(ident.opt_level),
                    f"{ident.intra_op_threads}/{ident.inter_op_threads}"]
        accuracy = [f"{ident.acc10 * 100:.0f} %", f"{ident.rmspe:.1f} %"]
        if est is None:
            t.add_row(*settings, "", "[red]error[/]", escape(r.error[:30]), *accuracy, "")
        else:
            t.add_row(*settings, str(est.n_kernels), f"{est.latency_ms:.3f}", f"{est.low_ms:.3f}–{est.high_ms:.3f}",
                      *accuracy, f"{comp.ratio(r):.2f}")
    c.print(t)
    c.print("opt: ONNX Runtime optimization level; thr: intra-op/inter-op threads; ms: predicted latency, p10–p90 "
            "its interval; ±10 %, RMSPE: the predictor's held-out accuracy (leave-family-out); ×: latency over the "
            "fastest's", markup=False)
    if comp.predicted:
        c.print(comp.verdict(), markup=False)
    for r in comp.rows:
        if r.mismatches:
            c.print(f"[yellow]* {escape(r.config)}: this host differs from its machine[/]: "
                    f"{escape('; '.join(r.mismatches))}")
    for path, error in comp.unusable:
        c.print(f"[red]not compared[/] {escape(path)}: {escape(error)}")


def measure_policy(args: argparse.Namespace) -> BlockPolicy | None:
    """The robust timing of `--measure` (None without it); --blocks and --noise-bound need --measure."""
    if not args.measure:
        if args.blocks is not None or args.noise_bound is not None:
            raise HaseError("--blocks and --noise-bound set how --measure times a model: add --measure")
        return None

    blocks = BLOCKS if args.blocks is None else args.blocks
    noise_pct = NOISE_PCT if args.noise_bound is None else args.noise_bound
    if blocks < 1 or not noise_pct > 0:
        raise HaseError(f"--blocks must be >= 1 and --noise-bound > 0 (got {blocks} and {noise_pct:g})")
    return BlockPolicy(blocks=blocks, noise_bound=noise_pct / 100)


def print_predictor(used: UsedPredictor) -> None:
    """The predictor every figure below comes from: what it is, where it was found, how good it was held out."""


    stdout_console(highlight=False, soft_wrap=True).print(f"predictor {describe(used.identity)}", markup=False)


def warn_host(used: UsedPredictor) -> None:
    """One warning line on stderr (also with --json) naming how this host differs from the predictor's machine, and
    one when the predictor was trained on a mostly busy store."""
    from hase.runtime.sessions import provider_available  # noqa: PLC0415 - ORT loads only when a command runs
    from hase.runtime.types import EPConfig  # noqa: PLC0415

    if used.identity.is_cuda and not provider_available(EPConfig(name="cuda", ep="cuda")):
        # predicting a GPU from a CPU-only host is the point: not a mismatch to fix
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"note: predictor {used.identity.device!r} gives the latency on its own GPU machine "
            f"({used.identity.gpu_name or 'its GPU'}), not on this host; with no CUDA EP here its CUDA kernel graph is "
            f"this host's CPU graph mapped to CUDA kernels (docs/gpu.md)", markup=False)
    elif used.mismatches:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"warning: this host differs from the machine predictor {used.identity.device!r} was trained on: "
            f"{'; '.join(used.mismatches)}. Its predictions describe that machine and may be off here; "
            f"adapt it to this host with `hase adapt --device {used.identity.device}` (about 5 minutes) or train one "
            f"here with `make collect train` (see `hase predictors`)", markup=False)
    busy = busy_note(used.identity.busy_share)
    if busy:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"warning: predictor {used.identity.device!r} was {busy}", markup=False)


def print_one(est: ModelEstimate, top: int, held_out: Scores) -> None:
    """One model: latency and interval, sum and calibration, per-op totals, top kernels, fallbacks."""

    c = stdout_console()
    cal = est.calibration
    c.print(f"[bold]{escape(est.model)}[/] on [bold]{escape(est.device)}[/] ({plural(est.n_kernels, 'kernel')}, "
            f"target {escape(est.target)})")
    c.print(f"predicted latency [bold]{est.latency_ms:.3f} ms[/]  (p10–p90 of the trees: {est.low_ms:.3f} – "
            f"{est.high_ms:.3f} ms)")
    c.print(f"Σ kernel {est.sum_ms:.3f} ms; calibration {escape(cal.name)}: {cal.describe()}; "
            f"held-out accuracy of this predictor: ±10 % {held_out.acc10:.0%}, "
            f"RMSPE {held_out.rmspe:.1f} %")
    ops = titled_table("per op type")
    for col in ("op type", "kernels", "Σ ms", "share"):
        ops.add_column(col, justify="left" if col == "op type" else "right")
    for r in est.by_op():
        ops.add_row(escape(str(r.op_type)), str(r.n), f"{r.pred_ms:.3f}", f"{r.share:.0%}")
    c.print(ops)
    tk = titled_table(f"top {top} kernels by predicted time")
    for col in ("node", "op type", "ms", "predictor"):
        tk.add_column(col, justify="right" if col == "ms" else "left")
    for k in est.top(top):
        tk.add_row(escape(str(k.node_name)[:60]), escape(str(k.op_type)), f"{k.pred_ms:.4f}",
                   escape(f"{k.key} ({k.source})"))
    c.print(tk)
    fb = est.fallback
    if fb:
        c.print(f"[yellow]{plural(len(fb), 'kernel')} used a fallback forest[/] (no forest of their own): "
                + escape(", ".join(f"{op} x{n} -> {source}" for op, source, n in est.fallback_counts())))
    else:
        c.print("every kernel was predicted by its own op type's forest")
    cl = est.clamped
    if cl:
        c.print(f"[yellow]{plural(len(cl), 'kernel')} clamped to the physical band[/] (the forest's answer lay outside "
                f"its family's band around the kernel's roofline): "
                + escape(", ".join(f"{op} x{n} {side}" for op, side, n in est.clamp_counts())))
        for k in sorted(cl, key=lambda k: -k.pred_ms)[:top]:
            c.print(f"  {escape(str(k.node_name)[:60])} ({escape(k.op_type)}): {k.pred_ms:.4f} ms, roofline "
                    f"{k.roofline_ms:.4f} ms ({k.clamped})")


def print_batch(results: Sequence[ModelResult], wall_s: float) -> None:
    """One row per model (failures included, with their reason)."""


    c = stdout_console()
    t = titled_table(f"{plural(len(results), 'model')} predicted in {wall_s:.1f} s")
    for col in ("model", "kernels", "Σ kernel ms", "predicted ms", "p10–p90 ms", "fallback", "clamped"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for r in results:
        if isinstance(r, PredictFailure):
            t.add_row(escape(Path(r.model).name), "", "", "[red]error[/]", escape(r.error[:60]), "", "")
        else:
            t.add_row(escape(Path(r.model).name), str(r.n_kernels), f"{r.sum_ms:.3f}", f"{r.latency_ms:.3f}",
                      f"{r.low_ms:.3f}–{r.high_ms:.3f}", str(len(r.fallback)), str(len(r.clamped)))
    c.print(t)


def print_check(check: PredictionCheck) -> None:
    """Predicted vs measured (the robust statistic, its spread, the error) and the top kernels vs in-model time."""


    c = stdout_console(highlight=False)
    m, ep = check.measured, check.ep
    c.print(f"measured here: [bold]{m.latency_ms:.3f} ms[/] ({m.statistic}: {len(m.block_medians_ms)} blocks, "
            f"{m.n_runs} runs after {m.warmup} warm-up, IOBinding; all runs p10 {m.p10_ms:.3f} / median "
            f"{m.median_ms:.3f} / p90 {m.p90_ms:.3f} ms) with the predictor's configuration: {escape(ep.provider)}, "
            f"{threads_text(ep.intra_op_threads, ep.inter_op_threads)}, {escape(ep.opt_level)} "
            f"optimization; ORT {escape(str(check.device_meta.get('ort_version', '?')))} on "
            f"{escape(str(check.device_meta.get('cpu_model', '?')))}")
    c.print(f"prediction error [bold]{check.error_pct:+.1f} %[/] (predicted {check.estimate.latency_ms:.3f} ms)")
    medians = ", ".join(f"{v:.3f}" for v in m.block_medians_ms)
    if m.noisy:
        c.print(f"[yellow]noisy host: the block medians ({medians} ms) differ by {m.spread:.0%}, more than the "
                f"{m.noise_bound:.0%} bound[/]; the measurement (and the error) is less certain: rerun on a quiet "
                f"machine or with more --blocks")
    else:
        c.print(f"block medians {medians} ms (spread {m.spread:.1%}, within the {m.noise_bound:.0%} bound)")
    t = titled_table(f"top {len(check.kernels)} kernels: predicted vs in-model (ORT kernel_time, profiled run)")
    for col in ("node", "op type", "predicted ms", "in-model ms", "error"):
        t.add_column(col, justify="left" if col in ("node", "op type") else "right")
    for k in check.kernels:
        err = k.error_pct
        t.add_row(escape(k.node_name[:60]), escape(k.op_type), f"{k.pred_ms:.4f}",
                  "not profiled" if k.measured_ms is None else f"{k.measured_ms:.4f}",
                  "" if err is None else f"{err:+.0f} %")
    c.print(t)
    c.print(f"Σ kernel: predicted {check.estimate.sum_ms:.3f} ms, in-model kernel_time {check.kernel_time_sum_ms:.3f} "
            f"ms over {check.n_profiled_nodes} profiled nodes"
            + (f"; {check.n_unmatched} predicted nodes not in the profile (ORT named them differently)"
               if check.n_unmatched else ""))


def print_check_batch(results: Sequence[ModelResult | PredictionCheck], wall_s: float) -> None:
    """One row per model: predicted, measured (with its spread) and the error; failures with their reason."""
    from hase.evaluate.measured import PredictionCheck  # noqa: PLC0415 - only --measure prints checks (pandas)

    c = stdout_console(highlight=False)
    t = titled_table(f"{plural(len(results), 'model')} predicted and measured in {wall_s:.1f} s")
    for col in ("model", "kernels", "predicted ms", "measured ms", "p10–p90 ms", "error", "host"):
        t.add_column(col, justify="left" if col in ("model", "host") else "right")
    checks = [r for r in results if isinstance(r, PredictionCheck)]
    for r in results:
        if isinstance(r, PredictFailure):
            t.add_row(escape(Path(r.model).name), "", "", "[red]error[/]", "", "", escape(r.error[:60]))
        elif isinstance(r, PredictionCheck):
            m = r.measured
            t.add_row(escape(Path(r.estimate.model).name), str(r.estimate.n_kernels), f"{r.estimate.latency_ms:.3f}",
                      f"{m.latency_ms:.3f}", f"{m.p10_ms:.3f}–{m.p90_ms:.3f}", f"{r.error_pct:+.1f} %",
                      f"[yellow]noisy ({m.spread:.0%})[/]" if m.noisy else "quiet")
    c.print(t)
    if checks:
        errors = sorted(abs(r.error_pct) for r in checks)
        within = sum(1 for e in errors if e <= 10)
        c.print(f"{within} of {len(checks)} within ±10 %; median |error| {errors[len(errors) // 2]:.1f} %; "
                f"measured latency = {checks[0].measured.statistic}")
