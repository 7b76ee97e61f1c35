"""Render an `Evaluation` as CSV tables, a Markdown report and a self-contained HTML page with plots.

No computation happens here beyond formatting: the numbers come from `hase.evaluate.evaluation`, the plots
from `hase.evaluate.plots`. Both pages are rendered from one list of sections, and every column they show
is explained in the glossary (`COLUMNS`): a column without an entry is an error, not a silent gap.
"""
from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hase.errors import HaseError
from hase.evaluate import devset, sweep_curves, worst
from hase.evaluate.evaluation import TARGET_ACC10, TARGET_RMSPE, Evaluation, evaluate_predictor
from hase.evaluate.glossary import CHOSEN, COLUMNS, MEASURED_MIN_MS, SOURCE_DOCS
from hase.evaluate.plots import SOURCES, Plot, devset_plot, render_plots
from hase.evaluate.ratios import CALIBRATED_HELD_OUT_MS, SCOPE, SOURCE_COLUMN, ratio_column
from hase.evaluate.render import STYLE, html_table, inline_html, md_table
from hase.files import write_atomic
from hase.predict import dataset
from hase.predict.baselines import BASELINE, MODEL_BYTES, MODEL_FLOPS
from hase.predict.crossval import CALIBRATION, SPLIT, TARGET
from hase.predict.metrics import SCORE_COLUMNS, Scores
from hase.predict.noise import busy_note
from hase.predict.predictor import KEY
from hase.tables import percent


@dataclass(frozen=True)
class Section:
    """One table of the report: heading, a sentence on what to look for, the rows to show."""

    anchor: str
    title: str
    intro: str
    table: pd.DataFrame


def report_predictor(store_path: str | Path, predictor_path: str | Path, out_dir: str | Path,
                     target: str | None = None) -> tuple[Evaluation, dict[str, Path]]:
    """Evaluate a trained predictor against the store and write its report (what `hase evaluate` does)."""
    ev = evaluate_predictor(store_path, predictor_path, target)
    return ev, write_report(ev, out_dir)


def write_report(ev: Evaluation | None, out_dir: str | Path, dev: devset.DevsetEvaluation | None = None) -> dict[str,
                                                                                                                 Path]:
    """Write CSVs, report.md (+ PNG plots) and report.html (plots embedded) to `out_dir`; returns the paths.

    `dev` adds the real exported models' section (its scores as devset_scores.csv; its rows are the devset CSV
    `evaluate_devset` keeps); without `ev` the report is that section alone. Every file is written atomically,
    so a reader never sees half a report file.
    """
    if ev is None and dev is None:
        raise HaseError("nothing to report: give a store's evaluation, a devset evaluation or both")
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    tables = {} if ev is None else {
        "models": ev.models, "summary": ev.summary, "candidates": ev.candidates, "baselines": ev.baselines,
        "baseline_scores": ev.baseline_scores, "kernels_by_key": ev.kernels, "families": ev.families}
    if dev is not None:
        tables["devset_scores"] = dev.scores
    for name, frame in tables.items():
        paths[f"{name}.csv"] = write_atomic(out / f"{name}.csv", frame.to_csv(index=False))
    plots = all_plots(ev, dev)
    for name, plot in plots.items():
        paths[f"{name}.png"] = write_atomic(out / "plots" / f"{name}.png", plot.png)
    if ev is not None:
        paths["headline.json"] = write_atomic(out / "headline.json",
                                              json.dumps(ev.headline.to_dict(), indent=1, default=_num,
                                                         allow_nan=False) + "\n")
    paths["report.md"] = write_atomic(out / "report.md", markdown(ev, plots, dev=dev))
    paths["report.html"] = write_atomic(out / "report.html", html_page(ev, plots, dev))
    return paths


def all_plots(ev: Evaluation | None, dev: devset.DevsetEvaluation | None = None) -> dict[str, Plot]:
    """The store evaluation's plots (when `ev` is given), then the devset's (when `dev` is)."""
    plots = render_plots(ev) if ev is not None else {}
    if dev is not None:
        plots["devset"] = devset_plot(dev)
        plots |= sweep_curves.sweep_plots(sweep_curves.sweep_table(dev.rows, dev.families))
    return plots


def _num(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else str(v)


def _fit(s: Scores) -> str:
    return f"±10 % {percent(s.acc10)}, RMSPE {s.rmspe:.1f} % over {s.n} models" if s.n else "no models to score"


def headline_lines(ev: Evaluation) -> list[str]:
    """The figures the README quotes, as Markdown bullet points (no NaN: a missing figure says why)."""
    h = ev.headline
    ho, ex, cal = h.held_out, h.held_out_exported, h.calibration
    exported = (f"- exported models (torch.onnx, held out): {_fit(ex)}" if ex.n else
                "- exported models (torch.onnx): no exported models in this store, so no figure for real "
                "exports (`hase collect --models-dir DIR` measures them)")
    lines = [
        f"- device `{ev.device}`, target `{ev.target}`, calibration `{ev.calibration}` "
        f"({cal.describe()}); "
        f"{h.n_models} models, {h.n_families} families",
        f"- held-out families (leave-family-out): ±10 % accuracy **{percent(ho.acc10)}**, ±5 % {percent(ho.acc5)}, "
        f"RMSPE **{ho.rmspe:.1f} %** over {ho.n} models (targets: ≥ {TARGET_ACC10:.0%}, ≤ {TARGET_RMSPE:g} %)",
        exported,
        f"- in-sample (train): {_fit(h.train)}",
    ]
    lines += [f"- baseline, linear in {name} (held-out): {_fit(b)}" for name, b in h.baselines.items()]
    return [*noise_lines(ev.noise), *lines]


def noise_lines(noise: Mapping[str, Any]) -> list[str]:
    """The store's noise, first: the share of jobs measured on a busy host (said loudly when most were), noisy
    models and the spread of the model measurements (none for an evaluation without a store noise record)."""
    if not noise or not noise.get("jobs"):
        return []
    busy = float(noise["busy_share"])
    spread = ("" if noise.get("model_spread_median") is None else
              f"; block spread of the model measurements median {noise['model_spread_median']:.0%}, "
              f"p90 {noise['model_spread_p90']:.0%}")
    line = (f"- store noise: {noise['busy_jobs']} of {noise['jobs']} jobs ({busy:.0%}) measured on a busy host, "
            f"{noise['noisy_models']} of {noise['models']} models noisy{spread}")
    note = busy_note(busy)
    return [f"- **{note}**", line] if note else [line]


READING = ("Measured = `session.run` wall time of the whole model: the minimum of the block medians (the plain "
           "median for stores collected before Hase measured in blocks). A ratio is a sum or prediction divided "
           "by the measured latency (1 = exact). Held-out = the model's family was left out of training (the "
           "kernel forests and the calibration), as it would be for a model the predictor never saw. Every "
           "column is explained in the [glossary](#glossary); in the HTML page, hover a column heading.")


# ---------------------------------------------------------------------- sections


def sections(ev: Evaluation) -> list[Section]:
    """The report's tables in reading order, each with the columns it shows."""
    order = {ratio[: -len("_ratio")] + "_ms": i for i, ratio in enumerate(SOURCES)}  # the plots' order
    summary = ev.summary.sort_values(SOURCE_COLUMN, key=lambda s: s.map(order), kind="stable")
    summary = summary.assign(**{SOURCE_COLUMN: [_source_label(s) for s in summary[SOURCE_COLUMN]]})
    scope = [SCOPE] if summary[SCOPE].nunique() > 1 else []
    chosen = (ev.candidates[TARGET] == ev.target) & (ev.candidates[CALIBRATION] == ev.calibration)
    candidates = ev.candidates.assign(**{CHOSEN: chosen})
    ratio_cols = [c for c in SOURCES if c in ev.models.columns]
    one_scope = "" if scope else " All models are of one kind (zoo or exported), so there is one row per source."
    return [
        Section("sources", "Each way of summing kernels vs the measured latency",
                "How close each sum of kernel times, and each prediction, comes to the measured latency of the "
                "same models. The measured sums show how much of a model's latency its kernels explain when "
                "timed that way; the α·Σ+β rows are what `hase predict` reports." + one_scope + _same_sums(ev),
                summary[[SOURCE_COLUMN, SPLIT, *scope, *SCORE_COLUMNS]]),
        Section("candidates", "Calibration and target candidates (held-out)",
                "Every training target and calibration `hase train` tried, scored on held-out families, best "
                "RMSPE first; `chosen` marks the one this predictor uses.",
                candidates[[TARGET, CALIBRATION, CHOSEN, *SCORE_COLUMNS]]),
        Section("baselines", "Baselines (held-out)",
                "What a straight line in model FLOPs (and bytes) achieves on the same held-out families: the "
                "per-op predictor should do clearly better.", ev.baseline_scores[[BASELINE, *SCORE_COLUMNS]]),
        Section("families", "Held-out error by family",
                "Each family predicted by a predictor trained on the other families only, worst first. A high "
                "RMSPE means the family has kernels or shapes unlike the rest of the training set.",
                ev.families.sort_values("rmspe", ascending=False)[[dataset.FAMILY, *SCORE_COLUMNS]]),
        Section("kernels", "Held-out kernel error by predictor key (kernels never seen in training)",
                "Single-kernel predictions for kernels only the held-out family has, grouped by the forest that "
                "predicted them, largest RMSE (ms) first: where a better feature or more training shapes would "
                "help model latency most.", ev.kernels[[KEY, *SCORE_COLUMNS]]),
        Section("models", "Every model",
                "One row per measured model: its measured latency, the held-out prediction, and each source as a "
                "ratio to the measured latency (1.000 = exact).",
                ev.models[[dataset.MODEL_ID, dataset.FAMILY, dataset.MEASURED_MS, CALIBRATED_HELD_OUT_MS,
                           *ratio_cols]]),
    ]


def devset_lines(dev: devset.DevsetEvaluation) -> list[str]:
    """The devset's headline figures as Markdown bullet points: Hase, then each baseline, over every row."""
    rows = devset.with_baselines(dev.rows)
    cfg = ", ".join(f"{k} {rows[k].iloc[0]}" for k in ("cpu_model", "opt_level", "intra_op_threads")) if len(rows) \
        else "nothing measured"
    n_err = int((dev.rows[devset.ERROR].fillna("") != "").sum())
    lines = [f"- real exported models: {len(rows)} rows ({rows[devset.MODEL].nunique() if len(rows) else 0} models"
             f"{f', {n_err} could not be evaluated' if n_err else ''}), predictor `{dev.predictor_device}`, measured "
             f"here ({cfg})"]
    if dev.host_mismatches:
        lines.append(f"- this host differs from the predictor's machine: {'; '.join(dev.host_mismatches)}")
    if dev.left_out:
        lines.append(f"- left out of the batch sweep: {len(dev.left_out)} models ("
                     + "; ".join(f"{m}: {why}" for m, why in list(dev.left_out.items())[:3])
                     + ("; ..." if len(dev.left_out) > 3 else "") + ")")
    for _, r in dev.scores[dev.scores[devset.GROUP] == devset.ALL].iterrows():
        lines.append(f"- real exported models, {r[devset.METHOD]}: ±10 % **{percent(r['acc10'])}**, RMSPE "
                     f"**{r['rmspe']:.1f} %**, median error {r[devset.MEDIAN_ERROR_PCT]:+.1f} % over {r['n']} rows"
                     if r["n"] else f"- real exported models, {r[devset.METHOD]}: no rows to score")
    return lines


def devset_sections(dev: devset.DevsetEvaluation) -> list[Section]:
    """The real exported models' tables: scores by group against the baselines, then every row."""
    rows = dev.rows.rename(columns={devset.MEASURED_MS: MEASURED_MIN_MS})
    rows = rows[rows[devset.ERROR].fillna("") == ""].sort_values([devset.GROUP, devset.MODEL, devset.BATCH])
    shown = [devset.MODEL, devset.GROUP, devset.BATCH, devset.PREDICTED_MS, MEASURED_MIN_MS, devset.ERROR_PCT,
             devset.SPREAD, devset.NOISY,
             dataset.N_KERNELS, MODEL_FLOPS, MODEL_BYTES]
    return [*sweep_sections(dev),
        Section("devset", "Real exported models",
                "Models exported by third-party libraries (none in the training zoo), predicted by this predictor "
                "and measured on this host in the predictor's own configuration, by group, beside straight lines in "
                "FLOPs and in FLOPs and bytes fitted on the other models (leave-one-model-out). A model with a "
                "symbolic batch dimension is scored at batch 1, 2, 4 and 8.",
                dev.scores[list(devset.SCORE_TABLE)]),
        Section("devset_models", "Real exported models, one row per model and batch",
                "Worst predictions show where the predictor extrapolates; `noisy` rows were measured while the host's "
                "speed moved.", rows[shown]),
    ]


def sweep_sections(dev: devset.DevsetEvaluation) -> list[Section]:
    """The batch sweep's tables (when the rows hold models at MIN_BATCHES batch sizes or more): scores per batch
    size, then each sweep's latency and throughput, predicted and measured."""
    table = sweep_curves.sweep_table(dev.rows, dev.families)
    if table.empty:
        return []
    shown = table.rename(columns={devset.MEASURED_MS: MEASURED_MIN_MS})
    return [
        Section("sweep_scores", "Batch sweep, by batch size",
                f"The models run at {sweep_curves.MIN_BATCHES} batch sizes or more, scored at each batch size: an "
                "error that grows with the batch shows here before it shows in the overall figure.",
                sweep_curves.batch_scores(table)),
        Section("sweep", "Batch sweep, latency and throughput",
                "Each model across its batch sizes (the family plots draw these rows): a user sizing a server reads "
                "the throughput columns.", shown),
    ]


def _same_sums(ev: Evaluation) -> str:
    """Why the Σ in-model span and Σ kernel_time rows read the same, when they do."""
    span, kernel_time = dataset.SUM_COLUMNS["span"], dataset.SUM_COLUMNS["kernel_time"]
    if not {span, kernel_time} <= set(ev.models.columns):
        return ""
    a, b = ev.models[span].to_numpy(dtype=float), ev.models[kernel_time].to_numpy(dtype=float)
    if not np.isfinite(a).any() or not np.allclose(a, b, equal_nan=True):
        return ""
    return (" Σ in-model span and Σ kernel_time are equal for every model here: this provider's profile has no "
            "fence events, so a node's span is its kernel_time.")


def _source_label(source: str) -> str:
    return SOURCES.get(ratio_column(source), source)


def glossary(shown: Sequence[pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(column, meaning) for every column the tables show, in order of first appearance, and
    (source, columns, meaning) for every source; a column without an entry in `COLUMNS` raises HaseError."""
    cols = list(dict.fromkeys(c for frame in shown for c in frame.columns))
    missing = [c for c in cols if c not in COLUMNS]
    if missing:
        raise HaseError(f"report columns without a glossary entry: {missing}; "
                        f"add them to hase.evaluate.glossary.COLUMNS")
    columns = pd.DataFrame({"column": cols, "meaning": [COLUMNS[c] for c in cols]})
    sources = pd.DataFrame([{"source": SOURCES[ratio_column(ms)], "columns": f"`{ms}`, `{ratio_column(ms)}`",
                             "meaning": doc} for ms, doc in SOURCE_DOCS.items()])
    return columns, sources


# ---------------------------------------------------------------------- Markdown


DEVSET_READING = ("Measured = the minimum of the block medians of IOBinding runs on this host, in the predictor's "
                  "configuration. Every column is explained in the [glossary](#glossary).")


def _page(ev: Evaluation | None,
          dev: devset.DevsetEvaluation | None) -> tuple[str, list[str], str, list[Section], list[Section]]:
    """(title, headline lines, how to read it, the first sections: the worst models, then the other sections) of a
    report of `ev`, `dev` or both."""
    lines = headline_lines(ev) if ev is not None else []
    secs = sections(ev) if ev is not None else []
    first = worst_sections(ev, dev)
    if dev is not None:
        lines += devset_lines(dev)
        secs += devset_sections(dev)
    device = ev.device if ev is not None else f"real exported models, {dev.predictor_device if dev else ''}"
    return f"Hase evaluation: {device}", lines, READING if ev is not None else DEVSET_READING, first, secs


WORST_INTRO = ("The models predicted furthest from their measured latency, each with the {k} nodes whose predicted "
               "time is furthest from their measured in-model time: where the error comes from. `clamped` marks "
               "a prediction the physical band around the kernel's roofline cut.")


def worst_sections(ev: Evaluation | None, dev: devset.DevsetEvaluation | None) -> list[Section]:
    """The worst models with the kernels that carry their error: the store's held-out models, then the real
    exported models (those the devset run profiled)."""
    out = []
    if ev is not None and len(ev.worst):
        out.append(Section("worst", "Worst models (held out) and the kernels that carry their error",
                           WORST_INTRO.format(k=worst.WORST_KERNELS), ev.worst))
    if dev is not None and len(dev.worst):
        rows = dev.worst.rename(columns={devset.MEASURED_MS: MEASURED_MIN_MS})
        out.append(Section("devset_worst", "Worst real exported models and the kernels that carry their error",
                           WORST_INTRO.format(k=worst.WORST_KERNELS), rows))
    return out


def markdown(ev: Evaluation | None, plots: dict[str, Plot], plot_dir: str = "plots",
             dev: devset.DevsetEvaluation | None = None) -> str:
    """The Markdown report: headline, plots with captions, the tables, the glossary."""
    title, lines, reading, first, secs = _page(ev, dev)
    parts = [f"# {title}", "", *lines, "", reading, ""]
    for s in first:
        parts += [f"## {s.title}", "", s.intro, "", md_table(s.table), ""]
    for name, p in plots.items():
        parts += [f"### {p.title}", "", f"![{p.title}]({plot_dir}/{name}.png)", "", p.caption, ""]
    for s in secs:
        parts += [f"## {s.title}", "", s.intro, "", md_table(s.table), ""]
    columns, sources = glossary([s.table for s in [*first, *secs]])
    parts += ["## Glossary", "", md_table(columns), ""]
    if ev is not None:
        parts += ["### Sources", "", md_table(sources), ""]
    return "\n".join(parts)


def html_page(ev: Evaluation | None, plots: dict[str, Plot], dev: devset.DevsetEvaluation | None = None) -> str:
    """A self-contained HTML page: the Markdown report's content, plots inlined as base64 PNG."""
    title, lines, reading, first, secs = _page(ev, dev)
    columns, sources = glossary([s.table for s in [*first, *secs]])
    heads = "".join(f"<li>{inline_html(line[2:])}</li>" for line in lines)
    toc = " · ".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t in
                     [*((s.anchor, s.title) for s in first), ("plots", "Plots"), *((s.anchor, s.title) for s in secs),
                      ("glossary", "Glossary")])
    figs = "".join(
        f'<figure><img alt="{html.escape(p.title)}" src="data:image/png;base64,{base64.b64encode(p.png).decode()}"/>'
        f"<figcaption>{inline_html(p.caption)}</figcaption></figure>" for p in plots.values())
    def block(s: Section) -> str:
        return (f'<h2 id="{s.anchor}">{html.escape(s.title)}</h2><p class="intro">{inline_html(s.intro)}</p>'
                f"{html_table(s.table)}")

    first_html, body = "".join(block(s) for s in first), "".join(block(s) for s in secs)
    title = html.escape(title)
    glossed = f'<h3>Sources</h3>{html_table(sources, "glossary", markup=True)}' if ev is not None else ""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>{title}</title>"
            f"<style>{STYLE}</style></head><body><h1>{title}</h1><ul>{heads}</ul>"
            f'<p class="intro">{inline_html(reading)}</p><p>{toc}</p>{first_html}'
            f'<h2 id="plots">Plots</h2><div class="plots">{figs}</div>{body}'
            f'<h2 id="glossary">Glossary</h2>{html_table(columns, "glossary", markup=True)}'
            f"{glossed}</body></html>\n")
