"""hase.evaluate.report in a real browser: the HTML report of a real tiny evaluation, rendered by headless Chromium.

A copy of report.html gets a small script that, once the page has loaded, writes what the browser sees into
a hidden <pre id="checks">: text with `nan`, images that did not load, the page's width against the window's.
`--dump-dom` hands the DOM back; a screenshot is kept in the test's tmp_path for a person to look at.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tiny_store import build_tiny_store, train_tiny

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")
CHECKS = """<script>
window.addEventListener("load", () => {
  const text = document.body.innerText;
  const titles = [...document.querySelectorAll("[title],[alt]")].map(e => (e.title || "") + " " + (e.alt || ""));
  const scroller = document.scrollingElement;
  const out = {
    nan: (text.match(/\\bnan\\b/gi) || []).length + titles.filter(t => /\\bnan\\b/i.test(t)).length,
    backticks: (text.match(/`/g) || []).length,
    code: document.querySelectorAll("code").length,
    images: document.images.length,
    broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt),
    scroll_width: scroller.scrollWidth, inner_width: window.innerWidth,
    wider_than_window: [...document.body.querySelectorAll("*")]
      .filter(e => !e.closest(".scroll") && e.getBoundingClientRect().right > window.innerWidth + 0.5)
      .map(e => e.tagName + (e.className ? "." + e.className : "")).slice(0, 10),
    tables: document.querySelectorAll("table").length,
    tables_in_scroll_box: document.querySelectorAll(".scroll > table").length,
  };
  const pre = document.createElement("pre");
  pre.id = "checks"; pre.style.display = "none"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def browser() -> str:
    """The headless browser to drive, or a skip saying how to install one."""
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    pytest.skip("chromium not installed: apt-get install chromium")


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser, checked before the (slower) report is built."""
    return browser()


def run_browser(page: Path, tmp: Path, size: tuple[int, int], *args: str) -> str:
    """Open `page` in a window of `size` px with a fresh profile; returns stdout (the DOM with --dump-dom)."""
    width, height = size
    cmd = [browser(), *FLAGS, f"--user-data-dir={tmp / f'profile-{width}'}", f"--window-size={width},{height}", *args,
           page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


def browser_checks(report_html: Path, tmp: Path, width: int) -> dict[str, Any]:
    """What Chromium sees in a copy of the report (the product file stays untouched)."""
    page = tmp / f"checked-{width}.html"
    text = report_html.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    page.write_text(text.replace("</body>", CHECKS + "</body>"), encoding="utf-8")
    dom = run_browser(page, tmp, (width, 1000), "--virtual-time-budget=10000", "--dump-dom")
    start = dom.index('<pre id="checks"')
    found: dict[str, Any] = json.loads(dom[dom.index(">", start) + 1: dom.index("</pre>", start)])
    return found


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory) -> Path:
    """report.html of a real evaluation: the tiny store (three families, no exported models) and its predictor."""
    from hase.evaluate.report import report_predictor

    root = tmp_path_factory.getbasetemp() / "hase_tiny"
    root.mkdir(exist_ok=True)
    build_tiny_store(root)
    _, paths = report_predictor(root / "tiny.sqlite", train_tiny(root) / "cpu-1t", tmp_path_factory.mktemp("report"))
    return paths["report.html"]


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 700])
def test_report_renders_cleanly_in_chromium(chromium, tiny_report, tmp_path, width):
    checks = browser_checks(tiny_report, tmp_path, width)
    assert checks["nan"] == 0 and checks["backticks"] == 0 and checks["code"] > 5
    assert checks["images"] == 4 and checks["broken"] == []
    assert checks["scroll_width"] <= checks["inner_width"] == width, checks["wider_than_window"]
    # nine tables (the worst-models table is the ninth), every one in its scroll box
    assert checks["wider_than_window"] == [] and checks["tables"] == checks["tables_in_scroll_box"] == 9
    shot = tmp_path / f"report-{width}.png"
    run_browser(tiny_report, tmp_path, (width, 3000), f"--screenshot={shot}")
    assert shot.stat().st_size > 10_000 and shot.read_bytes().startswith(b"\x89PNG")
