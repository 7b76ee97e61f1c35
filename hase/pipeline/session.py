"""One profiled pipeline run end to end, as `hase pipeline run|simulate` does it.

Sampling overrides applied to the spec, an optional prediction made before the run (a prediction, not a fit),
the streamed run, the trace and CSV files (also written when a stage failed mid-run), the summary, and
predicted vs measured side by side. The library writes files and returns data; the CLI prints.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hase.errors import HaseError
from hase.pipeline.build import prepared
from hase.pipeline.chrome import pipeline_trace
from hase.pipeline.export import write_events_csv
from hase.pipeline.forecast import PipelinePrediction, compare, predict_pipeline, stage_predictors
from hase.pipeline.runner import PipelineFailedError, PipelineRun, stream
from hase.pipeline.spec import PipelineSpec
from hase.pipeline.summary import PipelineSummary, summarize, summary_dict
from hase.profiling.perfetto import write_chrome_trace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionOptions:
    """How `profile_pipeline` runs a pipeline; `None` sampling settings keep the spec's own."""

    warmup: int = 2  # warm-up runs per executor before the run
    trace: bool = True  # record trace events (off: throughput and latency only)
    hardware: bool = True  # backend profiling for hardware times (needs `trace`)
    hw_sample_every: int | None = None
    hw_sample_block: int | None = None
    hw_sample_warmup: int | None = None
    workdir: str | Path | None = None  # dummy models and ORT profiles (default: a temporary directory)
    trace_path: str | Path | None = None  # Chrome-trace / Perfetto JSON to write
    csv_path: str | Path | None = None  # every trace event as CSV
    predict_device: str | None = None  # device configuration whose predictor forecasts the stages first
    predictors_dir: str | Path | None = None  # predictors root (default: the shipped one)


@dataclass(frozen=True)
class PipelineSession:
    """A finished (or stopped) run with its summary, files written, and the prediction made before it.

    `error` is the mid-run failure, kept so that the caller can report the partial run before raising it.
    """

    run: PipelineRun
    summary: PipelineSummary
    prediction: PipelinePrediction | None = None
    comparison: pd.DataFrame | None = None  # predicted vs measured: figure, predicted, measured, error_pct, note
    error: PipelineFailedError | None = None
    files: dict[str, Path] = field(default_factory=dict)  # "trace" / "csv" -> path written

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: `summary_dict` with per-cycle rows, plus `predicted_vs_measured` when predicted."""
        out = summary_dict(self.summary, cycles=True)
        if self.comparison is not None:
            out["predicted_vs_measured"] = self.comparison.to_dict(orient="records")
        return out


def profile_pipeline(spec: PipelineSpec, batches: int, options: SessionOptions | None = None) -> PipelineSession:
    """Prepare, optionally predict, stream `batches` batches, write the requested files and summarize.

    Raises HaseError before anything runs for bad options, a bad spec, or a missing predictor; a stage that
    fails mid-run does not raise here: the session holds the partial run and the failure in `error`.
    """
    opts = options or SessionOptions()
    if not opts.trace and (opts.trace_path or opts.csv_path):
        raise HaseError("--trace and --csv need trace events: drop --no-trace-events")
    spec = with_sampling(spec, opts)
    predictors = stage_predictors(spec, opts.predict_device, opts.predictors_dir) if opts.predict_device else None
    prediction: PipelinePrediction | None = None
    error: PipelineFailedError | None = None
    with prepared(spec, opts.workdir, trace=opts.trace, hardware=opts.hardware, warmup=opts.warmup) as prep:
        if predictors:
            prediction = predict_pipeline(prep, predictors)  # before the run: a prediction, not a fit
        try:
            run = stream(prep, batches)
        except PipelineFailedError as exc:
            run, error = exc.run, exc
    files = write_outputs(run, opts.trace_path, opts.csv_path)
    summary = summarize(run)
    comparison = compare(prediction, summary) if prediction is not None else None
    return PipelineSession(run, summary, prediction, comparison, error, files)


def with_sampling(spec: PipelineSpec, options: SessionOptions) -> PipelineSpec:
    """The spec with the options' hardware-sampling overrides (checked by the spec itself)."""
    every, block, warmup = options.hw_sample_every, options.hw_sample_block, options.hw_sample_warmup
    if every is None and block is None and warmup is None:
        return spec
    return dataclasses.replace(spec, hw_sample_every=spec.hw_sample_every if every is None else every,
                               hw_sample_block=spec.hw_sample_block if block is None else block,
                               hw_sample_warmup=spec.hw_sample_warmup if warmup is None else warmup)


def write_outputs(run: PipelineRun, trace_path: str | Path | None = None,
                  csv_path: str | Path | None = None) -> dict[str, Path]:
    """Write the Chrome trace and/or the events CSV of a run; returns what was written."""
    files: dict[str, Path] = {}
    if trace_path:
        files["trace"] = write_chrome_trace(pipeline_trace(run), trace_path)
        log.info("trace written to %s (open at https://ui.perfetto.dev)", files["trace"])
    if csv_path:
        files["csv"] = write_events_csv(run, csv_path)
        log.info("events written to %s", files["csv"])
    return files
