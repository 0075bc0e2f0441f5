"""What a first hour with a report trips on (issue 27, point 6): the per-criterion heatmap coloured on the
rubric's scale, a rounding residue printed as 0.000, sections with nothing to show in one line, and the
report written with the user's umask. One real sweep on the fake provider renders the report."""

from __future__ import annotations

import json
import os
import re

import polars as pl
import pytest

from bench.analysis import load_run, summarize
from bench.report import display
from bench.report import figures as fg
from bench.testing.grids import generate, grid, judge, model, prompt, rubric
from bench.testing.in_process import run_stages


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory, fake_server):
    """Run a grid with no pairwise judge and no repeats under umask 022 (it renders its report); return tmp."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("first-hour")
    rubric(tmp / "wide.md", "quality", "clarity")
    rubric(tmp / "mixed.md", "quality", ("clarity", {0: "bad", 1: "fair", 2: "good"}))
    url = fake_server.url
    grid(tmp / "fh.yaml", url, name="fh", seed=4,
         models=[model("m1", url, name="fake-a"), model("m2", url, name="fake-b")],
         prompts=[prompt("tip", "One tip about {topic}.")],
         scenarios=generate(topic=["email", "sleep", "focus", "lunch", "walks"]),
         judges=[judge("grader", url, rubric="wide.md", name="judge"),
                 judge("mixed", url, rubric="mixed.md", name="judge")],
         limits={"max_concurrency": 8, "timeout_s": 10, "retries": 2})
    fake_server.configure(model_quality={"fake-a": 0.45, "fake-b": 0.6})  # means inside the scale, not at its ends
    old = os.umask(0o022)
    try:
        out = run_stages(tmp, tmp / "fh.yaml", report=True)
    finally:
        os.umask(old)
        fake_server.reset()
    assert out.returncode == 0, out.log
    return tmp


def _heatmaps(html_text: str) -> list[dict]:
    """Return every heatmap trace plotly was given in the report (from the inlined figure JSON)."""
    found = []
    for blob in re.findall(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*\{', html_text, flags=re.S):
        found += [t for t in json.loads(blob) if t.get("type") == "heatmap"]
    return found


def test_the_criteria_heatmap_is_coloured_on_the_rubrics_scale(shared_run):
    run = shared_run / "runs" / "fh"
    t = load_run(run)
    s = summarize(run, resamples=50)
    from bench.analysis.scales import judge_scales  # noqa: PLC0415 (issue 27: the rubric scales of a run)

    scales = judge_scales(run, t.judgments)
    assert scales["grader"] == {"quality": (1.0, 5.0), "clarity": (1.0, 5.0), "composite": (1.0, 5.0)}
    means = s.board.filter(pl.col("judge") == "grader")["mean"]
    assert 1 < means.min() and means.max() < 5, "the data spans less than the scale: the test means something"
    trace = fg.criteria_heatmap(s.board, "grader", scales=scales["grader"]).data[0]
    assert (trace.zmin, trace.zmax) == (1.0, 5.0) and "scale 1–5" in trace.colorbar.title.text
    mixed = fg.criteria_heatmap(s.board, "mixed", scales=scales["mixed"]).data[0]
    assert (mixed.zmin, mixed.zmax) == (0.0, 1.0), "scales that differ: each column on its own scale's share"
    assert all(0 <= v <= 1 for row in mixed.z for v in row if v is not None)
    report = (shared_run / "reports" / "fh" / "index.html").read_text()
    shown = _heatmaps(report)
    assert len(shown) == 2 and {(h["zmin"], h["zmax"]) for h in shown} == {(1.0, 5.0), (0.0, 1.0)}


def test_a_value_that_rounds_to_zero_prints_as_zero():
    residue = 0.1 + 0.2 - 0.3  # float arithmetic that should be 0: 5.55e-17
    assert residue != 0 and abs(residue) < 1e-15
    assert [display.number(v) for v in (-2.220446049250313e-16, residue, -0.0, 1e-13)] == ["0.000"] * 4
    assert display.number(-2.220446049250313e-16, unit="$") == "$0.000"
    assert [display.number(v) for v in (0.00042, -0.00042, 4.2e-05, -0.5)] == ["0.00042", "-0.00042", "4.2e-05", "-0.500"]
    frame = pl.DataFrame({"cell": ["a/p@v1"], "mean": [-2.220446049250313e-16], "cost_usd": [0.00042]})
    text = display.table_text(frame)
    assert "e-16" not in text and "0.000" in text and "$0.00042" in text


def test_a_section_with_nothing_to_show_is_one_line(shared_run):
    report = (shared_run / "reports" / "fh" / "index.html").read_text()
    for title, why in (("Pairwise: win rates and Bradley–Terry ratings", "no pairwise judge in this run."),
                       ("Pairwise: style control", "no pairwise judge in this run."),
                       ("Judge stability", "no judge graded an answer more than once"),
                       ("Failed items", "none: every planned answer and judgment succeeded.")):
        line = re.search(rf'<p class="bench-note"><b>{re.escape(title)}</b>: ([^<]*)</p>', report)
        assert line is not None and line.group(1).startswith(why), title
        assert not re.search(rf"<h2[^>]*>{re.escape(title)}", report), f"{title}: a heading for nothing"
    assert re.search(r"<h2[^>]*>Leaderboard", report), "a section with something to show keeps its heading"


def test_the_report_is_written_with_the_users_umask(shared_run):
    report = shared_run / "reports" / "fh" / "index.html"
    assert report.stat().st_mode & 0o777 == 0o644, oct(report.stat().st_mode)
