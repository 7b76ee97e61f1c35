"""Pipeline analysis (pandas, pure functions): utilization, bubbles, concurrency penalty, data-parallel
breakdown, per-cycle stage times and the bottleneck.

Definitions (all over the events of one run; the wall span is first event start -> last event end):
- wall utilization of a track or device = union of its busy intervals / wall span (never above 1);
- hardware time is sampled (`PipelineSpec.hw_sample_every`, in blocks); `hw_coverage` = share of the
  inferences that have one. Hardware utilization of a track =
      (sum of HW time / sum of wall time, both over the inferences with HW time) x its wall busy time / span,
  i.e. the HW share of the measured runs applied to all of its busy time; with full coverage this is
  sum(HW) / span. Per device it is the sum over the device's tracks (it can exceed 1 when several
  streams of the device compute at once: it is then the mean number of busy streams);
- bubble = gap between the end of one inference and the start of the next on the same executor;
- concurrency penalty = wall - HW time of an inference, averaged over the inferences with HW time;
- data-parallel stage time = partition + max(device wall) + sync-and-merge; a single stage's time is its
  inference wall time; cycle latency (per batch) = max over stages; bottleneck = the stage with the largest
  mean stage time per stream (the one that limits throughput).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hase.pipeline import schema

WORK_KINDS = (schema.INFER, schema.PARTITION, schema.MERGE)
MS = 1e6


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals [start, end): overlapping busy time counts once.

    Example: [0, 10) and [5, 20) and [30, 40) -> 30.
    """
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts)[order], np.asarray(ends)[order]
    reach = np.maximum.accumulate(e)
    new_block = np.r_[True, s[1:] > reach[:-1]]
    block = np.cumsum(new_block) - 1
    lo = pd.Series(s).groupby(block).min().to_numpy()
    hi = pd.Series(reach).groupby(block).max().to_numpy()
    return int((hi - lo).sum())


def wall_span_ns(events: pd.DataFrame) -> int:
    """First start -> last end over all work events (inference, partition, merge)."""
    work = events[events[schema.KIND].isin(WORK_KINDS)]
    return int(work[schema.END_NS].max() - work[schema.TS_NS].min()) if len(work) else 0


def gaps_ns(events: pd.DataFrame) -> np.ndarray:
    """Idle gaps between consecutive events of one track (end of n -> start of n+1), never negative."""
    e = events.sort_values(schema.TS_NS, kind="stable")
    gaps: np.ndarray = np.clip(e[schema.TS_NS].to_numpy()[1:] - e[schema.END_NS].to_numpy()[:-1], 0, None)
    return gaps


def track_table(events: pd.DataFrame, span_ns: int | None = None) -> pd.DataFrame:
    """Per executor track: count, busy time, wall and HW utilization, bubbles, concurrency penalty."""
    schema.require_columns(events, schema.EVENT_COLUMNS, "events")
    span = span_ns or wall_span_ns(events)
    infer = events[events[schema.KIND] == schema.INFER]
    rows = []
    for (_, track), g in infer.groupby([schema.TRACK_ID, schema.TRACK], sort=True):
        gaps = gaps_ns(g) / MS
        rows.append({schema.TRACK: track, schema.STAGE: g[schema.STAGE].iat[0], schema.DEVICE: g[schema.DEVICE].iat[0],
                     schema.STREAM: int(g[schema.STREAM].to_numpy()[0]),
                     schema.EXECUTOR: int(g[schema.EXECUTOR].to_numpy()[0]),
                     schema.N: len(g),
                     **_busy(g, span), **_bubbles(gaps),
                     schema.PENALTY_MS: float((g[schema.DUR_NS] - g[schema.HW_NS]).mean() / MS)})
    return pd.DataFrame(rows, columns=_TRACK_COLS)


_TRACK_COLS = [schema.TRACK, schema.STAGE, schema.DEVICE, schema.STREAM, schema.EXECUTOR, schema.N, schema.BUSY_MS,
               schema.WALL_UTIL, schema.HW_MS, schema.HW_UTIL,
               schema.HW_COVERAGE, schema.BUBBLE_MEAN_MS, schema.BUBBLE_P50_MS, schema.BUBBLE_P95_MS, schema.PENALTY_MS]


def _busy(g: pd.DataFrame, span: int) -> dict[str, float]:
    """Busy time and utilizations of a group of events (one track, or one device's tracks)."""
    busy = union_ns(g[schema.TS_NS].to_numpy(), g[schema.END_NS].to_numpy())
    hw = g[schema.HW_NS]
    hw_sum = float(hw.sum()) if hw.notna().any() else np.nan
    return {schema.BUSY_MS: busy / MS, schema.WALL_UTIL: busy / span if span else np.nan, schema.HW_MS: hw_sum / MS,
            schema.HW_UTIL: hw_busy_ns(g) / span if span else np.nan,
            schema.HW_COVERAGE: float(hw.notna().mean()) if len(g) else np.nan}


def hw_busy_ns(events: pd.DataFrame) -> float:
    """Hardware busy time from sampled HW times: per track, sum(HW) / sum(wall) over its inferences that have
    a HW time, times the wall time of all its inferences; summed over tracks. NaN when no event has HW time.

    Example: one track, runs (wall 10, hw 5), (wall 10, hw nan), (wall 20, hw nan) -> 5/10 x 40 = 20.
    Equals sum(HW) when every inference has a HW time.
    """
    has = events[schema.HW_NS].notna()
    if not has.any():
        return float("nan")
    sampled = events[has].groupby(schema.TRACK_ID)[[schema.HW_NS, schema.DUR_NS]].sum()
    wall = events.groupby(schema.TRACK_ID)[schema.DUR_NS].sum().reindex(sampled.index)
    ratio = sampled[schema.HW_NS] / sampled[schema.DUR_NS].where(sampled[schema.DUR_NS] > 0)
    return float((ratio * wall).sum())


def _bubbles(gaps_ms: np.ndarray) -> dict[str, float]:
    if gaps_ms.size == 0:
        return {schema.BUBBLE_MEAN_MS: np.nan, schema.BUBBLE_P50_MS: np.nan, schema.BUBBLE_P95_MS: np.nan}
    p50, p95 = np.percentile(gaps_ms, [50, 95])
    return {schema.BUBBLE_MEAN_MS: float(gaps_ms.mean()), schema.BUBBLE_P50_MS: float(p50),
            schema.BUBBLE_P95_MS: float(p95)}


def device_table(events: pd.DataFrame, span_ns: int | None = None) -> pd.DataFrame:
    """Per device (host = partition/merge and Python functions): wall utilization from the union of all its
    tracks' busy intervals, and HW utilization."""
    schema.require_columns(events, schema.EVENT_COLUMNS, "events")
    span = span_ns or wall_span_ns(events)
    work = events[events[schema.KIND].isin(WORK_KINDS)]
    rows = [{schema.DEVICE: dev, "tracks": int(g[schema.TRACK_ID].nunique()), schema.N: len(g), **_busy(g, span)}
            for dev, g in work.groupby(schema.DEVICE, sort=True)]
    return pd.DataFrame(rows,
                        columns=[schema.DEVICE, "tracks", schema.N, schema.BUSY_MS, schema.WALL_UTIL, schema.HW_MS,
                                 schema.HW_UTIL,
                                       schema.HW_COVERAGE])


def stage_times(events: pd.DataFrame) -> pd.DataFrame:
    """Each stage's time for each batch: inference wall time, or partition + max(device wall) + merge.

    Only complete stage passes count (a data-parallel pass needs its partition, every executor and merge).
    Returns long format: `stage_index, stage, batch_id, stage_ms`.
    """
    schema.require_columns(events, schema.EVENT_COLUMNS, "events")
    dp = data_parallel_batches(events)
    dp_stages = set(dp[schema.STAGE]) if len(dp) else set()
    single = events[(events[schema.KIND] == schema.INFER) & ~events[schema.STAGE].isin(dp_stages)]
    single = single.groupby([schema.STAGE_INDEX, schema.STAGE, schema.BATCH], as_index=False)[[schema.DUR_NS]].max()
    single[schema.STAGE_MS] = single[schema.DUR_NS] / MS
    parts = [single.drop(columns=[schema.DUR_NS])]
    if len(dp):
        parts.append(dp.rename(columns={schema.TOTAL_MS: schema.STAGE_MS})[[schema.STAGE_INDEX, schema.STAGE,
                                                                            schema.BATCH, schema.STAGE_MS]])
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values([schema.BATCH, schema.STAGE_INDEX], kind="stable").reset_index(drop=True)


def data_parallel_batches(events: pd.DataFrame) -> pd.DataFrame:
    """Per data-parallel stage and batch: partition, slowest device wall, sync-and-merge and total (ms)."""
    host = events[events[schema.KIND].isin((schema.PARTITION, schema.MERGE))]
    cols = [schema.STAGE_INDEX, schema.STAGE, schema.BATCH, schema.PARTITION_MS, schema.DEVICE_MAX_MS, schema.MERGE_MS,
            schema.TOTAL_MS]
    if host.empty:
        return pd.DataFrame(columns=cols)
    key = [schema.STAGE_INDEX, schema.STAGE, schema.BATCH]
    h = host.pivot_table(index=key, columns=schema.KIND, values=schema.DUR_NS, aggfunc="sum")
    infer = events[(events[schema.KIND] == schema.INFER) & events[schema.STAGE].isin(host[schema.STAGE].unique())]
    n_exec = infer.groupby(schema.STAGE)[schema.EXECUTOR].nunique()
    dev = infer.groupby(key).agg(device_max=(schema.DUR_NS, "max"), executors=(schema.EXECUTOR, "nunique"))
    df = h.join(dev, how="inner").reset_index()
    df = df[df["executors"] == df[schema.STAGE].map(n_exec)].dropna(subset=[schema.PARTITION, schema.MERGE])
    df[schema.PARTITION_MS] = df[schema.PARTITION] / MS
    df[schema.DEVICE_MAX_MS] = df["device_max"] / MS
    df[schema.MERGE_MS] = df[schema.MERGE] / MS
    df[schema.TOTAL_MS] = df[schema.PARTITION_MS] + df[schema.DEVICE_MAX_MS] + df[schema.MERGE_MS]
    return df[cols].reset_index(drop=True)


def data_parallel_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per data-parallel stage: mean/p95 of partition, each executor's wall, sync-and-merge and total (ms)."""
    batches = data_parallel_batches(events)
    rows: list[dict[str, Any]] = []
    for (_, key), g in batches.groupby([schema.STAGE_INDEX, schema.STAGE], sort=True):
        stage = str(key)
        rows.append(_part_row(stage, "partition", "host", g[schema.PARTITION_MS]))
        infer = events[(events[schema.KIND] == schema.INFER) & (events[schema.STAGE] == stage)
                       & events[schema.BATCH].isin(g[schema.BATCH])]
        for (j, dev), e in infer.groupby([schema.EXECUTOR, schema.DEVICE], sort=True):
            rows.append(_part_row(stage, f"executor {j}", str(dev), e[schema.DUR_NS] / MS))
        rows.append(_part_row(stage, "sync+merge", "host", g[schema.MERGE_MS]))
        rows.append(_part_row(stage, "total", "", g[schema.TOTAL_MS]))
    return pd.DataFrame(rows, columns=[schema.STAGE, "part", schema.DEVICE, schema.N, "mean_ms", "p95_ms"])


def _part_row(stage: str, part: str, device: str, values: pd.Series) -> dict[str, Any]:
    return {schema.STAGE: stage, "part": part, schema.DEVICE: device, schema.N: len(values),
            "mean_ms": float(values.mean()),
            "p95_ms": float(np.percentile(values, 95)) if len(values) else np.nan}


def cycle_table(times: pd.DataFrame, stage_order: list[str] | None = None) -> pd.DataFrame:
    """Per batch (cycle): one column of stage time per stage, `cycle_ms` = max of them, and the `bottleneck`.

    Example: batch 3 with prep 1.0, embed 2.5, classify 0.7 -> cycle_ms 2.5, bottleneck "embed".
    Only batches that went through every stage are kept.
    """
    schema.require_columns(times, (schema.STAGE, schema.BATCH, schema.STAGE_MS), "stage times")
    order = stage_order or list(dict.fromkeys(times.sort_values(schema.STAGE_INDEX)[schema.STAGE]))
    wide = times.pivot_table(index=schema.BATCH, columns=schema.STAGE, values=schema.STAGE_MS, aggfunc="max")
    wide = wide.reindex(columns=order).dropna()
    wide.columns.name = None
    wide[schema.CYCLE_MS] = wide[order].max(axis=1)
    wide[schema.BOTTLENECK] = wide[order].idxmax(axis=1)
    return wide.reset_index()
