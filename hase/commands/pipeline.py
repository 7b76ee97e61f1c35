"""`hase pipeline run|simulate`: stream batches through a multi-stage pipeline, trace and summarize it."""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import math
import tempfile
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from hase.errors import HaseError
from hase.pipeline import (
    PipelineFailed,
    PipelineRun,
    PipelineSpec,
    load_pipeline_config,
    simulation_spec,
    summarize,
    summary_dict,
    write_chrome_trace,
    write_events_csv,
)
from hase.pipeline.build import prepare
from hase.pipeline.forecast import compare, predict_pipeline
from hase.pipeline.runner import stream
from hase.pipeline.spec import DEFAULT_HW_SAMPLE_BLOCK, DEFAULT_HW_SAMPLE_EVERY, DEFAULT_HW_SAMPLE_WARMUP
from hase.pipeline.summary import PipelineSummary, hw_line

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pipeline", help="profile a multi-stage inference pipeline (streaming, data-parallel stages)",
                       description="Run batches through a pipeline of ONNX Runtime / OpenVINO stages with real "
                                   "overlap, record a trace event per inference, and report utilization, "
                                   "bubbles, concurrency penalty, cycle latency, throughput and the bottleneck.")
    psub = p.add_subparsers(dest="pipeline_command", metavar="SUBCOMMAND", required=True)
    run = psub.add_parser("run", help="run a pipeline defined in a TOML config",
                          description="Run the pipeline of CONFIG (see configs/pipeline_example.toml).")
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
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome-trace / Perfetto JSON")
    p.add_argument("--csv", metavar="EVENTS.csv", help="write every trace event as CSV")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
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
                        "cpu-1t), then show predicted vs measured; stages on other devices are measured only")
    p.add_argument("--predictors", metavar="DIR", default=None, help="predictor directory (default: data/predictors)")


def run_command(args: argparse.Namespace) -> int:
    cfg = load_pipeline_config(args.config)
    batches = args.batches if args.batches is not None else cfg.batches
    return execute(cfg.spec, batches, args.warmup if args.warmup is not None else cfg.warmup, args)


def simulate_command(args: argparse.Namespace) -> int:
    spec = simulation_spec(batch=args.batch, width=args.width, layers=args.layers, dp_devices=_devices(args.dp),
                           devices=_devices(args.devices), queue_depth=args.queue_depth)
    return execute(spec, args.batches, args.warmup, args)


def _devices(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def execute(spec: PipelineSpec, batches: int, warmup: int, args: argparse.Namespace) -> int:
    """Run, write the requested files (also after a mid-run failure), print the summary; returns 0."""
    if args.no_trace_events and (args.trace or args.csv):
        raise HaseError("--trace and --csv need trace events: drop --no-trace-events")
    sampling = {k: v for k, v in (("hw_sample_every", args.hw_sample_every), ("hw_sample_block", args.hw_sample_block),
                                  ("hw_sample_warmup", args.hw_sample_warmup)) if v is not None}
    if sampling:
        spec = dataclasses.replace(spec, **sampling)
    failed: PipelineFailed | None = None
    prediction = None
    predictors = stage_predictors(spec, args.predict, args.predictors) if args.predict else None
    with tempfile.TemporaryDirectory(prefix="hase-pipeline-") as tmp:
        with prepare(spec, Path(args.workdir or tmp), trace=not args.no_trace_events,
                     hardware=not args.no_hw_profile, warmup=warmup) as prep:
            if predictors:
                prediction = predict_pipeline(prep, predictors)  # before the run: a prediction, not a fit
            try:
                run = stream(prep, batches)
            except PipelineFailed as exc:
                run, failed = exc.run, exc
    _write_outputs(run, args)
    summary = summarize(run)
    side_by_side = compare(prediction, summary) if prediction is not None else None
    if args.json:
        out = summary_dict(summary, cycles=True)
        if side_by_side is not None:
            out["predicted_vs_measured"] = side_by_side.to_dict(orient="records")
        print(json.dumps(out, indent=2, default=str))
    else:
        print_summary(summary, Console())
        if side_by_side is not None:
            Console().print(_table(f"predicted ({args.predict}) vs measured", side_by_side,
                                   {"figure": "figure", "predicted": "predicted", "measured": "measured",
                                    "error_pct": "error %", "note": "note"}))
    if failed is not None:
        raise failed
    return 0


def stage_predictors(spec: PipelineSpec, device_config: str, predictors_dir: str | None) -> dict:
    """One `model -> ms` callable per pipeline device: the trained predictor for ORT CPU devices, and
    "not predicted" (NaN) for devices no predictor describes (OpenVINO, CUDA without a CUDA predictor)."""
    from hase.predict.estimate import predict_model_latency
    from hase.predict.predictor import predictor_dir

    predictor_dir(device_config, predictors_dir)  # a missing predictor is an error before anything runs
    predict = functools.partial(predict_model_latency, device=device_config, predictors_dir=predictors_dir)
    unknown = lambda _path: math.nan  # noqa: E731
    return {ex.device: predict if ex.device == "cpu" else unknown for st in spec.stages for ex in st.executors}


def _write_outputs(run: PipelineRun, args: argparse.Namespace) -> None:
    if args.trace:
        log.info("trace written to %s (open at https://ui.perfetto.dev)", write_chrome_trace(run, args.trace))
    if args.csv:
        log.info("events written to %s", write_events_csv(run, args.csv))


def print_summary(s: PipelineSummary, console: Console) -> None:
    """Headline figures and the stage / track / device / data-parallel tables."""
    console.print(f"[bold]{s.name}[/]: {s.completed}/{s.batches} batches in {s.span_ms:.1f} ms — "
                  f"throughput [bold]{s.throughput_per_s:.1f}[/] batches/s ({s.rows_per_s:.0f} rows/s), "
                  f"end-to-end latency p50 {s.latency_p50_ms:.3f} ms / p95 {s.latency_p95_ms:.3f} ms")
    if s.traced:
        console.print(f"cycle latency (max stage per batch) mean {s.cycle_mean_ms:.3f} ms, p95 {s.cycle_p95_ms:.3f} "
                      f"ms — bottleneck [bold red]{s.bottleneck}[/] (slowest in {_pct(s.bottleneck_share)} of cycles)")
        console.print(hw_line(s))
    else:
        console.print("tracing off: per-stage figures need trace events")
    if s.dropped_events:
        console.print(f"[yellow]{s.dropped_events} events over the max_events budget were dropped[/]")
    if s.failure:
        console.print(f"[red]run stopped: {s.failure}[/]")
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


def _table(title: str, df: pd.DataFrame, columns: dict[str, str]) -> Table:
    df = df[[c for c in columns if c in df.columns]]
    t = Table(title=title, title_justify="left")
    for col in df.columns:
        t.add_column(columns[col], justify="right" if pd.api.types.is_numeric_dtype(df[col]) else "left")
    for row in df.itertuples(index=False):
        t.add_row(*[_cell(v, c) for v, c in zip(row, df.columns)])
    return t


def _cell(v: object, col: str) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return _pct(v) if col.endswith(("_util", "_coverage")) else f"{v:.3f}"
    return str(v)


def _pct(v: float) -> str:
    return "–" if v is None or math.isnan(v) else f"{v:.0%}"

