"""`hase pipeline run|simulate`: stream batches through a multi-stage pipeline, trace and summarize it."""
from __future__ import annotations

import argparse
import json
import math

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hase import paths
from hase.commands.common import add_json_arg, add_predictors_arg, stdout_console
from hase.errors import HaseError
from hase.files import check_output_dir, check_output_file, removed_on_error
from hase.pipeline.config import load_pipeline_config, simulation_spec
from hase.pipeline.session import SessionOptions, profile_pipeline
from hase.pipeline.spec import (
    DEFAULT_HW_SAMPLE_BLOCK,
    DEFAULT_HW_SAMPLE_EVERY,
    DEFAULT_HW_SAMPLE_WARMUP,
    PipelineSpec,
)
from hase.pipeline.summary import PipelineSummary, headline_lines
from hase.tables import percent


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `pipeline run` and `pipeline simulate`."""
    p = sub.add_parser("pipeline", help="profile a multi-stage inference pipeline (streaming, data-parallel stages)",
                       description="Run batches through a pipeline of ONNX Runtime / OpenVINO stages with real "
                                   "overlap, record a trace event per inference, and report utilization, "
                                   "bubbles, concurrency penalty, cycle latency, throughput and the bottleneck.")
    psub = p.add_subparsers(dest="pipeline_command", metavar="SUBCOMMAND", required=True)
    run = psub.add_parser("run", help="run a pipeline defined in a TOML config",
                          description=f"Run the pipeline of CONFIG (see {paths.PIPELINE_EXAMPLE}). A config is "
                                      "code, like a Python import: a `function` stage imports the module it "
                                      "names, which runs that module's top-level code, so run only configs you "
                                      "trust. Only functions marked @hase.pipeline.stage_function in their own "
                                      "module are called; standard-library modules are never imported.")
    run.add_argument("config", help="pipeline config (TOML)")
    run.add_argument("--batches", type=int, default=None, help="batches to stream (default: the config's `batches`)")
    run.add_argument("--warmup", type=int, default=None, help="warm-up runs per executor before the run")
    _output_args(run)
    run.set_defaults(func=run_command)
    sim = psub.add_parser("simulate", help="run the built-in three-stage pipeline of dummy MatMul models",
                          description="prep -> embed (data-parallel over --dp devices) -> classify, all dummy "
                                      "MatMul+Relu chains, so the profiler runs without user models.")
    sim.add_argument("--batches", type=int, default=100, help="batches to stream")
    sim.add_argument("--batch", type=int, default=16, help="rows per batch")
    sim.add_argument("--width", type=int, default=512, help="features of every dummy layer")
    sim.add_argument("--layers", type=int, default=3, help="MatMul+Relu layers per stage (embed has twice as many)")
    sim.add_argument("--dp", default="cpu,cpu", help="comma-separated devices of the data-parallel stage, "
                                                     "e.g. cpu,ov:CPU")
    sim.add_argument("--devices", default="cpu,cpu", help="devices of the first and last stage, e.g. cpu,ov:CPU")
    sim.add_argument("--queue-depth", type=int, default=2, help="bounded queue capacity in front of each stage")
    sim.add_argument("--warmup", type=int, default=2, help="warm-up runs per executor before the run")
    _output_args(sim)
    sim.set_defaults(func=simulate_command)


def _output_args(p: argparse.ArgumentParser) -> None:
    """Options `run` and `simulate` share: output files, tracing and sampling, work directory, prediction."""
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome-trace / Perfetto JSON")
    p.add_argument("--csv", metavar="EVENTS.csv", help="write every trace event as CSV")
    add_json_arg(p, "print the summary as JSON instead of tables")
    p.add_argument("--no-trace-events", action="store_true",
                   help="tracing off: no events, no backend profiling (throughput and latency only)")
    p.add_argument("--no-hw-profile", action="store_true",
                   help="keep trace events but turn backend profiling off (no hardware times, no ORT profiler cost)")
    p.add_argument("--hw-sample-every", type=int, metavar="N", default=None,
                   help="hardware time (ORT profiler, OpenVINO PERF_COUNT) for one batch in N only, 1 = every run "
                        f"(default: the config's `hw_sample_every`, else {DEFAULT_HW_SAMPLE_EVERY})")
    p.add_argument("--hw-sample-block", type=int, metavar="M", default=None,
                   help="sample hardware time in blocks of M consecutive batches (default: the config's "
                        f"`hw_sample_block`, else {DEFAULT_HW_SAMPLE_BLOCK}); fewer session switches, less overhead")
    p.add_argument("--hw-sample-warmup", type=int, metavar="W", default=None,
                   help="runs at the start of each block whose hardware time is not kept (cold caches; default: "
                        f"the config's `hw_sample_warmup`, else {DEFAULT_HW_SAMPLE_WARMUP})")
    p.add_argument("--workdir", metavar="DIR", help="keep dummy models and ORT profiles here (default: temporary)")
    p.add_argument("--predict", metavar="DEVICE_CONFIG", default=None,
                   help="before running, predict every ONNX Runtime CPU stage with this trained predictor (e.g. "
                        f"{paths.DEFAULT_DEVICE}), then show predicted vs measured; stages on other devices are "
                        "measured only")
    add_predictors_arg(p)


def run_command(args: argparse.Namespace) -> int:
    """`hase pipeline run CONFIG`: the config's pipeline, batches and warm-up unless the options override them."""
    cfg = load_pipeline_config(args.config)
    batches = args.batches if args.batches is not None else cfg.batches
    warmup = args.warmup if args.warmup is not None else cfg.warmup
    return _profile(cfg.spec, batches, warmup, args)


def simulate_command(args: argparse.Namespace) -> int:
    """`hase pipeline simulate`: the built-in pipeline of dummy models."""
    spec = simulation_spec(batch=args.batch, width=args.width, layers=args.layers, dp_devices=_devices(args.dp),
                           devices=_devices(args.devices), queue_depth=args.queue_depth)
    return _profile(spec, args.batches, args.warmup, args)


def _devices(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def _profile(spec: PipelineSpec, batches: int, warmup: int, args: argparse.Namespace) -> int:
    """Run through `profile_pipeline`, print the summary (also after a mid-run failure, then raise it).

    Output paths are checked before anything runs; a failure before the run leaves no files in --workdir.
    """
    _check_outputs(args)
    if warmup < 0:
        raise HaseError(f"warm-up runs must be >= 0 (got {warmup})")
    options = SessionOptions(
        warmup=warmup, trace=not args.no_trace_events, hardware=not args.no_hw_profile,
        hw_sample_every=args.hw_sample_every, hw_sample_block=args.hw_sample_block,
        hw_sample_warmup=args.hw_sample_warmup, workdir=args.workdir, trace_path=args.trace, csv_path=args.csv,
        predict_device=args.predict, predictors_dir=args.predictors)
    if args.workdir:
        with removed_on_error(args.workdir):
            session = profile_pipeline(spec, batches, options)
    else:
        session = profile_pipeline(spec, batches, options)
    if args.json:
        print(json.dumps(session.to_dict(), indent=2, default=str))
    else:
        console = stdout_console()
        print_summary(session.summary, console)
        if session.comparison is not None:
            console.print(_table(f"predicted ({escape(args.predict)}) vs measured", session.comparison,
                                 COMPARISON_VIEW))
    if session.error is not None:
        raise session.error
    return 0


def _check_outputs(args: argparse.Namespace) -> None:
    """Fail before a minutes-long run, not after it, when an output path cannot be written."""
    for flag, path in (("--trace", args.trace), ("--csv", args.csv)):
        if path:
            check_output_file(path, flag)
    if args.workdir:
        check_output_dir(args.workdir, "--workdir")


def print_summary(s: PipelineSummary, console: Console) -> None:
    """Headline figures and the stage / track / device / data-parallel tables."""
    for line in headline_lines(s):
        console.print(line, markup=False)
    for title, df, columns in (("stages (ms)", s.stages, STAGE_VIEW), ("executors", s.tracks, TRACK_VIEW),
                               ("devices", s.devices, DEVICE_VIEW), ("data-parallel stages", s.data_parallel, DP_VIEW)):
        if len(df):
            console.print(_table(title, df, columns))


# column -> header of the terminal tables (the JSON and CSV outputs carry every column)
STAGE_VIEW = {"stage": "stage", "streams": "streams", "n": "n", "stage_ms": "mean", "stage_p95_ms": "p95",
              "per_stream_ms": "/stream", "wall_ms": "infer wall", "hw_ms": "hw", "hw_coverage": "hw cov",
              "penalty_ms": "wall-hw",
              "marshal_ms": "marshal"}
TRACK_VIEW = {"track": "executor", "n": "n", "wall_util": "busy", "hw_util": "hw util", "hw_coverage": "hw cov",
              "bubble_mean_ms": "bubble ms", "bubble_p50_ms": "p50", "bubble_p95_ms": "p95",
              "penalty_ms": "wall-hw ms"}
DEVICE_VIEW = {"device": "device", "tracks": "tracks", "n": "n", "busy_ms": "busy ms", "wall_util": "busy",
               "hw_ms": "hw ms measured", "hw_util": "hw util", "hw_coverage": "hw cov"}
DP_VIEW = {"stage": "stage", "part": "part", "device": "device", "n": "n", "mean_ms": "mean ms", "p95_ms": "p95 ms"}
COMPARISON_VIEW = {"figure": "figure", "predicted": "predicted", "measured": "measured", "error_pct": "error %",
                   "note": "note"}


def _table(title: str, df: pd.DataFrame, columns: dict[str, str]) -> Table:
    df = df[[c for c in columns if c in df.columns]]
    t = Table(title=title, title_justify="left")
    for col in df.columns:
        t.add_column(columns[col], justify="right" if pd.api.types.is_numeric_dtype(df[col]) else "left")
    for row in df.itertuples(index=False):
        t.add_row(*[_cell(v, c) for v, c in zip(row, df.columns, strict=True)])
    return t


def _cell(v: object, col: str) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return percent(v) if col.endswith(("_util", "_coverage")) else f"{v:.3f}"
    return escape(str(v))



