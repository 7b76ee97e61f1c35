"""hase.evaluate.report: the Markdown and HTML reports hold the rows and figures of the evaluation they render."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from hase.errors import HaseError
from hase.evaluate.evaluation import Evaluation, Headline
from hase.evaluate.plots import Plot
from hase.evaluate.ratios import (
    CALIBRATED_HELD_OUT_MS,
    CALIBRATED_TRAIN_MS,
    SUM_PRED_HELD_OUT_MS,
    ratio_column,
    ratio_summary,
)
from hase.evaluate.render import fmt, inline_html, md_table
from hase.evaluate.report import glossary, headline_lines, html_page, markdown, write_report
from hase.predict import dataset
from hase.predict.calibration import Calibration
from hase.predict.crossval import HELD_OUT, SPLIT, TARGET
from hase.predict.metrics import grouped_metrics, score


@pytest.fixture(scope="module")
def evaluation() -> Evaluation:
    """A small evaluation built from constructed measurements: two zoo families and one exported model."""
    models = pd.DataFrame({
        dataset.MODEL_ID: ["alex_a", "alex_b", "res_a", "res_b", "torch_x"],
        dataset.FAMILY: ["alexnet", "alexnet", "resnet", "resnet", "exported"],
        dataset.MEASURED_MS: [1.0, 2.0, 4.0, 8.0, 3.0],
        dataset.SUM_COLUMNS["span"]: [0.9, 1.8, 4.4, 7.6, 3.3],
        SUM_PRED_HELD_OUT_MS: [0.95, 2.3, 3.5, 8.2, 2.9],
        CALIBRATED_HELD_OUT_MS: [1.05, 2.1, 3.8, 8.4, 3.5],
        CALIBRATED_TRAIN_MS: [1.01, 1.98, 4.1, 7.9, 3.1],
    })
    for col in (dataset.SUM_COLUMNS["span"], SUM_PRED_HELD_OUT_MS, CALIBRATED_HELD_OUT_MS, CALIBRATED_TRAIN_MS):
        models[ratio_column(col)] = models[col] / models[dataset.MEASURED_MS]
    kernels = pd.DataFrame({"key": ["Conv", "Conv", "Add"], "y_ms": [0.1, 0.2, 0.01], "pred_ms": [0.11, 0.2, 0.02]})
    held = {"m": models[dataset.MEASURED_MS], "p": models[CALIBRATED_HELD_OUT_MS]}
    cands = pd.DataFrame({TARGET: ["span"] * 5, "calibration": ["scale/ols"] * 5, SPLIT: [HELD_OUT] * 5, **held})
    exported = models[models[dataset.FAMILY] == "exported"]
    headline = Headline(
        device="cpu-1t", target="span", calibration=Calibration("scale", "ols", 1.0312, 0.0021, 0.0),
        n_models=5, n_families=3, held_out=score(held["m"], held["p"]),
        held_out_exported=score(exported[dataset.MEASURED_MS], exported[CALIBRATED_HELD_OUT_MS]),
        train=score(models[dataset.MEASURED_MS], models[CALIBRATED_TRAIN_MS]),
        baselines={"flops": score([1.0, 2.0], [2.0, 1.0])}, kernels_held_out=score(kernels["y_ms"], kernels["pred_ms"]))
    baselines = models[[dataset.MODEL_ID, dataset.FAMILY, dataset.MEASURED_MS]].assign(flops=[2.0, 1.0, 4.0, 8.0, 3.0])
    return Evaluation(
        "cpu-1t", "span", "scale/ols", models, ratio_summary(models),
        grouped_metrics(cands, [TARGET, "calibration"], "m", "p"), baselines,
        pd.DataFrame([{"baseline": "flops", **headline.baselines["flops"].to_dict()}]),
        grouped_metrics(kernels, "key", "y_ms", "pred_ms"),
        grouped_metrics(models, dataset.FAMILY, dataset.MEASURED_MS, CALIBRATED_HELD_OUT_MS), headline)


def test_cells_and_tables_are_formatted_for_people():
    cells = (fmt(np.float64(0.12345)), fmt(1234.56), fmt(float("nan")), fmt(np.int64(7)))
    assert cells == ("0.123", "1234.6", "—", "7")
    assert (fmt(True), fmt(np.bool_(False)), fmt("x")) == ("yes", "no", "x")
    table = md_table(pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]}))
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1 | 0.500 |", "| 2 | — |"]


def test_headline_lines_quote_the_figures(evaluation):
    lines = headline_lines(evaluation)
    h = evaluation.headline
    assert "α=1.0312, β=0.0021 ms, γ=0.00 µs/kernel); 5 models, 3 families" in lines[0]
    assert f"±10 % accuracy **{h.held_out.acc10:.0%}**" in lines[1]
    assert f"RMSPE **{h.held_out.rmspe:.1f} %**" in lines[1]
    assert f"over {h.held_out_exported.n} models" in lines[2] and lines[-1].startswith("- baseline, linear in flops")


PLOT = {"ratios": Plot("ratios", "How close each sum comes", "Look at the boxes near 1.", b"")}


def test_markdown_holds_every_model_and_family_row(evaluation):
    md = markdown(evaluation, PLOT)
    assert "| alex_b | alexnet | 2.000 | 2.100 |" in md  # model, family, measured, calibrated held-out, ...
    assert "| torch_x | exported | 3.000 | 3.500 | 1.100 |" in md  # ... then the ratios: Σ span first
    assert "| resnet | 2 | 0.316 | 5.0 | 100% | 100% |" in md  # 3.8 and 8.4 ms for 4 and 8: RMSE sqrt(0.1), RMSPE 5 %
    assert "| span | scale/ols | yes | 5 |" in md  # the candidate this predictor uses is marked
    assert "![How close each sum comes](plots/ratios.png)\n\nLook at the boxes near 1." in md
    assert md.index("## Held-out error by family") < md.index("## Every model") < md.index("## Glossary")


def test_summary_scopes_are_split_only_when_the_store_has_both_kinds(evaluation):
    both = evaluation.summary
    assert both.groupby("source")["scope"].apply(list).map(tuple).unique().tolist() == [("all", "zoo", "exported")]
    zoo_only = ratio_summary(evaluation.models[evaluation.models[dataset.FAMILY] != "exported"])
    assert set(zoo_only["scope"]) == {"all"} and not zoo_only.duplicated(["source"]).any()
    assert "| scope |" in md_table(both) and "| scope |" not in markdown(_without_exported(evaluation), {})


def _without_exported(ev: Evaluation) -> Evaluation:
    """The fixture's evaluation as a store without exported models would give it (the clean-clone case)."""
    import dataclasses

    zoo = ev.models[ev.models[dataset.FAMILY] != "exported"]
    no_exported = score([], [])
    return dataclasses.replace(ev, models=zoo, summary=ratio_summary(zoo),
                               headline=dataclasses.replace(ev.headline, held_out_exported=no_exported))


def test_a_store_without_exported_models_reads_without_nan(evaluation):
    ev = _without_exported(evaluation)
    lines = headline_lines(ev)
    assert "no exported models in this store" in lines[2] and "nan" not in " ".join(lines).lower()
    assert "nan" not in markdown(ev, PLOT).lower()
    assert "nan" not in html_page(ev, PLOT).lower()


def _strict_json(text: str) -> object:
    """JSON as the standard defines it: the `NaN` and `Infinity` tokens Python's json writes by default are refused."""
    def refuse(token: str) -> object:
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_headline_json_writes_a_figure_without_models_as_null(evaluation, tmp_path):
    paths = write_report(_without_exported(evaluation), tmp_path / "rep")
    head = _strict_json(paths["headline.json"].read_text())  # once held "acc10": NaN, which no JSON parser reads
    assert isinstance(head, dict)
    assert head["held_out_exported"]["n"] == 0 and head["held_out_exported"]["acc10"] is None
    assert head["held_out"]["acc10"] == pytest.approx(evaluation.headline.held_out.acc10)


def test_every_shown_column_is_explained_in_the_glossary(evaluation):
    tables, explained = markdown(evaluation, {}).split("## Glossary")
    lines = tables.splitlines()
    headings = {c for line, below in itertools.pairwise(lines) if below.startswith("|---")
                for c in line.strip("| ").split(" | ")}
    assert {"acc5", "scope", "chosen", "key", "sum_span_ratio"} <= headings
    assert [c for c in headings if f"\n| {c} | " not in explained] == []  # every heading has a glossary row
    columns, sources = glossary([pd.DataFrame(columns=["acc5", "sum_span_ratio", "scope", "chosen"])])
    assert columns["column"].tolist() == ["acc5", "sum_span_ratio", "scope", "chosen"]
    assert columns["meaning"].str.len().gt(20).all() and "Σ in-model span" in sources["source"].tolist()
    with pytest.raises(HaseError, match=r"without a glossary entry: \['mystery_ms'\]"):
        glossary([pd.DataFrame(columns=["n", "mystery_ms"])])


def test_html_renders_inline_markdown_and_explains_headings(evaluation):
    assert inline_html("a `x<y` **b** [g](#glossary)") == \
        'a <code>x&lt;y</code> <strong>b</strong> <a href="#glossary">g</a>'
    page = html_page(evaluation, PLOT)
    assert "`" not in page and "<code>cpu-1t</code>" in page and "**" not in page
    assert '<th title="share of models whose sum or prediction is within ±5 % of the measured latency">acc5</th>' \
        in page
    assert page.count('<div class="scroll"><table') == 8  # six tables and the glossary's two, each in its box
    assert '<figcaption>Look at the boxes near 1.</figcaption>' in page and 'alt="How close each sum comes"' in page


@pytest.mark.slow
def test_plots_are_titled_for_people_and_the_per_op_chart_is_sorted(evaluation):
    import matplotlib.pyplot as plt

    from hase.evaluate.plots import _op_error, render_plots

    plots = render_plots(evaluation)
    assert all(p.png.startswith(b"\x89PNG") and "_" not in p.title and len(p.caption) > 80 for p in plots.values())
    assert plots["op_error"].title == "Unseen kernels: the 2 predictor keys with the largest error (ms)"
    fig, ax = plt.subplots()
    _op_error(ax, evaluation)
    widths = [bar.get_width() for bar in ax.patches]  # drawn bottom-up, so the largest RMSE is last (on top)
    plt.close(fig)
    assert widths == sorted(widths) and widths[-1] == pytest.approx(evaluation.kernels["rmse_ms"].max())


@pytest.mark.slow
def test_write_report_writes_tables_plots_and_pages(evaluation, tmp_path):
    paths = write_report(evaluation, tmp_path / "rep")
    assert {p.name for p in paths.values()} >= {"report.md", "report.html", "headline.json", "models.csv",
                                                  "pred_vs_measured.png", "op_error.png"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())
    assert pd.read_csv(paths["models.csv"])[dataset.MODEL_ID].tolist() == evaluation.models[dataset.MODEL_ID].tolist()
    assert json.loads(paths["headline.json"].read_text())["held_out"]["n"] == 5
    page = paths["report.html"].read_text()
    assert page.count("data:image/png;base64,") == 4 and "<td>torch_x</td>" in page and "<td>resnet</td>" in page
    assert "**" not in page and "Hase evaluation: cpu-1t" in page
    assert "](plots/pred_vs_measured.png)" in paths["report.md"].read_text()
    assert not list((tmp_path / "rep").glob(".*.tmp"))  # atomic writes leave no temporary files
