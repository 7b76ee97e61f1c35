"""The summary of a pipeline run: per-stage table, bottleneck, cycle latency, throughput, plus JSON and text.

Built from `hase.pipeline.analysis`; the library returns data and strings, the CLI prints them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hase.pipeline import analysis, schema
from hase.pipeline.runner import PipelineRun


@dataclass(frozen=True)
class PipelineSummary:
    """Every reported figure of one run (times in ms, utilizations 0..1; NaN where not measured)."""

    name: str
    batches: int
    completed: int
    traced: bool
    span_ms: float
    throughput_per_s: float
    rows_per_s: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p95_ms: float
    cycle_mean_ms: float
    cycle_p50_ms: float
    cycle_p95_ms: float
    bottleneck: str | None
    bottleneck_share: float
    stages: pd.DataFrame
    tracks: pd.DataFrame
    devices: pd.DataFrame
    data_parallel: pd.DataFrame
    cycles: pd.DataFrame
    dropped_events: int = 0
    failure: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    hw_coverage: float = float("nan")  # share of backend (non-host) inferences that have a hardware time


def stage_table(events: pd.DataFrame, times: pd.DataFrame, streams: dict[str, int]) -> pd.DataFrame:
    """Per stage: stage time (mean/p50/p95), time per stream, and the mean inference wall/HW/penalty split.

    `wall_ms` is the mean over all inferences; `hw_ms` and `penalty_ms` (wall - HW) over the inferences with a
    HW time only (`hw_coverage` of them), so `penalty_ms` need not equal `wall_ms - hw_ms` when sampled.
    """
    infer = events[events[schema.KIND] == schema.INFER]
    rows = []
    for (_, key), g in times.groupby([schema.STAGE_INDEX, schema.STAGE], sort=True):
        stage = str(key)
        e = infer[infer[schema.STAGE] == stage]
        p50, p95 = np.percentile(g[schema.STAGE_MS], [50, 95])
        n_streams = streams.get(stage, 1)
        rows.append({
            schema.STAGE_INDEX: int(g[schema.STAGE_INDEX].to_numpy()[0]), schema.STAGE: stage,
            schema.STREAMS: n_streams, schema.N: len(g),
            schema.STAGE_MS: float(g[schema.STAGE_MS].mean()), schema.STAGE_P50_MS: float(p50),
            schema.STAGE_P95_MS: float(p95),
            schema.PER_STREAM_MS: float(g[schema.STAGE_MS].mean()) / n_streams,
            schema.WALL_MS: _mean_ms(e[schema.DUR_NS]), schema.HW_MS: _mean_ms(e[schema.HW_NS]),
            schema.HW_COVERAGE: float(e[schema.HW_NS].notna().mean()) if len(e) else float("nan"),
            schema.PENALTY_MS: _mean_ms(e[schema.DUR_NS] - e[schema.HW_NS]),
            schema.MARSHAL_MS: _mean_ms(e[schema.MARSHAL_NS]),
            schema.SUBMIT_MS: _mean_ms(e[schema.SUBMIT_NS]), schema.WAIT_MS: _mean_ms(e[schema.WAIT_NS]),
        })
    return pd.DataFrame(rows,
                        columns=[schema.STAGE_INDEX, schema.STAGE, schema.STREAMS, schema.N, schema.STAGE_MS,
                                 schema.STAGE_P50_MS,
                                       schema.STAGE_P95_MS, schema.PER_STREAM_MS, schema.WALL_MS, schema.HW_MS,
                                       schema.HW_COVERAGE,
                                       schema.PENALTY_MS,
                                       schema.MARSHAL_MS, schema.SUBMIT_MS, schema.WAIT_MS])


def _mean_ms(values: pd.Series) -> float:
    v = values.dropna()
    return float(v.mean()) / analysis.MS if len(v) else float("nan")


def summarize(run: PipelineRun) -> PipelineSummary:
    """All tables and headline figures of a run (tables are empty when tracing was off)."""
    ev = run.events
    span = analysis.wall_span_ns(ev) if len(ev) else 0
    times = analysis.stage_times(ev)
    cycles = analysis.cycle_table(times, [s.name for s in run.spec.stages]) if len(times) else pd.DataFrame()
    stages = stage_table(ev, times, {s.name: s.streams for s in run.spec.stages})
    bottleneck, share = _bottleneck(stages, cycles)
    lat = (run.exit_ns - run.enter_ns)[(run.exit_ns >= 0) & (run.enter_ns >= 0)] / analysis.MS
    cyc = cycles[schema.CYCLE_MS].to_numpy() if len(cycles) else np.empty(0)
    return PipelineSummary(
        name=run.spec.name, batches=run.batches, completed=run.completed, traced=run.traced,
        span_ms=run.span_ns / analysis.MS, throughput_per_s=run.throughput_per_s,
        rows_per_s=run.throughput_per_s * run.spec.batch,
        latency_mean_ms=_mean(lat), latency_p50_ms=_percentile(lat, 50), latency_p95_ms=_percentile(lat, 95),
        cycle_mean_ms=_mean(cyc), cycle_p50_ms=_percentile(cyc, 50), cycle_p95_ms=_percentile(cyc, 95),
        bottleneck=bottleneck, bottleneck_share=share, stages=stages,
        tracks=analysis.track_table(ev, span) if len(ev) else pd.DataFrame(),
        devices=analysis.device_table(ev, span) if len(ev) else pd.DataFrame(),
        data_parallel=analysis.data_parallel_table(ev) if len(ev) else pd.DataFrame(), cycles=cycles,
        dropped_events=run.dropped_events, metadata=run.metadata, hw_coverage=hw_coverage(ev),
        failure=None if run.failure is None else f"stage {run.failure.stage!r} batch {run.failure.batch_id}: "
                                                 f"{run.failure.error}",
    )


def hw_coverage(events: pd.DataFrame) -> float:
    """Share of inferences on backend devices (not `host`) that have a hardware time; NaN without any."""
    if events.empty:
        return float("nan")
    infer = events[(events[schema.KIND] == schema.INFER) & (events[schema.DEVICE] != "host")]
    return float(infer[schema.HW_NS].notna().mean()) if len(infer) else float("nan")


def _bottleneck(stages: pd.DataFrame, cycles: pd.DataFrame) -> tuple[str | None, float]:
    """The stage with the largest mean time per stream, and the share of cycles it was the slowest in."""
    if stages.empty:
        return None, float("nan")
    name = str(stages[schema.STAGE].iat[int(np.nanargmax(stages[schema.PER_STREAM_MS].to_numpy()))])
    share = float((cycles[schema.BOTTLENECK] == name).mean()) if len(cycles) else float("nan")
    return name, share


def _mean(a: np.ndarray) -> float:
    return float(a.mean()) if a.size else float("nan")


def _percentile(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else float("nan")


def hw_line(s: PipelineSummary) -> str:
    """One line saying how much of the run has hardware time, and how it was sampled."""
    if not s.metadata.get("hw_profile", True):
        return "hardware profiling was off: no hardware times"
    if math.isnan(s.hw_coverage):
        return "no backend inferences: no hardware times"
    k, m, w = (s.metadata.get(f"hw_sample_{key}", d) for key, d in (("every", 1), ("block", 1), ("warmup", 0)))
    how = "every run" if k == 1 else (f"sampled: one batch in {k}" + (f", blocks of {m}" if m > 1 else "")
                                      + (f", first {w} of each not kept" if w else ""))
    return (f"hardware time for {s.hw_coverage:.0%} of backend inferences ({how}); HW utilization and "
            f"wall-HW penalty are computed over those")


HEADLINE = ("name", "batches", "completed", "traced", "span_ms", "throughput_per_s", "rows_per_s",
            "latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "cycle_mean_ms", "cycle_p50_ms",
            "cycle_p95_ms", "bottleneck", "bottleneck_share", "hw_coverage", "dropped_events", "failure")
TABLES = ("stages", "tracks", "devices", "data_parallel")


def summary_dict(summary: PipelineSummary, *, cycles: bool = False) -> dict[str, Any]:
    """JSON-ready dict: headline figures, the tables as lists of records (NaN -> null), run metadata."""
    out: dict[str, Any] = {k: _json_value(getattr(summary, k)) for k in HEADLINE}
    for name in TABLES + (("cycles",) if cycles else ()):
        df = getattr(summary, name)
        out[name] = [{k: _json_value(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
    out["metadata"] = summary.metadata
    return out


def _json_value(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def headline_lines(s: PipelineSummary) -> list[str]:
    """The headline figures as plain lines: batches, throughput, latency, cycle, bottleneck, coverage, problems."""
    lines = [f"pipeline {s.name}: {s.completed}/{s.batches} batches in {s.span_ms:.1f} ms",
             f"throughput {s.throughput_per_s:.1f} batches/s ({s.rows_per_s:.0f} rows/s); end-to-end latency "
             f"mean {s.latency_mean_ms:.3f} / p50 {s.latency_p50_ms:.3f} / p95 {s.latency_p95_ms:.3f} ms"]
    if s.traced:
        lines.append(f"cycle latency (max stage per batch) mean {s.cycle_mean_ms:.3f} / p50 {s.cycle_p50_ms:.3f} "
                     f"/ p95 {s.cycle_p95_ms:.3f} ms; bottleneck: {s.bottleneck} "
                     f"(slowest stage in {s.bottleneck_share:.0%} of cycles)")
        lines.append(hw_line(s))
    else:
        lines.append("tracing was off: no per-stage figures")
    if s.dropped_events:
        lines.append(f"warning: {s.dropped_events} trace events over the max_events budget were dropped")
    if s.failure:
        lines.append(f"run stopped: {s.failure}")
    return lines


def summary_text(summary: PipelineSummary) -> str:
    """A plain-text summary: headline lines, then the stage, track, device and data-parallel tables."""
    lines = headline_lines(summary)
    for name in TABLES:
        df = getattr(summary, name)
        if len(df):
            lines += ["", f"[{name}]", df.to_string(index=False, float_format=lambda x: f"{x:.3f}")]
    return "\n".join(lines)
