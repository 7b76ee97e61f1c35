"""Render an `Evaluation` as CSV tables, a Markdown report and a self-contained HTML page with plots.

No computation happens here beyond formatting: the numbers come from `hase.predict.evaluate`.
"""
from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hase.files import write_atomic
from hase.predict import dataset as D
from hase.predict.evaluate import Evaluation, evaluate_predictor
from hase.predict.ratios import CALIBRATED_HELD_OUT_MS, CALIBRATED_TRAIN_MS

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

SOURCES = {  # ratio column -> label, in the order of seed 001's closing table
    "sum_kernel_time_ratio": "Σ kernel_time (profiler)",
    "sum_span_ratio": "Σ in-model span",
    "sum_warm_ratio": "Σ standalone warm",
    "sum_cold_ratio": "Σ standalone cold",
    "sum_pred_held_out_ratio": "Σ predicted (held-out)",
    "calibrated_held_out_ratio": "α·Σ+β (held-out)",
    "calibrated_train_ratio": "α·Σ+β (train)",
}
PLOTS = ("pred_vs_measured", "ratios", "family_error", "op_error")


def report_predictor(store_path: str | Path, predictor_path: str | Path, out_dir: str | Path,
                     target: str | None = None) -> tuple[Evaluation, dict[str, Path]]:
    """Evaluate a trained predictor against the store and write its report (what `hase evaluate` does)."""
    ev = evaluate_predictor(store_path, predictor_path, target)
    return ev, write_report(ev, out_dir)


def write_report(ev: Evaluation, out_dir: str | Path) -> dict[str, Path]:
    """Write CSVs, report.md (+ PNG plots) and report.html (plots embedded) to `out_dir`; returns the paths.

    Every file is written atomically, so a reader never sees half a report file.
    """
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    tables = {"models": ev.models, "summary": ev.summary, "candidates": ev.candidates, "baselines": ev.baselines,
              "baseline_scores": ev.baseline_scores, "kernels_by_key": ev.kernels, "families": ev.families}
    for name, frame in tables.items():
        paths[f"{name}.csv"] = write_atomic(out / f"{name}.csv", frame.to_csv(index=False))
    pngs = render_plots(ev)
    for name, png in pngs.items():
        paths[f"{name}.png"] = write_atomic(out / "plots" / f"{name}.png", png)
    paths["headline.json"] = write_atomic(out / "headline.json",
                                          json.dumps(ev.headline.to_dict(), indent=1, default=_num) + "\n")
    paths["report.md"] = write_atomic(out / "report.md", markdown(ev, {n: f"plots/{n}.png" for n in pngs}))
    paths["report.html"] = write_atomic(out / "report.html", html_page(ev, pngs))
    return paths


def _num(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else str(v)


# ---------------------------------------------------------------------- text


def fmt(v: Any) -> str:
    """A table cell: numbers to 3 significant decimals, shares as given, NaN as an em dash."""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if isinstance(v, (float, np.floating)):
        x = float(v)
        if not np.isfinite(x):
            return "—"
        return f"{x:.3f}" if abs(x) < 100 else f"{x:.1f}"
    return str(v)


def md_table(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """A GitHub Markdown table of the given columns."""
    cols = list(columns or frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame[cols].itertuples(index=False)]
    return "\n".join(lines)


def headline_lines(ev: Evaluation) -> list[str]:
    """The figures the README quotes, as Markdown bullet points."""
    h = ev.headline
    ho, ex, tr, cal = h.held_out, h.held_out_exported, h.train, h.calibration
    lines = [
        f"- device `{ev.device}`, target `{ev.target}`, calibration `{ev.calibration}` "
        f"(α={cal.alpha:.4f}, β={cal.beta:.4f} ms, γ={cal.gamma * 1e3:.2f} µs/kernel); "
        f"{h.n_models} models, {h.n_families} families",
        f"- held-out families (leave-family-out): ±10 % accuracy **{ho.acc10:.0%}**, ±5 % {ho.acc5:.0%}, "
        f"RMSPE **{ho.rmspe:.1f} %** over {ho.n} models (targets: ≥ 90 %, ≤ 8 %)",
        f"- exported models (torch.onnx, held out): ±10 % {ex.acc10:.0%}, RMSPE {ex.rmspe:.1f} % over {ex.n} models",
        f"- in-sample (train): ±10 % {tr.acc10:.0%}, RMSPE {tr.rmspe:.1f} %",
    ]
    for name, b in h.baselines.items():
        lines.append(f"- baseline, linear in {name} (held-out): ±10 % {b.acc10:.0%}, RMSPE {b.rmspe:.1f} %")
    return lines


def markdown(ev: Evaluation, plot_files: dict[str, str]) -> str:
    """The Markdown report: headline, summary per source, candidates, baselines, families, kernels, models."""
    m = ev.models
    ratio_cols = [c for c in SOURCES if c in m.columns]
    parts = [f"# Hase evaluation: {ev.device}", "", *headline_lines(ev), "",
             "Measured = median `session.run` wall time. Ratios are source / measured. Held-out = the model's "
             "family was left out of training (kernels and calibration).", "",
             "## Each way of summing kernels vs the measured latency", "",
             md_table(ev.summary[ev.summary["scope"] == "all"],
                      ["source", "split", "n", "mean_ratio", "median_ratio", "rmspe", "acc5", "acc10"]), "",
             "## Calibration and target candidates (held-out)", "",
             md_table(ev.candidates, ["target", "calibration", "n", "rmspe", "acc5", "acc10", "median_ratio"]), "",
             "## Baselines (held-out)", "", md_table(ev.baseline_scores), "",
             "## Held-out error by family", "", md_table(ev.families), "",
             "## Held-out kernel error by predictor key (kernels never seen in training)", "",
             md_table(ev.kernels.head(40)), ""]
    for name, path in plot_files.items():
        parts += [f"![{name}]({path})", ""]
    parts += ["## Every model", "",
              md_table(m, [D.MODEL_ID, D.FAMILY, D.MEASURED_MS, CALIBRATED_HELD_OUT_MS, *ratio_cols]), ""]
    return "\n".join(parts)


def html_page(ev: Evaluation, pngs: dict[str, bytes]) -> str:
    """A self-contained HTML page (plots inlined as base64 PNG)."""
    md_heads = "".join(f"<li>{html.escape(line[2:]).replace('**', '')}</li>" for line in headline_lines(ev))

    def table(frame: pd.DataFrame) -> str:
        """A DataFrame as an HTML table, numbers formatted like the Markdown report."""
        return frame.to_html(index=False, float_format=fmt, na_rep="—", border=0, classes="t")

    imgs = "".join(f'<figure><img alt="{n}" src="data:image/png;base64,{base64.b64encode(b).decode()}"/>'
                   f"<figcaption>{n}</figcaption></figure>" for n, b in pngs.items())
    cols = [D.MODEL_ID, D.FAMILY, D.MEASURED_MS, CALIBRATED_HELD_OUT_MS, *[c for c in SOURCES if c in ev.models]]
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table.t{border-collapse:collapse;"
             "font-size:12px}table.t td,table.t th{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right}"
             "figure{display:inline-block;margin:0 1em 1em 0}img{max-width:560px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Hase evaluation {html.escape(ev.device)}</title>"
            f"<style>{style}</style></head><body><h1>Hase evaluation: {html.escape(ev.device)}</h1><ul>{md_heads}</ul>"
            f"{imgs}<h2>Each way of summing kernels vs measured</h2>{table(ev.summary)}"
            f"<h2>Candidates (held-out)</h2>{table(ev.candidates)}<h2>Baselines</h2>{table(ev.baseline_scores)}"
            f"<h2>By family (held-out)</h2>{table(ev.families)}<h2>Kernels by key (held-out)</h2>{table(ev.kernels)}"
            f"<h2>Every model</h2>{table(ev.models[cols])}</body></html>\n")


# ---------------------------------------------------------------------- plots


def render_plots(ev: Evaluation) -> dict[str, bytes]:
    """The report's four plots as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    return {"pred_vs_measured": _png(_pred_vs_measured, ev), "ratios": _png(_ratios, ev),
            "family_error": _png(_family_error, ev), "op_error": _png(_op_error, ev)}


def _png(draw: Callable[[Axes, Evaluation], None], ev: Evaluation) -> bytes:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5), dpi=90)
    draw(ax, ev)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _pred_vs_measured(ax: Axes, ev: Evaluation) -> None:
    m = ev.models
    lo, hi = m[D.MEASURED_MS].min() * 0.7, m[D.MEASURED_MS].max() * 1.4
    x = np.geomspace(lo, hi, 50)
    ax.fill_between(x, x * 0.9, x * 1.1, color="0.85", label="±10 %")
    ax.plot(x, x, color="0.4", lw=1)
    ax.scatter(m[D.MEASURED_MS], m[CALIBRATED_TRAIN_MS], s=14, facecolors="none", edgecolors="0.5",
               label="train (in-sample)")
    for fam, g in m.groupby(D.FAMILY):
        ax.scatter(g[D.MEASURED_MS], g[CALIBRATED_HELD_OUT_MS], s=18, label=str(fam))
    ax.set(xscale="log", yscale="log", xlabel="measured latency (ms)", ylabel="predicted α·Σ+β (ms)",
           title=f"held-out prediction vs measured ({ev.target}, {ev.calibration})")
    ax.legend(fontsize=6, ncol=2)


def _ratios(ax: Axes, ev: Evaluation) -> None:
    m = ev.models.reset_index(drop=True)
    for col, label in SOURCES.items():
        if col in m and col != "calibrated_train_ratio":
            ax.plot(m.index, m[col], marker="o", ms=3, lw=0, label=label)
    ax.axhline(1.0, color="0.3", lw=1)
    ax.set(yscale="log", xlabel="model (grouped by family)", ylabel="ratio to measured latency",
           title="each source / measured, per model")
    ticks = pd.Series(m.index, index=m.index).groupby(m[D.FAMILY]).min()  # first row of each family
    ax.set_xticks(list(ticks.to_numpy()), list(ticks.index), rotation=60, fontsize=7)
    ax.legend(fontsize=7)


def _family_error(ax: Axes, ev: Evaluation) -> None:
    f = ev.families.sort_values("rmspe")
    ax.barh(f[D.FAMILY], f["rmspe"], color="tab:blue")
    for y, (r, a) in enumerate(zip(f["rmspe"], f["acc10"], strict=True)):
        ax.text(r, y, f" ±10%: {a:.0%}", va="center", fontsize=7)
    ax.axvline(8.0, color="tab:red", lw=1, ls="--", label="target RMSPE 8 %")
    ax.set(xlabel="held-out RMSPE of α·Σ+β (%)", title="error by family (held out)")
    ax.legend(fontsize=7)


def _op_error(ax: Axes, ev: Evaluation) -> None:
    k = ev.kernels.sort_values("rmse_ms", ascending=False).head(20).iloc[::-1]
    ax.barh(k["key"], k["rmspe"], color="tab:orange")
    for y, (r, n) in enumerate(zip(k["rmspe"], k["n"], strict=True)):
        ax.text(r, y, f" n={n}", va="center", fontsize=7)
    ax.set(xlabel="held-out kernel RMSPE (%)", title="per-op error of unseen kernels (top 20 by RMSE)")
    ax.tick_params(axis="y", labelsize=7)
