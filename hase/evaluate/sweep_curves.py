"""A batch sweep read as curves: each model's latency and throughput, predicted and measured, across its batch
sizes, one plot per family (the devset report's "Batch sweep" section).

A sweep is one model at several batch sizes: a model whose batch dimension is symbolic (evaluated at each of
`devset.BATCHES`), or static exports of one model whose names differ only in a `_bN` suffix (dev set 13's
`timm_resnet18d_224_b1` to `_b32`). Its family is models.tsv's `family`, else the sweep's own name. A user sizing a
server reads throughput (samples per second = batch / latency) as much as latency, so the table keeps both:

    family | sweep              | batch | predicted_ms | measured_ms | error_pct | predicted_per_s | measured_per_s
    resnet | timm_resnet18d_224 | 8     | 370.1        | 371.2       | -0.3      | 21.6            | 21.6
"""
from __future__ import annotations

import io
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from hase.evaluate import devset
from hase.evaluate.plots import Plot
from hase.predict.dataset import FAMILY
from hase.predict.metrics import score

SWEEP = "sweep"
WORST_ERROR_PCT, WORST_SWEEP = "worst_error_pct", "worst_sweep"
PREDICTED_PER_S, MEASURED_PER_S = "predicted_per_s", "measured_per_s"
MIN_BATCHES = 3  # a model measured at fewer batch sizes is not read as a sweep
COLUMNS = (FAMILY, SWEEP, devset.BATCH, devset.PREDICTED_MS, devset.MEASURED_MS, devset.ERROR_PCT,
           PREDICTED_PER_S, MEASURED_PER_S)


def sweep_table(rows: pd.DataFrame, families: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The measured rows of every sweep of at least MIN_BATCHES batch sizes, with throughputs (COLUMNS), sorted by
    family, sweep and batch; `families` maps a model file name to its family (models.tsv)."""
    fam = families or {}
    ok = rows[rows[devset.ERROR].fillna("") == ""].copy()
    ms = pd.to_numeric(ok[devset.MEASURED_MS], errors="coerce")
    ok = ok[np.isfinite(ms) & (ms > 0)]
    if ok.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    ok[SWEEP] = ok[devset.MODEL].astype(str).map(devset.sweep_name)
    ok[FAMILY] = [fam.get(str(m)) or s for m, s in zip(ok[devset.MODEL], ok[SWEEP], strict=True)]
    ok[devset.BATCH] = ok[devset.BATCH].astype(int)
    sizes = ok.groupby(SWEEP)[devset.BATCH].nunique()
    ok = ok[ok[SWEEP].isin(sizes[sizes >= MIN_BATCHES].index)]
    for per_s, col in ((PREDICTED_PER_S, devset.PREDICTED_MS), (MEASURED_PER_S, devset.MEASURED_MS)):
        ok[per_s] = ok[devset.BATCH] * 1000.0 / ok[col].astype(float)
    table: pd.DataFrame = ok[list(COLUMNS)].sort_values([FAMILY, SWEEP, devset.BATCH]).reset_index(drop=True)
    return table


def batch_scores(table: pd.DataFrame) -> pd.DataFrame:
    """Per batch size of the sweeps: rows, within ±10 %, RMSPE, median error (`hase.predict.metrics.score`, as
    the devset's scores) and the worst error (%) with its sweep."""
    out = []
    for b in sorted(table[devset.BATCH].unique()):
        part = table[table[devset.BATCH] == b]
        s = score(part[devset.MEASURED_MS], part[devset.PREDICTED_MS])
        err = part[devset.ERROR_PCT].astype(float).to_numpy()
        worst = int(np.argmax(np.abs(err)))
        out.append({devset.BATCH: int(b), "n": s.n, "acc10": s.acc10, "rmspe": s.rmspe,
                    devset.MEDIAN_ERROR_PCT: (s.median_ratio - 1) * 100, WORST_ERROR_PCT: float(err[worst]),
                    WORST_SWEEP: str(part[SWEEP].iloc[worst])})
    return pd.DataFrame(out, columns=[devset.BATCH, "n", "acc10", "rmspe", devset.MEDIAN_ERROR_PCT, WORST_ERROR_PCT,
                                      WORST_SWEEP])


def sweep_plots(table: pd.DataFrame) -> dict[str, Plot]:
    """One plot per family, keyed `sweep_<family>`: latency and throughput against the batch size, measured
    (solid) and predicted (dashed), one colour per sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, NullLocator

    plots = {}
    for family, part in table.groupby(FAMILY, sort=True):
        fig, (lat, thr) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=80)
        for i, (name, s) in enumerate(part.groupby(SWEEP, sort=True)):
            colour = f"C{i % 10}"
            b = s[devset.BATCH].to_numpy()
            lat.plot(b, s[devset.MEASURED_MS], "o-", color=colour, label=f"{name}, measured")
            lat.plot(b, s[devset.PREDICTED_MS], "x--", color=colour, label=f"{name}, predicted")
            thr.plot(b, s[MEASURED_PER_S], "o-", color=colour)
            thr.plot(b, s[PREDICTED_PER_S], "x--", color=colour)
        batches = sorted(part[devset.BATCH].unique())
        for ax, ylabel in ((lat, "latency (ms)"), (thr, "throughput (samples/s)")):
            ax.set(xscale="log", xlabel="batch size", ylabel=ylabel)
            ax.set_xticks(batches, [str(b) for b in batches])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.grid(alpha=0.3)
        lat.set_yscale("log")
        lat.yaxis.set_minor_formatter(NullFormatter())
        thr.set_ylim(bottom=0)  # from zero: a gap between the lines reads as the relative error it is
        lat.legend(fontsize=6, loc="upper left")
        title = f"Batch sweep, {family}: predicted and measured latency and throughput"
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        caption = (f"Each colour is one model of the {family} family at every batch size it was exported or run "
                   "at: measured here (circles, solid) and predicted (crosses, dashed). A dashed line that bends "
                   "away from its solid one is an error that grows with the batch.")
        key = f"sweep_{re.sub(r'[^A-Za-z0-9_.-]+', '_', str(family))}"
        plots[key] = Plot(key, title, caption, buf.getvalue())
    return plots
