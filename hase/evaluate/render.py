"""Cells and tables of the evaluation report, in Markdown and in HTML (escaped, numbers aligned, headings
that explain their column from the glossary)."""
from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hase.evaluate.glossary import COLUMNS

SHARE_COLUMNS, PERCENT_COLUMNS = ("acc5", "acc10"), ("rmspe",)


# ---------------------------------------------------------------------- cells and lines


def fmt(v: Any) -> str:
    """A table cell: numbers to 3 significant decimals, shares as given, NaN and None as an em dash."""
    if v is None or v is pd.NA:
        return "—"
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


def cell(column: str, v: Any) -> str:
    """A cell of `column`: accuracies as percentages (71%), RMSPE to one decimal, everything else by `fmt`."""
    if isinstance(v, (float, np.floating)) and np.isfinite(v):
        if column in SHARE_COLUMNS:
            return f"{v:.0%}"
        if column in PERCENT_COLUMNS:
            return f"{v:.1f}"
    return fmt(v)


def md_table(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """A GitHub Markdown table of the given columns."""
    cols = list(columns or frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(c, v) for c, v in zip(cols, row, strict=True)) + " |"
              for row in frame[cols].itertuples(index=False)]
    return "\n".join(lines)


# ---------------------------------------------------------------------- HTML

_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\(([^)\s]+)\)")
STYLE = """
body{font-family:system-ui,sans-serif;line-height:1.45;color:#222;max-width:1200px;margin:0 auto;padding:1em 1.5em}
h2{margin-top:2em;border-bottom:1px solid #ddd}p,li,figcaption{overflow-wrap:anywhere}p.intro{max-width:90ch}
code{background:#f2f2f2;padding:0 .25em;border-radius:3px;font-size:90%}
.scroll{overflow-x:auto;max-width:100%;margin:.5em 0 1em}
table{border-collapse:collapse;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #e3e3e3;text-align:left}
th{background:#f6f6f6;vertical-align:bottom}th[title]{cursor:help;text-decoration:underline dotted}
td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
table.glossary td{vertical-align:top}table.glossary td:first-child{white-space:nowrap}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,520px),1fr));gap:1.5em}
figure{margin:0}img{width:100%;height:auto;border:1px solid #eee}figcaption{font-size:13px;color:#444}
""".strip()


def inline_html(text: str) -> str:
    """Escape text and render its inline Markdown: `code`, **bold** and [links](#anchor)."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        code, bold, label, href = m.groups()
        out.append(f"<code>{html.escape(code)}</code>" if code is not None else
                   f"<strong>{html.escape(bold)}</strong>" if bold is not None else
                   f'<a href="{html.escape(href)}">{html.escape(label)}</a>')
        pos = m.end()
    return "".join(out) + html.escape(text[pos:])


def html_table(frame: pd.DataFrame, css: str = "", markup: bool = False) -> str:
    """A DataFrame as an HTML table in its own scrolling box; headings wrap at `_` and explain their column.

    Numbers are formatted like the Markdown report and right-aligned; `markup` (the glossary's own tables)
    renders cells' inline Markdown instead.
    """
    def th(c: str) -> str:
        tip = f' title="{html.escape(COLUMNS[c].replace("`", ""))}"' if c in COLUMNS and not markup else ""
        return f"<th{tip}>{html.escape(c).replace('_', '_<wbr>')}</th>"

    def td(c: str, v: Any) -> str:
        if markup and isinstance(v, str):
            return f"<td>{inline_html(v)}</td>"
        number = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
        return f'<td class="n">{cell(c, v)}</td>' if number else f"<td>{html.escape(cell(c, v))}</td>"

    cols = list(frame.columns)
    rows = "".join("<tr>" + "".join(td(c, v) for c, v in zip(cols, row, strict=True)) + "</tr>\n"
                   for row in frame.itertuples(index=False))
    cls = f' class="{css}"' if css else ""
    return (f'<div class="scroll"><table{cls}><thead><tr>{"".join(th(c) for c in cols)}</tr></thead>'
            f"<tbody>\n{rows}</tbody></table></div>")
