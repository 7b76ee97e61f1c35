"""The events DataFrame of an ORT profile -> per-node spans and a per-run time decomposition.

Pure functions: nothing here reads files, runs a model or prints (`hase.runtime.profile` reads profiles,
`hase.profiling.run` produces them, `hase.profiling.perfetto` exports them for Perfetto,
`hase.profiling.findings.diagnose` turns a decomposition into plain-language findings).
ORT profiles are in microseconds, and so is every figure here (`*_us`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.runtime import profile
from hase.tables import require_columns

# ---------------------------------------------------------------- column names

# columns these tables share with the events DataFrame (defined in hase.runtime.profile)
NODE_NAME, OP_TYPE, PROVIDER, NODE_INDEX = profile.NODE_NAME, profile.OP_TYPE, profile.PROVIDER, profile.NODE_INDEX
RUN_ID, TS_US, DUR_US, TID = profile.RUN_ID, profile.TS_US, profile.DUR_US, profile.TID
# node_spans columns (besides RUN_ID, NODE_NAME, TID, OP_TYPE, PROVIDER, NODE_INDEX, TS_US)
CALL, END_US, SPAN_US, KERNEL_TIME_US, SPAN_SOURCE, NESTED = (
    "call", "end_us", "span_us", "kernel_time_us", "span_source", "nested")
# node_summary / op_type_totals / top_nodes / provider_counts columns
N_RUNS, N_NODES, KERNEL_TIME_SHARE = "n_runs", "n_nodes", "kernel_time_share"
# node_gaps columns (besides RUN_ID, TS_US, DUR_US)
AFTER_NODE, BEFORE_NODE = "after_node", "before_node"
FENCE = "fence"  # span_source of a node span measured from its fences (else "kernel_time")
_EVENTS_HOW = "build it with hase.runtime.profile.load_profile or parse_events"

# ---------------------------------------------------------------- decomposition metrics

MODEL_RUN_US, EXECUTE_US = "model_run_us", "execute_us"
BEFORE_EXECUTE_US, AFTER_EXECUTE_US = "before_execute_us", "after_execute_us"
MODEL_RUN_OUTSIDE_EXECUTE_US = "model_run_outside_execute_us"
NODE_TIMELINE_SPAN_US, EXECUTE_OUTSIDE_NODES_US = "node_timeline_span_us", "execute_outside_nodes_us"
KERNEL_TIME_SUM_US, NODE_SPAN_SUM_US = "kernel_time_sum_us", "node_span_sum_us"
NODE_NON_KERNEL_US, NODE_GAP_US, NODE_OVERLAP_US = "node_non_kernel_us", "node_gap_us", "node_overlap_us"
N_NESTED_NODES, N_FENCED_NODES, N_MEMCPY_NODES = "n_nested_nodes", "n_fenced_nodes", "n_memcpy_nodes"

#: metric -> (label, meaning); the order is the order of the decomposition table.
METRICS: dict[str, tuple[str, str]] = {
    MODEL_RUN_US: ("model_run", "one InferenceSession.run inside ORT, from call to return"),
    BEFORE_EXECUTE_US: ("  before Execute", "input checks, feed copies (host->device on GPU EPs), setup"),
    EXECUTE_US: ("  Execute", "the executor walking the graph and running (or launching) every node"),
    NODE_TIMELINE_SPAN_US: ("    node timeline span", "first node start -> last node end"),
    KERNEL_TIME_SUM_US: ("      kernel_time sum", "sum of nodes' Compute() time on the CPU (launch time on GPU EPs)"),
    NODE_NON_KERNEL_US: ("      node non-kernel", "node span minus kernel_time: fence waits (0 when no fences)"),
    NODE_GAP_US: ("      node gaps", "idle time between nodes: the executor scheduling the next node"),
    NODE_OVERLAP_US: ("      node overlap", "time nodes ran concurrently (parallel executor); subtract it"),
    EXECUTE_OUTSIDE_NODES_US: ("    Execute outside nodes", "executor set-up and tear-down around the nodes"),
    AFTER_EXECUTE_US: ("  after Execute", "fetching outputs: on GPU EPs, waiting for the GPU and device->host copies"),
    MODEL_RUN_OUTSIDE_EXECUTE_US: ("model_run outside Execute", "before Execute + after Execute"),
    NODE_SPAN_SUM_US: ("sum of node spans", "per-node time including fences, summed"),
}
COUNT_COLUMNS = (N_NODES, N_NESTED_NODES, N_FENCED_NODES, N_MEMCPY_NODES)
DECOMPOSITION_COLUMNS = (RUN_ID, *METRICS, *COUNT_COLUMNS)


# ---------------------------------------------------------------- per-node spans


def node_spans(events: pd.DataFrame) -> pd.DataFrame:
    """One row per node execution in a run: kernel_time, and the span fence_before start -> fence_after end.

    Example: fence_before ts 100 dur 1, kernel_time ts 102 dur 40, fence_after ts 143 dur 2 -> a row with
    ts_us 100, end_us 145, span_us 45, kernel_time_us 40, span_source 'fence'; without fences,
    span_us = kernel_time_us and span_source 'kernel_time'. `call` numbers repeated executions of a node
    in one run (Loop bodies); `nested` marks nodes inside another node's span on the same thread
    (subgraph nodes of If/Loop/Scan), which the sums below leave out to avoid counting them twice.
    """
    require_columns(events, profile.EVENT_COLUMNS, "events", _EVENTS_HOW)
    ev = events[events[profile.EVENT_KIND].isin(profile.NODE_KINDS) & (events[RUN_ID] >= 0)].copy()
    ev[CALL] = ev.groupby([RUN_ID, NODE_NAME, profile.EVENT_KIND]).cumcount()
    ev[END_US] = ev[TS_US] + ev[DUR_US]
    ev["_fence"] = ev[profile.EVENT_KIND] != profile.KERNEL_TIME
    key = [RUN_ID, NODE_NAME, CALL]
    bounds = ev.groupby(key).agg(_start=(TS_US, "min"), _end=(END_US, "max"), _fence=("_fence", "any"))
    kt = ev[ev[profile.EVENT_KIND] == profile.KERNEL_TIME].set_index(key)
    out = kt[[TID, OP_TYPE, PROVIDER, NODE_INDEX]].join(bounds, how="left")
    out[KERNEL_TIME_US] = kt[DUR_US]
    out[SPAN_SOURCE] = np.where(out["_fence"], FENCE, profile.KERNEL_TIME)
    out[TS_US] = np.where(out["_fence"], out["_start"], kt[TS_US])
    out[END_US] = np.where(out["_fence"], out["_end"], kt[END_US])
    out[SPAN_US] = out[END_US] - out[TS_US]
    out = out.reset_index().sort_values([RUN_ID, TS_US, END_US], ascending=[True, True, False], kind="stable")
    out[NESTED] = _nested(out)
    cols = [RUN_ID, NODE_NAME, CALL, TID, OP_TYPE, PROVIDER, NODE_INDEX, TS_US, END_US, SPAN_US,
            KERNEL_TIME_US, SPAN_SOURCE, NESTED]
    return out[cols].reset_index(drop=True)


def _nested(spans: pd.DataFrame) -> np.ndarray:
    """True for spans inside an earlier span on the same thread of the same run (sorted by start)."""
    prev_end = _previous_end(spans, [RUN_ID, TID])
    return ((spans[TS_US] < prev_end) & (spans[END_US] <= prev_end)).to_numpy()


def _previous_end(spans: pd.DataFrame, by: list[str]) -> pd.Series:
    """The latest end of the earlier spans of the same group (NaN for a group's first span), rows in start order."""
    running = spans.groupby(by, sort=False)[END_US].cummax()
    return running.groupby([spans[k] for k in by], sort=False).shift()


def node_summary(events: pd.DataFrame, skip_runs: int = 0, *, spans: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per node: median over profiled runs of its per-run span and kernel_time (calls in a run summed).
    `spans`: the events' `node_spans`, when the caller has them already (they are not computed again).

    Example: node `conv1` with span_us 45, 41, 43 in runs 0..2 and skip_runs=1 -> one row with
    span_us 42.0 and n_runs 2.
    """
    spans = _runs_from(node_spans(events) if spans is None else spans, skip_runs)
    per_run = spans.groupby([NODE_NAME, RUN_ID], sort=False).agg(
        **{OP_TYPE: (OP_TYPE, "first"), PROVIDER: (PROVIDER, "first"), NODE_INDEX: (NODE_INDEX, "first"),
           NESTED: (NESTED, "all"), SPAN_US: (SPAN_US, "sum"), KERNEL_TIME_US: (KERNEL_TIME_US, "sum"),
           TS_US: (TS_US, "min")})
    out = per_run.groupby(level=NODE_NAME, sort=False).agg(
        **{OP_TYPE: (OP_TYPE, "first"), PROVIDER: (PROVIDER, "first"), NODE_INDEX: (NODE_INDEX, "first"),
           NESTED: (NESTED, "all"), N_RUNS: (SPAN_US, "size"), SPAN_US: (SPAN_US, "median"),
           KERNEL_TIME_US: (KERNEL_TIME_US, "median")})
    return out.reset_index()


def _runs_from(df: pd.DataFrame, skip_runs: int) -> pd.DataFrame:
    if skip_runs < 0:
        raise HaseError(f"skip_runs must be >= 0, got {skip_runs}")
    return df[df[RUN_ID] >= skip_runs]


def node_gaps(events: pd.DataFrame, *, spans: pd.DataFrame | None = None) -> pd.DataFrame:
    """Idle stretches between node spans in each run's node timeline (nested nodes ignored).

    Overlapping spans (parallel executor) are merged first, so a gap is time when no node ran.
    Example: spans [0, 10] and [12, 20] in run 0 -> one row run_id 0, ts_us 10, dur_us 2,
    after_node = the first node, before_node = the second. `spans`: the events' `node_spans`, if computed already.
    """
    spans = node_spans(events) if spans is None else spans
    spans = spans[~spans[NESTED]].sort_values([RUN_ID, TS_US], kind="stable")
    prev_end = _previous_end(spans, [RUN_ID])
    prev_name = spans.groupby(RUN_ID)[NODE_NAME].shift()
    gap = spans[TS_US] - prev_end
    mask = (gap > 0).to_numpy()
    return pd.DataFrame({
        RUN_ID: spans[RUN_ID].to_numpy()[mask], TS_US: prev_end.to_numpy()[mask],
        DUR_US: gap.to_numpy()[mask], AFTER_NODE: prev_name.to_numpy()[mask],
        BEFORE_NODE: spans[NODE_NAME].to_numpy()[mask],
    })


# ---------------------------------------------------------------- decomposition


def decompose(events: pd.DataFrame, skip_runs: int = 0, *, spans: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per model_run (from run `skip_runs` on) splitting its time into `METRICS`, in µs.

    Identities (exact by construction): model_run = before Execute + Execute + after Execute;
    Execute = node timeline span + Execute outside nodes;
    node timeline span = kernel_time sum + node non-kernel + node gaps - node overlap.
    Example: a run of 1000 µs whose Execute starts at +100 and lasts 800 -> before_execute_us 100,
    after_execute_us 100. `spans`: the events' `node_spans`, when the caller has them already.
    """
    require_columns(events, profile.EVENT_COLUMNS, "events", _EVENTS_HOW)
    runs = _runs_from(events[events[profile.EVENT_KIND] == profile.MODEL_RUN], skip_runs)
    if runs.empty:
        n = int((events[profile.EVENT_KIND] == profile.MODEL_RUN).sum())
        if n == 0:
            raise HaseError("the profile has no model_run events: profile at least one session.run()")
        raise HaseError(f"skip_runs={skip_runs} skips all {n} profiled runs: use a smaller value")
    out = pd.DataFrame({RUN_ID: runs[RUN_ID].to_numpy(), MODEL_RUN_US: runs[DUR_US].to_numpy(),
                        "_run_ts": runs[TS_US].to_numpy()}).set_index(RUN_ID)
    ex = events[(events[profile.EVENT_KIND] == profile.EXECUTE) & (events[RUN_ID] >= skip_runs)]
    ex = ex.sort_values(DUR_US, ascending=False, kind="stable").drop_duplicates(RUN_ID).set_index(RUN_ID)
    out[EXECUTE_US] = ex[DUR_US]  # the outermost Execute: subgraphs run nested Executes
    out[BEFORE_EXECUTE_US] = ex[TS_US] - out["_run_ts"]
    out[AFTER_EXECUTE_US] = out["_run_ts"] + out[MODEL_RUN_US] - ex[TS_US] - ex[DUR_US]
    out[MODEL_RUN_OUTSIDE_EXECUTE_US] = out[MODEL_RUN_US] - out[EXECUTE_US]
    nodes = _node_metrics(events, skip_runs, node_spans(events) if spans is None else spans)
    out = out.join(nodes)
    cols = list(nodes.columns)  # numbers all (a malformed profile's empty frame may type them str): 0 for no nodes
    out[cols] = out[cols].apply(pd.to_numeric, errors="coerce").fillna(0)
    out[list(COUNT_COLUMNS)] = out[list(COUNT_COLUMNS)].astype(int)
    out[EXECUTE_OUTSIDE_NODES_US] = out[EXECUTE_US] - out[NODE_TIMELINE_SPAN_US]
    return out.reset_index()[list(DECOMPOSITION_COLUMNS)]


def _node_metrics(events: pd.DataFrame, skip_runs: int, all_spans: pd.DataFrame) -> pd.DataFrame:
    """Per run: timeline span, kernel/span sums, gaps, overlap and node counts (0 for runs without nodes)."""
    spans = _runs_from(all_spans, skip_runs)
    top = spans[~spans[NESTED]].assign(_fenced=lambda d: d[SPAN_SOURCE] == FENCE,
                                       _memcpy=lambda d: d[OP_TYPE].isin(profile.MEMCPY_OPS))
    m = top.groupby(RUN_ID).agg(**{"_end": (END_US, "max"), "_start": (TS_US, "min"),
                                   KERNEL_TIME_SUM_US: (KERNEL_TIME_US, "sum"), NODE_SPAN_SUM_US: (SPAN_US, "sum"),
                                   N_NODES: (SPAN_US, "size"), N_FENCED_NODES: ("_fenced", "sum"),
                                   N_MEMCPY_NODES: ("_memcpy", "sum")})
    m.insert(0, NODE_TIMELINE_SPAN_US, m.pop("_end") - m.pop("_start"))
    m[N_NESTED_NODES] = spans[spans[NESTED]].groupby(RUN_ID).size()
    gaps = node_gaps(events, spans=all_spans)
    m[NODE_GAP_US] = gaps.groupby(RUN_ID)[DUR_US].sum()
    m = m.fillna(0.0)
    m[NODE_NON_KERNEL_US] = m[NODE_SPAN_SUM_US] - m[KERNEL_TIME_SUM_US]
    union = m[NODE_TIMELINE_SPAN_US] - m[NODE_GAP_US]
    m[NODE_OVERLAP_US] = m[NODE_SPAN_SUM_US] - union
    return m


def summarize(decomposition: pd.DataFrame) -> pd.Series:
    """Median of every decomposition metric over runs, plus n_runs.

    Example: model_run_us 900, 1000, 1100 in three rows -> model_run_us 1000.0, n_runs 3.
    """
    require_columns(decomposition, DECOMPOSITION_COLUMNS, "decomposition",
                    "build it with hase.profiling.decompose.decompose")
    med = decomposition.drop(columns=[RUN_ID]).median(numeric_only=True)
    med[N_RUNS] = len(decomposition)
    return med


# ---------------------------------------------------------------- breakdowns


def provider_counts(events: pd.DataFrame, skip_runs: int = 0) -> pd.DataFrame:
    """Per execution provider: distinct nodes placed on it and their median per-run kernel_time.

    Example: 50 CUDA nodes and 3 CPU nodes -> rows (CUDAExecutionProvider, 50, ...),
    (CPUExecutionProvider, 3, ...); nested (subgraph) nodes count as nodes but not as time.
    """
    summary = node_summary(events, skip_runs)
    top = summary[~summary[NESTED]]
    out = pd.DataFrame({N_NODES: summary.groupby(PROVIDER).size(),
                        KERNEL_TIME_US: top.groupby(PROVIDER)[KERNEL_TIME_US].sum()}).fillna(0.0)
    out[N_NODES] = out[N_NODES].astype(int)
    out[KERNEL_TIME_SHARE] = _share(out[KERNEL_TIME_US])
    return out.sort_values(N_NODES, ascending=False).reset_index()


def op_type_totals(events: pd.DataFrame, skip_runs: int = 0) -> pd.DataFrame:
    """Per (op_type, provider): node count and summed per-node medians of kernel_time and span.

    Example: two Conv nodes with kernel_time_us 40 and 60 -> (Conv, CPUExecutionProvider, 2, 100.0, ...).
    """
    summary = node_summary(events, skip_runs)
    top = summary[~summary[NESTED]]
    out = top.groupby([OP_TYPE, PROVIDER]).agg(**{N_NODES: (NODE_NAME, "size"),
                                                  KERNEL_TIME_US: (KERNEL_TIME_US, "sum"),
                                                  SPAN_US: (SPAN_US, "sum")})
    out[KERNEL_TIME_SHARE] = _share(out[KERNEL_TIME_US])
    return out.sort_values(KERNEL_TIME_US, ascending=False).reset_index()


def top_nodes(events: pd.DataFrame, n: int = 10, skip_runs: int = 0) -> pd.DataFrame:
    """The n nodes with the largest median span (nested subgraph nodes excluded), with their share."""
    summary = node_summary(events, skip_runs)
    top = summary[~summary[NESTED]].copy()
    top[KERNEL_TIME_SHARE] = _share(top[KERNEL_TIME_US])
    top = top.sort_values(SPAN_US, ascending=False, kind="stable").head(n)
    return top.drop(columns=[NESTED]).reset_index(drop=True)


def _share(values: pd.Series) -> pd.Series:
    total = float(values.sum())
    return values / total if total > 0 else values * 0.0
