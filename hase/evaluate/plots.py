"""The evaluation report's plots (four, and one of the real exported models): each a PNG with a title for
people and a caption saying what to look for.

Drawing only: the numbers come from `hase.evaluate.evaluation`, the page around them from `hase.evaluate.report`.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hase.evaluate import devset
from hase.evaluate.evaluation import TARGET_RMSPE, Evaluation
from hase.evaluate.ratios import CALIBRATED_HELD_OUT_MS, CALIBRATED_TRAIN_MS
from hase.predict import dataset

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from hase.evaluate.devset import DevsetEvaluation

SOURCES = {  # ratio column -> short label, in the order of seed 001's closing table
    "sum_kernel_time_ratio": "Σ kernel_time (profiler)",
    "sum_span_ratio": "Σ in-model span",
    "sum_warm_ratio": "Σ standalone warm",
    "sum_cold_ratio": "Σ standalone cold",
    "sum_pred_held_out_ratio": "Σ predicted (held-out)",
    "calibrated_held_out_ratio": "α·Σ+β (held-out)",
    "calibrated_train_ratio": "α·Σ+β (train)",
}
TOP_KEYS = 20  # predictor keys drawn in the per-op chart


@dataclass(frozen=True)
class Plot:
    """One rendered plot: file stem, title (also its alt text), caption and PNG bytes."""

    name: str
    title: str
    caption: str
    png: bytes


def render_plots(ev: Evaluation) -> dict[str, Plot]:
    """The report's four plots, keyed by file stem (pred_vs_measured, ratios, family_error, op_error)."""
    import matplotlib

    matplotlib.use("Agg")
    n_keys = min(TOP_KEYS, len(ev.kernels))
    specs: list[tuple[str, str, str, Callable[[Axes, Evaluation], None]]] = [
        ("pred_vs_measured", "Predicted vs measured latency, each family held out",
         "Each coloured dot is one model, predicted by a predictor trained without its family; hollow grey "
         "circles are the same models predicted in-sample. Dots inside the grey band are within ±10 % of the "
         "measured latency. A family sitting above (below) the diagonal is over- (under-) estimated.",
         _pred_vs_measured),
        ("ratios", "How close each way of summing kernels comes to the measured latency",
         "One box per source, over every model: the box holds the middle half of the models, the line inside "
         "it the median, the whiskers the rest (outliers as dots). 1.0 means equal to the measured latency. "
         "The measured sums show how much of a model's latency its kernels explain when timed that way; the "
         "α·Σ+β boxes are what `hase predict` reports, and should be narrow and centred on 1.",
         _ratios),
        ("family_error", "Held-out error by family",
         "RMSPE of the calibrated prediction for each family while that family was left out of training, "
         f"worst at the top; the dashed line is the {TARGET_RMSPE:g} % target and the label the share of the "
         "family's models within ±10 %. Long bars are families unlike anything else the predictor was trained on.",
         _family_error),
        ("op_error", f"Unseen kernels: the {n_keys} predictor keys with the largest error (ms)",
         "Root mean squared error in ms of single-kernel predictions for kernels that only the held-out family "
         "has, per predictor key (an op type, or a family/generic fallback forest), largest first. These are the "
         "ops whose errors cost model latency the most; the label gives the error relative to the kernel time "
         "(RMSPE) and the number of kernels.",
         _op_error),
    ]
    return {name: Plot(name, title, caption, _png(draw, ev, title)) for name, title, caption, draw in specs}


def _png(draw: Callable[[Axes, Evaluation], None], ev: Evaluation, title: str) -> bytes:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5), dpi=90)
    draw(ax, ev)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _nothing(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_axis_off()


def _pred_vs_measured(ax: Axes, ev: Evaluation) -> None:
    m = ev.models
    lo, hi = m[dataset.MEASURED_MS].min() * 0.7, m[dataset.MEASURED_MS].max() * 1.4
    x = np.geomspace(lo, hi, 50)
    ax.fill_between(x, x * 0.9, x * 1.1, color="0.85", label="±10 %")
    ax.plot(x, x, color="0.4", lw=1)
    ax.scatter(m[dataset.MEASURED_MS], m[CALIBRATED_TRAIN_MS], s=14, facecolors="none", edgecolors="0.6",
               label="in-sample (train)")
    markers = "osD^v<>"
    for i, (fam, g) in enumerate(m.groupby(dataset.FAMILY)):
        ax.scatter(g[dataset.MEASURED_MS], g[CALIBRATED_HELD_OUT_MS], s=18, marker=markers[i // 10 % len(markers)],
                   label=str(fam))
    ax.set(xscale="log", yscale="log", xlabel="measured latency (ms)",
           ylabel="predicted latency (ms)")
    ax.legend(fontsize=6, ncol=2, loc="upper left")


def _ratios(ax: Axes, ev: Evaluation) -> None:
    labels, values = [], []
    for col, label in SOURCES.items():
        v = ev.models[col].to_numpy(dtype=float) if col in ev.models else np.array([])
        v = v[np.isfinite(v) & (v > 0)]
        if len(v):
            labels.append(label)
            values.append(v)
    if not values:
        _nothing(ax, "no model has a measured sum")
        return
    ax.boxplot(values, widths=0.6, flierprops={"markersize": 3}, **_horizontal())
    ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=8)
    ax.invert_yaxis()  # the first source on top, as in the tables
    ax.axvline(1.0, color="tab:red", lw=1, ls="--", label="equal to measured")
    ax.axvspan(0.9, 1.1, color="0.9", zorder=0, label="±10 %")
    ax.set(xscale="log", xlabel=f"ratio to the measured latency ({len(ev.models)} models)")
    ax.legend(fontsize=7, loc="lower right")


def _family_error(ax: Axes, ev: Evaluation) -> None:
    f = ev.families.dropna(subset=["rmspe"]).sort_values("rmspe")  # barh draws bottom-up: worst on top
    if f.empty:
        _nothing(ax, "no family was held out")
        return
    ax.barh(f[dataset.FAMILY].astype(str), f["rmspe"], color="tab:blue")
    for y, (r, a) in enumerate(zip(f["rmspe"], f["acc10"], strict=True)):
        ax.text(r, y, f" {a:.0%} within ±10 %" if np.isfinite(a) else "", va="center", fontsize=7,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
    ax.axvline(TARGET_RMSPE, color="tab:red", lw=1, ls="--", label=f"target RMSPE {TARGET_RMSPE:g} %")
    ax.set_xlim(0, float(f["rmspe"].max()) * 1.35)
    ax.set(xlabel="held-out RMSPE of the calibrated prediction (%)")
    ax.tick_params(axis="y", labelsize=8)
    ax.legend(fontsize=7, loc="lower right")


def _op_error(ax: Axes, ev: Evaluation) -> None:
    k = ev.kernels.dropna(subset=["rmse_ms"]).sort_values("rmse_ms", ascending=False).head(TOP_KEYS)
    if k.empty:
        _nothing(ax, "no kernel was unseen in training")
        return
    k = k.iloc[::-1]  # barh draws bottom-up: largest on top
    ax.barh(k["key"].astype(str), k["rmse_ms"], color="tab:orange")
    for y, (r, p, n) in enumerate(zip(k["rmse_ms"], k["rmspe"], k["n"], strict=True)):
        ax.text(r, y, f" {_rmspe_label(p)}, n={n}", va="center", fontsize=7)
    ax.set_xlim(0, float(k["rmse_ms"].max()) * 1.4)
    ax.set(xlabel="held-out kernel RMSE (ms)")
    ax.tick_params(axis="y", labelsize=7)


def _horizontal() -> dict[str, Any]:
    """boxplot's keyword for horizontal boxes: `orientation` from matplotlib 3.10, `vert` before."""
    import matplotlib

    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def _rmspe_label(p: float) -> str:
    return f"RMSPE {p:.0f} %" if pd.notna(p) else "RMSPE —"


def devset_plot(dev: DevsetEvaluation) -> Plot:
    """Predicted vs measured latency of the real exported models: Hase by group, and the FLOPs+bytes line."""
    import matplotlib
    import matplotlib.pyplot as plt


    matplotlib.use("Agg")
    title = "Real exported models: predicted vs measured latency"
    caption = ("One dot per model and batch size, predicted by Hase (filled, by group) and by the FLOPs+bytes "
               "straight line fitted on the other models (hollow grey). Dots inside the grey band are within ±10 % "
               "of the latency measured here, in the predictor's own configuration (min of block medians).")
    data = devset.with_baselines(dev.rows)
    fig, ax = plt.subplots(figsize=(7, 5), dpi=90)
    if data.empty:
        _nothing(ax, "no model was measured")
    else:
        y = data[devset.MEASURED_MS].astype(float)
        x = np.geomspace(float(y.min()) * 0.7, float(y.max()) * 1.4, 50)
        ax.fill_between(x, x * 0.9, x * 1.1, color="0.85", label="±10 %")
        ax.plot(x, x, color="0.4", lw=1)
        ax.scatter(y, data["flops+bytes"], s=16, facecolors="none", edgecolors="0.55", label="FLOPs+bytes line")
        for marker, (group, g) in zip("osD^v", data.groupby(devset.GROUP), strict=False):
            ax.scatter(g[devset.MEASURED_MS].astype(float), g[devset.PREDICTED_MS].astype(float), s=20, marker=marker,
                       label=f"Hase, {group}")
        ax.set(xscale="log", yscale="log", xlabel="measured latency (ms)", ylabel="predicted latency (ms)")
        ax.legend(fontsize=7, loc="upper left")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return Plot("devset", title, caption, buf.getvalue())
