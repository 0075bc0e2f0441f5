"""The diff report renders: one self-contained HTML file whose parsed content holds the warnings first, the table,
the forest plot, the changed items side by side and the answers of one run only; what a run wrote is escaped."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from bench.analysis import compare_runs
from bench.compare import write_diff_report
from bench.core.store import RunStore
from bench.testing.records import candidate, judgment, scenario
from tests.compare.conftest import CHANGED_A, CHANGED_B, STRONG_ANSWER

XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>"


class Page(HTMLParser):
    """The parts of a page a test reads: headings in order, scripts, tables, the text of every element."""

    def __init__(self, text: str):
        super().__init__()
        self.headings: list[tuple[str, str]] = []
        self.scripts: list[dict[str, str | None]] = []
        self.script_text: list[str] = []
        self.tables = 0
        self.plots = 0
        self.order: list[str] = []  # "warnings" and each h2, in document order
        self.text: list[str] = []
        self._tag: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self._tag = tag
        if tag == "script":
            self.scripts.append(found)
        elif tag == "table":
            self.tables += 1
        elif tag == "div" and "plotly-graph-div" in (found.get("class") or ""):
            self.plots += 1
        elif tag == "div" and found.get("class") == "warnings":
            self.order.append("warnings")

    def handle_data(self, data):
        if self._tag == "script":
            self.script_text.append(data)
            return
        self.text.append(data)
        if self._tag in ("h1", "h2", "h3") and data.strip():
            self.headings.append((self._tag, data.strip()))
            if self._tag == "h2":
                self.order.append(data.strip())

    def handle_endtag(self, tag):
        self._tag = None


def test_the_diff_report_of_two_sweeps_renders(two_runs):
    tmp, a, b = two_runs
    cmp = compare_runs(a, b, mapping={CHANGED_A: CHANGED_B}, n_boot=500)
    path = write_diff_report(cmp, tmp / "diff")
    assert path == (tmp / "diff" / "index.html").resolve()
    page = Page(path.read_text(encoding="utf-8"))
    assert ("h1", "cb compared with ca") in page.headings
    assert page.order[:2] == ["warnings", "Summary"], "the warnings come first"
    assert {"Differences B − A", "The items that changed most", "Answers only one run has"} <= set(page.order)
    assert page.plots == 1, "the forest plot"
    assert all(s.get("src") is None for s in page.scripts), "no script from the network: plotly.js is inline"
    assert any("Plotly.newPlot" in s for s in page.script_text) and any("plotly.js v" in s for s in page.script_text)
    assert page.tables >= 4  # differences, pairwise, a side-by-side table per changed item, only-in listings
    text = "\n".join(page.text)
    assert STRONG_ANSWER in text and text.count("fake answer") >= 10, "both answers of each changed item"
    assert f"{CHANGED_A} → {CHANGED_B} · judge grader" in text
    data = json.loads((tmp / "diff" / "comparison.json").read_text())
    assert data["run_b"] == "cb" and len(data["rows"]) == cmp.rows.height


def _run(root: Path, answer: str, score: float, judge_model: str = "openai/j") -> None:
    s = scenario({"q": XSS})
    c = candidate(s, model_id=XSS[:8].replace("<", "m"), output=answer)
    RunStore(root).append([s, c, judgment(c, score=score, judge_model=judge_model, rationale=XSS)])


def test_text_from_a_run_is_escaped_and_warnings_come_first(tmp_path):
    _run(tmp_path / "a", "plain", 2.0)
    _run(tmp_path / "b", XSS, 4.0, judge_model="openai/other")
    cmp = compare_runs(tmp_path / "a", tmp_path / "b", n_boot=50)
    assert cmp.warnings[0].startswith("judge j: model openai/j in run A, openai/other in run B")
    html_text = write_diff_report(cmp, tmp_path / "out.html").read_text(encoding="utf-8")
    page = Page(html_text)
    assert page.order[0] == "warnings"
    assert "<img src=x" not in html_text and "<script>alert" not in html_text
    assert XSS in "\n".join(page.text), "shown as text, escaped"
    assert all(s.get("src") is None for s in page.scripts)
