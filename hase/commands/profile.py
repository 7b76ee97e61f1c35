"""`hase profile MODEL.onnx` / `hase profile --trace ORT_PROFILE.json`: where a measured run's time goes.

Runs the model under ONNX Runtime's profiler (or reads a profile ORT already wrote), prints the
decomposition of a run (median over runs), per-op-type totals, top nodes, provider placement and
findings, and writes a Perfetto trace with Hase-derived spans. A model's profile goes to a temporary folder
removed at the end unless --keep-profile DIR keeps it (with the trace beside it); the trace is written where
--out-trace says, else next to the kept profile, else (no --keep-profile) not at all. With --trace, the
trace goes next to that profile unless --out-trace says otherwise.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hase.commands.common import add_ep_args, add_input_shape_arg, add_json_arg, input_shapes, stdout_console
from hase.errors import HaseError
from hase.files import check_output_dir, check_output_file
from hase.profiling import decompose
from hase.profiling.gpu import attribute
from hase.profiling.gpu.records import GpuRecording
from hase.profiling.perfetto import to_chrome_trace, write_chrome_trace
from hase.profiling.run import ProfileAnalysis, ProfileResult, analyze, profile_folder, profile_model
from hase.runtime.profile import load_profile
from hase.runtime.types import EPConfig, Timing
from hase.tables import percent

TRACE_SUFFIX = ".hase_trace.json"
OP_ROWS = 15  # op types listed in the per-op table; the others are folded into one row


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `profile` subcommand."""
    p = sub.add_parser("profile", help="explain where a measured ONNX Runtime run's time goes",
                       description="Profile MODEL.onnx with ONNX Runtime's profiler (or read a profile with --trace) "
                                   "and decompose a run: before/after Execute, node timeline, kernel time, "
                                   "gaps; per-op totals, top nodes, provider placement, findings.")
    p.add_argument("model", nargs="?", help="path to an .onnx model to run and profile")
    p.add_argument("--trace", metavar="ORT_PROFILE.json", help="analyze this ORT profile instead of running a model")
    p.add_argument("--runs", type=int, default=10, help="profiled runs after warm-up (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up runs, profiled but not counted (default 3)")
    p.add_argument("--skip-runs", type=int, default=0,
                   help="with --trace: leading runs to leave out as warm-up (default 0)")
    add_ep_args(p)
    add_input_shape_arg(p)
    p.add_argument("--keep-profile", "--workdir", dest="keep_profile", metavar="DIR", default=None,
                   help="keep ORT's profile JSON in DIR, with the Perfetto trace beside it (default: a temporary "
                        "folder, removed at the end; nothing is written to the current directory)")
    p.add_argument("--out-trace", metavar="PATH",
                   help=f"write the Perfetto trace here (default: <profile stem>{TRACE_SUFFIX} next to the profile "
                        f"read with --trace or kept with --keep-profile; none when the profile is not kept)")
    p.add_argument("--top", type=int, default=10, help="how many top nodes to list (default 10)")
    p.add_argument("--cupti", choices=("auto", "on", "off"), default="auto",
                   help="with --ep cuda: record the GPU's own time per node with CUPTI (auto: when cupti-python is "
                        "installed; on: fail without it; off: never)")
    add_json_arg(p, "print one JSON object instead of tables")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Profile the model (or read --trace), decompose its runs, write the Perfetto trace, print the findings.

    Output paths are checked before anything runs; when the command fails, the profile it wrote and any
    folder it made are removed (a profile read with --trace is never touched).
    """
    _check_args(args)
    if args.out_trace:
        check_output_file(args.out_trace, "--out-trace")
    if args.trace:
        profile_path = Path(args.trace)
        trace_path = _trace_path(args, profile_path)
        check_output_file(trace_path, "the trace next to --trace (choose one with --out-trace)")
        _analyze_and_report(args, load_profile(profile_path), profile_path, trace_path, args.skip_runs, None, {})
        return 0
    if args.cupti == "on" and args.ep != "cuda":
        raise HaseError("--cupti on records GPU activity: use it with --ep cuda")
    if args.keep_profile:
        check_output_dir(args.keep_profile, "--keep-profile")
    with _profile_folder(args.keep_profile, Path(args.model).stem) as folder:
        result = _profile(args, folder)
        context = {"model": str(args.model), "metadata": result.metadata}
        kept = result.profile_path if args.keep_profile else None
        out_trace = _trace_path(args, kept) if kept or args.out_trace else None
        _analyze_and_report(args, result.events, kept, out_trace, result.skip_runs, result.wall, context,
                            gpu=result.gpu)
    return 0


@contextmanager
def _profile_folder(keep: str | None, stem: str) -> Iterator[Path]:
    """Where ORT writes the profile: `keep` (kept; on failure what was written there goes), else a temporary
    folder removed when the command ends, whatever the outcome."""
    if keep:
        with profile_folder(keep, stem) as folder:
            yield folder
    else:
        with tempfile.TemporaryDirectory(prefix="hase_profile_") as tmp:
            yield Path(tmp)


def _check_args(args: argparse.Namespace) -> None:
    if bool(args.model) == bool(args.trace):
        raise HaseError("give either MODEL.onnx to run or --trace ORT_PROFILE.json to read (exactly one)")
    if args.skip_runs and not args.trace:
        raise HaseError("--skip-runs applies to --trace; when running a model, use --warmup "
                        "(warm-up runs are profiled but skipped)")
    for flag, value in (("--skip-runs", args.skip_runs), ("--top", args.top), ("--threads", args.threads)):
        if value < 0:
            raise HaseError(f"{flag} must be >= 0 (got {value})")


def _trace_path(args: argparse.Namespace, profile_path: Path | None) -> Path:
    """--out-trace, else `<profile stem>.hase_trace.json` next to the profile."""
    if args.out_trace:
        return Path(args.out_trace)
    assert profile_path is not None, "no --out-trace and no profile to put the trace beside"
    return profile_path.with_name(profile_path.stem + TRACE_SUFFIX)


def _analyze_and_report(args: argparse.Namespace, events: pd.DataFrame, profile_path: Path | None,
                        out_trace: Path | None, skip: int, wall: Timing | None, context: dict[str, Any],
                        gpu: GpuRecording | None = None) -> None:
    """Analyze, write the trace when there is a path for it, print (profile/trace None: not kept)."""
    analysis = analyze(events, skip_runs=skip, top_n=args.top, gpu=gpu)
    if out_trace is not None:
        write_chrome_trace(to_chrome_trace(events, gpu=analysis.gpu), out_trace)
    if args.json:
        print(json.dumps(_report(analysis, profile_path, out_trace, wall, context), allow_nan=False))
    else:
        _print(stdout_console(), analysis, profile_path, out_trace, wall, context)


def _profile(args: argparse.Namespace, folder: Path) -> ProfileResult:
    ep = EPConfig(name=args.ep, ep=args.ep, intra_op_threads=args.threads, opt_level=args.opt_level)
    cupti = {"on": True, "off": False}.get(args.cupti)
    return profile_model(args.model, ep, runs=args.runs, warmup=args.warmup,
                         input_shapes=input_shapes(args, args.model), workdir=folder, cupti=cupti)


# ---------------------------------------------------------------- JSON


def _report(a: ProfileAnalysis, profile: Path | None, trace: Path | None, wall: Timing | None,
            context: dict[str, Any]) -> dict[str, Any]:
    """One JSON-able object: numbers as numbers (NaN -> null), µs unless a key says otherwise; `profile` and
    `trace` are null when not kept."""
    report: dict[str, Any] = _clean({
        **context,
        "profile": None if profile is None else str(profile), "trace": None if trace is None else str(trace),
        "skip_runs": a.skip_runs,
        "n_runs": int(a.summary[decompose.N_RUNS]),
        "wall_ms": None if wall is None else {"median": wall.median_ms, "p10": wall.p10_ms, "p90": wall.p90_ms,
                                              "n": wall.n},
        "decomposition_us": {k: a.summary[k] for k in decompose.DECOMPOSITION_COLUMNS if k != decompose.RUN_ID},
        "decomposition_per_run": a.per_run.to_dict("records"),
        "op_types": a.op_types.to_dict("records"),
        "op_types_kernel_time_us": float(a.op_types[decompose.KERNEL_TIME_US].sum()),
        "op_types_note": a.op_types_note,
        "top_nodes": a.top.to_dict("records"),
        "providers": a.providers.to_dict("records"),
        "findings": a.findings,
        "gpu": None if a.gpu is None else {
            "verdict": dataclasses.asdict(a.gpu.verdict), "nodes": a.gpu.nodes.to_dict("records"),
            "runs": a.gpu.runs.to_dict("records")},
    })
    return report


def _clean(value: Any) -> Any:
    """numpy scalars -> Python numbers, NaN -> None, recursively."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ---------------------------------------------------------------- terminal


def _print(console: Console, a: ProfileAnalysis, profile: Path | None, trace: Path | None, wall: Timing | None,
           context: dict[str, Any]) -> None:
    meta = context.get("metadata", {})
    where = f" on {meta['execution_provider']} ({meta['intra_op_threads']} intra-op threads, " \
            f"opt {meta['opt_level']})" if meta else ""
    source = context.get("model", str(profile))
    console.print(f"[bold]{escape(source)}[/bold]{where}: median of {int(a.summary[decompose.N_RUNS])} runs "
                  f"(skipped {a.skip_runs} warm-up)")
    console.print(_decomposition_table(a.summary, wall))
    provider = [("provider", decompose.PROVIDER, str)] if len(a.providers) > 1 else []
    console.print(_frame_table("Per op type (sum of per-node medians)", _op_rows(a.op_types, OP_ROWS), [
        ("op type", decompose.OP_TYPE, str), *provider, ("nodes", decompose.N_NODES, _count),
        ("kernel ms", decompose.KERNEL_TIME_US, _ms),
        ("span ms", decompose.SPAN_US, _ms), ("share", decompose.KERNEL_TIME_SHARE, _share)], footer_rows=1))
    console.print(a.op_types_note, markup=False, style="dim")
    console.print(_frame_table(f"Top {len(a.top)} nodes by span", a.top, [
        ("node", decompose.NODE_NAME, _tail), ("op type", decompose.OP_TYPE, str), *provider,
        ("span ms", decompose.SPAN_US, _ms),
        ("kernel ms", decompose.KERNEL_TIME_US, _ms), ("share", decompose.KERNEL_TIME_SHARE, _share)]))
    providers = _frame_table("Providers", a.providers, [
        ("provider", decompose.PROVIDER, str), ("nodes", decompose.N_NODES, _count),
        ("kernel ms", decompose.KERNEL_TIME_US, _ms),
        ("share", decompose.KERNEL_TIME_SHARE, _share)])
    providers.caption = f"Memcpy nodes per run: {int(a.summary[decompose.N_MEMCPY_NODES])}"
    console.print(providers)
    if a.gpu is not None:
        console.print(_gpu_table(a.gpu, len(a.top)))
    elif meta.get("execution_provider") == "CUDAExecutionProvider":
        console.print("GPU time per node: not recorded (needs cupti-python: `pip install hase[gpu]`)", markup=False)
    if a.findings:
        console.print("[bold]Findings[/bold]")
        for finding in a.findings:
            console.print(f"  • {finding}", markup=False)
    if profile is None:
        console.print("profile: not kept (--keep-profile DIR keeps it, with the trace beside it)", markup=False)
    else:
        console.print(f"profile: {profile}", markup=False)
    if trace is None:
        console.print("trace:   not written (--out-trace PATH or --keep-profile DIR writes it)", markup=False)
    else:
        console.print(f"trace:   {trace}  (open in https://ui.perfetto.dev)", markup=False)


def _gpu_table(gpu: attribute.GpuAttribution, n: int) -> Table:
    """The top `n` nodes by GPU busy time (CUPTI), with the run's GPU busy/idle and the verdict as caption."""
    table = _frame_table(f"Top {min(n, len(gpu.nodes))} nodes by GPU time (CUPTI, median over runs)",
                         gpu.nodes.head(n), [
        ("node", decompose.NODE_NAME, _tail), ("op type", decompose.OP_TYPE, str),
        ("GPU busy ms", attribute.GPU_BUSY_US, _ms),
        ("GPU span ms", attribute.GPU_SPAN_US, _ms), ("launch ms", attribute.LAUNCH_US, _ms),
        ("queue ms", attribute.QUEUE_US, _ms),
        ("GPU ops", attribute.N_ACTIVITIES, _count)])
    v = gpu.verdict
    table.caption = (f"GPU busy {v.gpu_busy_us / 1e3:.3f} ms, idle {v.gpu_idle_us / 1e3:.3f} ms of model_run "
                     f"{v.model_run_us / 1e3:.3f} ms; {v.text()}")
    return table


def _decomposition_table(summary: pd.Series, wall: Timing | None) -> Table:
    table = Table(title="Where a model_run's time goes (median over runs)")
    for col in ("", "ms", "% of model_run", "meaning"):
        table.add_column(col, justify="right" if col in ("ms", "% of model_run") else "left")
    run = float(summary[decompose.MODEL_RUN_US])
    for key, (label, meaning) in decompose.METRICS.items():
        value = float(summary[key])
        if key == decompose.NODE_OVERLAP_US and not value:
            continue
        share = _share(value / run) if run > 0 and math.isfinite(value) else ""
        table.add_row(label, _ms(value), share, meaning)
    if wall is not None:
        table.add_row("session.run wall clock", f"{wall.median_ms:.3f}", "",
                      f"perf_counter around session.run, profiler on (p10 {wall.p10_ms:.3f}, "
                      f"p90 {wall.p90_ms:.3f}, n={wall.n})")
    return table


def _op_rows(op_types: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first `n` rows, the rest folded into one "(k more)" row, and a "total" row: the table shows its sum."""
    shown = op_types.head(n).copy()
    cols = [decompose.N_NODES, decompose.KERNEL_TIME_US, decompose.SPAN_US, decompose.KERNEL_TIME_SHARE]
    extra: list[dict[str, Any]] = []
    if len(op_types) > n:
        rest = op_types.iloc[n:]
        extra.append({decompose.OP_TYPE: f"({len(rest)} more)", decompose.PROVIDER: "",
                      **{c: rest[c].sum() for c in cols}})
    extra.append({decompose.OP_TYPE: "total", decompose.PROVIDER: "", **{c: op_types[c].sum() for c in cols}})
    return pd.concat([shown, pd.DataFrame(extra)], ignore_index=True)


def _frame_table(title: str, df: pd.DataFrame, columns: list[tuple[str, str, Any]], footer_rows: int = 0) -> Table:
    """A table of `df`'s `columns` (header, column, formatter); the last `footer_rows` rows set off by a rule."""
    table = Table(title=title)
    for header, _, fmt in columns:
        text = fmt in (str, _tail)
        table.add_column(header, justify="left" if text else "right", overflow="fold")
    records = df.to_dict("records")
    for i, row in enumerate(records):
        table.add_row(*(Text(fmt(row[col])) for _, col, fmt in columns),
                      end_section=footer_rows > 0 and i == len(records) - footer_rows - 1)
    return table


def _tail(name: str, width: int = 32) -> str:
    """The end of a long node name, where exported names keep what tells nodes apart."""
    return name if len(name) <= width else "…" + name[-(width - 1):]


def _ms(us: float) -> str:
    return f"{us / 1e3:.3f}" if math.isfinite(us) else "n/a"


def _count(n: float) -> str:
    return str(int(n))


def _share(frac: float) -> str:
    return percent(frac, 1)
