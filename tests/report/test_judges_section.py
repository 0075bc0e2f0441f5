"""The report's Judges section (issue 33, points 1 and 5): on a reviewed fake-provider run, the agreement table, one
confusion heatmap per judge and the bias by grade, drawn in headless Chromium with the network cut; on a run
nobody reviewed (as the demo's), the section is there with its empty states said in words."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from bench.analysis import confusion, load_run
from bench.testing.in_process import command
from tests.judge_trust.reviewed_run import reviewed_run

CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
HEATMAPS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .filter(g => (g.layout.title.text || '').startsWith('Confusion with human reviews'))
  .map(g => ({title: g.layout.title.text, criteria: (g.layout.annotations || []).map(a => a.text),
              drawn: g.querySelectorAll('.heatmaplayer image, .heatmaplayer .hm').length,
              panels: g.data.map(d => ({x: d.x, y: d.y, z: d.z}))}))"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory, fake_server):
    """(the reviewed run, its report rendered after the reviews, the unreviewed run's report from its sweep)."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("judges-report")
    run = reviewed_run(tmp, fake_server.url)
    out = command(tmp, "report", str(run), "--resamples", "200")
    assert out.returncode == 0, out.log
    reviewed_run(tmp, fake_server.url, name="bare", reviewers=(), report=True)
    return run, tmp / "reports" / "judged" / "index.html", tmp / "reports" / "bare" / "index.html"


def test_an_unreviewed_run_shows_the_section_with_honest_empty_states(reports):
    text = reports[2].read_text()
    assert "Judges: agreement with human reviews and bias audit" in text
    assert "<b>Agreement with human reviews</b>: no reviews yet: every judge reads" in text
    assert "own agreement (the ceiling)</b>: no reviews yet: the ceiling needs two or more reviewers" in text
    assert "Bias audit" in text and "first_slot_preference" in text  # the audit needs no review
    assert "Confusion with human reviews" not in text


def test_a_reviewed_run_shows_its_agreement_and_draws_a_confusion_heatmap_per_judge(reports):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    run, report, _ = reports
    remote = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
        page = browser.new_page()
        page.route(re.compile(r"^(?!file:).*"), lambda route: (remote.append(route.request.url), route.abort()))
        page.goto(report.as_uri(), wait_until="load")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 6", timeout=30000)
        heatmaps = page.evaluate(HEATMAPS)
        body = page.inner_text("body")
        browser.close()
    assert remote == []
    assert sorted(h["title"] for h in heatmaps) == ["Confusion with human reviews: arena",
                                                    "Confusion with human reviews: grader"]
    grader = next(h for h in heatmaps if h["title"].endswith("grader"))
    assert len(grader["panels"]) == 4 and grader["drawn"] >= 4  # composite and the three criteria, each drawn
    t = load_run(run)
    want = confusion(t, "grader", "relevance")
    assert grader["criteria"] == ["composite", "actionability", "relevance", "tone"]
    panel = grader["panels"][2]
    drawn = {(y, x): z for i, y in enumerate(panel["y"]) for j, x in enumerate(panel["x"])
             if (z := panel["z"][i][j])}
    assert drawn == {(f"{r['judge_score']:g}", f"{r['human_score']:g}"): r["count"] for r in want.to_dicts()}
    assert "Bias by human grade" in body and "Reviewers' own agreement (the ceiling)" in body
    assert "not_enough_reviews" not in body.split("Reviewers' own agreement")[0].split("Agreement with human")[1]
