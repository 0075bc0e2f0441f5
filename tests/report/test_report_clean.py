"""The report never shows the machinery (issue 13, point 4): a fake-provider sweep whose two judges give
every answer the same grades (so kappa and alpha are undefined) and whose models have a small price,
its report grepped for warnings, tracebacks and local paths, undefined statistics shown as "n/a" with
the reason, the leaderboard's dots read back from headless Chromium at their means, costs with
significant digits, cost-vs-quality labels that never overlap, a page that never scrolls sideways at
1280 px, and `--human-overrides` writing its own file."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import polars as pl
import pytest

from bench.report import figures as fg
from bench.analysis import summarize
from bench.core.errors import BenchError
from bench.report.render import to_html
from bench.report.display import number
from bench.testing.grids import generate, grid, judge, model, prompt, rubric
from bench.testing.in_process import command, run_stages

CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
UNDEFINED = "kappa n/a: every grade is 4, so agreement beyond chance is undefined"
PRICE = {"input_per_mtok": 3, "output_per_mtok": 6}
FLAT_REPLY = '{"scores": {"quality": 4, "clarity": 4}, "rationale": "fine"}'


@pytest.fixture(scope="module")
def flat_run(tmp_path_factory, fake_server):
    """Run the constant-grade grid in-process (it ends by rendering its report); return the tmp dir."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("flat")
    rubric(tmp / "flat.md", "quality", "clarity")
    url = fake_server.url
    grid(tmp / "flat.yaml", url, name="flat", seed=5,
         models=[model("m1", url, name="fake-a", price=PRICE), model("m2", url, name="fake-b", price=PRICE)],
         prompts=[prompt("tip", "One tip about {topic}."),
                  prompt("tip", "Give a single, concrete tip about {topic}.", version="v2")],
         scenarios=generate(topic=["email", "sleep", "focus", "lunch"]),
         judges=[judge("j1", url, rubric="flat.md", name="judge-a", price=PRICE),
                 judge("j2", url, rubric="flat.md", name="judge-b", price=PRICE)],
         limits={"max_concurrency": 8, "timeout_s": 10, "retries": 2})
    fake_server.configure(replies=[{"match": "MARKER-FLAT-RUBRIC", "content": FLAT_REPLY}])
    out = run_stages(tmp, tmp / "flat.yaml", report=True)
    fake_server.reset()
    assert out.returncode == 0, out.log
    return tmp


def visible_html(tmp: Path, name: str = "index.html") -> str:
    """Return the report's HTML without the inlined plotly.js bundle (whose own source mentions "Warning")."""
    text = (tmp / "reports" / "flat" / name).read_text()
    return re.sub(r'<script type="text/javascript">window\.PlotlyConfig=.*?</script>', "", text, flags=re.S)


def strict_json(text: str):
    def refuse(constant: str):
        raise ValueError(f"{constant} in JSON")
    return json.loads(text, parse_constant=refuse)


def test_a_report_of_constant_grades_shows_no_warning_traceback_or_path(flat_run):
    text = visible_html(flat_run)
    assert len(text) > 50_000
    for needle in ("Warning", "Traceback", "site-packages", "/tmp/", str(Path.home()) + "/", str(flat_run),
                   "Out of range float", "application/vnd.jupyter.stderr\" tabindex"):
        assert needle not in text, f"{needle!r} reached the report"
    assert text.count(UNDEFINED) >= 3  # per criterion and composite, in the agreement table
    assert "alpha n/a: every grade is 4, so agreement beyond chance is undefined" in text
    assert "kappa n\\u002fa: every grade is 4" in text  # the agreement heatmap's n/a cell, on hover
    executed = flat_run / "runs" / "flat" / "notebooks" / "03_analyze.ipynb"
    nb = strict_json(executed.read_text())  # no NaN/Infinity was ever put into a message
    streams = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] in ("stream", "error")]
    assert streams == [], f"the analysis printed to a stream: {streams[:1]}"


def test_undefined_agreement_is_na_with_its_reason(flat_run):
    s = summarize(flat_run / "runs" / "flat", resamples=50)
    assert s.agreement.height == 3 and s.agreement["kappa"].is_nan().all()
    assert set(s.agreement["note"]) == {UNDEFINED}
    assert set(s.alpha["note"]) == {UNDEFINED.replace("kappa", "alpha")}
    fig = fg.agreement_matrix(s.agreement)
    data = strict_json(fig.to_json())["data"][0]
    assert data["z"][0][1] is None and data["text"][0][1] == "n/a" and data["customdata"][0][1] == UNDEFINED


def test_leaderboard_figure_json_holds_the_tables_means_and_intervals(flat_run):
    s = summarize(flat_run / "runs" / "flat", resamples=50)
    fig = strict_json(fg.leaderboard_figure(s.overview).to_json())
    rows = {(r["judge"], r["cell"]): r for r in s.overview.iter_rows(named=True)}
    seen = 0
    for trace in fig["data"]:
        assert trace["orientation"] == "h"  # grouped along the cell axis, never along the score axis
        for x, y, up, down in zip(trace["x"], trace["y"], trace["error_x"]["array"], trace["error_x"]["arrayminus"]):
            r = rows[(trace["name"], y)]
            assert x == r["mean"] and x + up == pytest.approx(r["ci_high"]) and x - down == pytest.approx(r["ci_low"])
            seen += 1
    assert seen == s.overview.height == 8


def open_report(p, url: str, width: int = 1280):
    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.route(re.compile(r"^(?!file:).*"), lambda route: route.abort())
    page.goto(url, wait_until="load")
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4 && "
                           "Array.from(document.querySelectorAll('.js-plotly-plot')).every(g => g._fullLayout)",
                           timeout=30000)
    return browser, page


def chromium():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    return sync_playwright()


DRAWN_POINTS = """(prefix) => {
  const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(g => (g.layout.title.text || '').startsWith(prefix));
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, out = [];
  gd.querySelectorAll('.scatterlayer .trace').forEach((tr, i) => {
    const d = gd.data[i], bars = tr.querySelectorAll('.errorbars path.xerror');
    tr.querySelectorAll('.points path.point').forEach((pt, j) => {
      const m = pt.getAttribute('transform').match(/translate\\(([-\\d.e]+),\\s*([-\\d.e]+)\\)/);
      // an error bar is "M<x>,<y-4>v8m0,-4H<x'>m0,-4v8": its two ends, and the height of its middle
      const e = bars[j].getAttribute('d').match(/^M([-\\d.e]+),([-\\d.e]+)v8m0,-4H([-\\d.e]+)/);
      out.push({judge: d.name, cell: d.y[j], x: d.x[j], px: +m[1], py: +m[2], want_px: xa.d2p(d.x[j]),
                row: ya.p2c(+m[2]), want_row: ya.d2c(d.y[j]), bar_y: +e[2] + 4,
                bar: [Math.min(+e[1], +e[3]), Math.max(+e[1], +e[3])],
                want_bar: [xa.d2p(d.x[j] - d.error_x.arrayminus[j]), xa.d2p(d.x[j] + d.error_x.array[j])]});
    });
  });
  return out;
}"""


def test_leaderboard_dots_are_drawn_at_their_means_in_chromium(flat_run):
    s = summarize(flat_run / "runs" / "flat", resamples=1000)  # the report's own resamples and seed
    means = {(r["judge"], r["cell"]): r["mean"] for r in s.overview.iter_rows(named=True)}
    with chromium() as p:
        browser, page = open_report(p, (flat_run / "reports" / "flat" / "index.html").as_uri())
        points = page.evaluate(DRAWN_POINTS, "Leaderboard")
        browser.close()
    assert len(points) == len(means) == 8
    for pt in points:
        assert pt["x"] == means[(pt["judge"], pt["cell"])]
        assert abs(pt["px"] - pt["want_px"]) < 0.5, f"{pt}: drawn {pt['px'] - pt['want_px']:.1f} px off its mean"
        assert abs(pt["row"] - pt["want_row"]) < 0.5, f"{pt}: drawn outside its cell's row"
        assert abs(pt["bar_y"] - pt["py"]) < 0.5 and pt["bar"] == pytest.approx(pt["want_bar"], abs=0.5), pt


LABEL_BOXES = """(prefix) => {
  const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(g => (g.layout.title.text || '').startsWith(prefix));
  return Array.from(gd.querySelectorAll('.textpoint text')).map(t => {
    const b = t.getBoundingClientRect(); return [t.textContent, b.left, b.top, b.right, b.bottom];
  });
}"""
WIDTHS = """() => ({
  page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
  tables: Array.from(document.querySelectorAll('table.bench')).map(t => {
    const box = t.closest('.bench-scroll');
    return {head: t.rows[0].innerText.slice(0, 40), right: t.getBoundingClientRect().right,
            box_right: box ? box.getBoundingClientRect().right : null,
            fits: box ? t.getBoundingClientRect().width <= box.clientWidth + 0.5 : false,
            cost: t.rows[0].innerText.includes('cost_')};
  })})"""


def overlaps(a, b) -> bool:
    return a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]


def test_cost_labels_never_overlap_and_the_page_never_scrolls_sideways(flat_run):
    with chromium() as p:
        browser, page = open_report(p, (flat_run / "reports" / "flat" / "index.html").as_uri(), width=1280)
        labels = page.evaluate(LABEL_BOXES, "Cost vs quality")
        widths = page.evaluate(WIDTHS)
        browser.close()
    crowded = [(a[0], b[0]) for i, a in enumerate(labels) for b in labels[i + 1:] if overlaps(a, b)]
    assert crowded == [], f"cost-vs-quality labels drawn over each other: {crowded[:3]}"
    scroll, client = widths["page"]
    assert scroll <= client, f"the page scrolls sideways at 1280 px: {scroll} > {client}"
    for t in widths["tables"]:
        assert t["box_right"] is not None and t["box_right"] <= client, t  # each table scrolls in its own box
    costs = [t for t in widths["tables"] if t["cost"]]
    assert len(costs) == 2 and all(t["fits"] and t["right"] <= client for t in costs), costs


def test_costs_and_small_numbers_keep_significant_digits(flat_run):
    assert [number(v) for v in (0.00042, 4.2e-05, 0.5, 0.0123, 0.0, 2.5e7)] == \
        ["0.00042", "4.2e-05", "0.500", "0.0123", "0.000", "2.5e+07"]
    assert number(0.00042, unit="$") == "$0.00042" and number(float("nan")) == "n/a" and number(None) == "—"
    s = summarize(flat_run / "runs" / "flat", resamples=50)
    costs = s.usage_cells["cost_usd"].to_list() + s.usage_judges["cost_usd"].to_list()
    assert all(c is not None and 0 < c < 0.01 for c in costs), costs
    text = visible_html(flat_run)
    for c in costs:
        assert f"<td>{number(c, unit='$')}</td>" in text
    assert "<td>$0.000</td>" not in text
    fig = strict_json(fg.cost_quality(s.overview, s.usage_cells).to_json())
    per_answer = {r["cell"]: r["cost_usd"] / r["calls"] for r in s.usage_cells.iter_rows(named=True)}
    hovers = [cd[1] for trace in fig["data"] for cd in trace["customdata"]]
    assert sorted(set(hovers)) == sorted({number(v, unit="$") for v in per_answer.values()})
    assert all(h.startswith("$0.0") or "e-0" in h for h in hovers), hovers


def test_human_overrides_write_their_own_report(flat_run):
    judges_report = flat_run / "reports" / "flat" / "index.html"
    before = judges_report.read_bytes()
    out = command(flat_run, "report", str(flat_run / "runs" / "flat"), "--human-overrides", "--resamples", "50")
    assert out.returncode == 0, out.stdout + out.stderr
    human = flat_run / "reports" / "flat" / "index-human.html"
    assert f"report: {human}" in out.stdout
    assert judges_report.read_bytes() == before
    assert "their grades replace the judges" in visible_html(flat_run, "index-human.html")
    assert (flat_run / "runs" / "flat" / "notebooks" / "03_analyze-human.ipynb").exists()


def test_a_failed_cell_stops_the_rendering_and_stderr_never_reaches_the_html(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("rv.note('hello')")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": "<p>hello reader</p>", "text/plain": "hello"}),
        nbformat.v4.new_output("stream", name="stderr",
                               text="/home/x/.venv/lib/python3.11/site-packages/jupyter_client/session.py:727: "
                                    "UserWarning: Message serialization failed\n")]
    nb.cells = [cell]
    path = tmp_path / "ok.ipynb"
    nbformat.write(nb, path)
    html_text = to_html(path, "t")
    assert "hello reader" in html_text and "UserWarning" not in html_text and "site-packages" not in html_text
    cell.outputs.append(nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                                               traceback=["Traceback (most recent call last)", "  File x.py"]))
    nbformat.write(nb, tmp_path / "bad.ipynb")
    with pytest.raises(BenchError, match=r"no report was written: cell 0: ZeroDivisionError: division by zero"):
        to_html(tmp_path / "bad.ipynb", "t")


def test_cost_labels_are_permanent_only_where_chromium_shows_them_apart(tmp_path):
    cells = ["gpt-4o-mini/tip@v1", "gpt-4o-mini/tip@v2", "llama-3.1-8b/tip@v1", "llama-3.1-8b/tip@v2"]
    overview = pl.DataFrame({"judge": "j", "cell": cells, "mean": [2.0, 3.0, 3.4, 4.5],
                             "ci_low": [1.6, 2.5, 3.0, 4.1], "ci_high": [2.4, 3.5, 3.8, 4.9]})
    usage = pl.DataFrame({"cell": cells, "calls": 10, "cost_usd": [0.001, 0.004, 0.007, 0.01],
                          "mean_completion_tokens": 50.0})
    fig = fg.cost_quality(overview, usage)
    assert fig.data[0].mode == "markers+text" and fig.layout.title.text == "Cost vs quality"
    crowded = fg.cost_quality(overview.with_columns(pl.lit(3.0).alias("mean")),
                              usage.with_columns(pl.lit(0.001).alias("cost_usd")))
    assert crowded.data[0].mode == "markers" and "hover" in crowded.layout.title.text
    assert crowded.data[0].customdata[0][1] == "$0.0001"  # per answer: 0.001 over 10 calls
    page_file = tmp_path / "cost.html"
    fig.write_html(page_file, include_plotlyjs=True, config={"responsive": True})
    with chromium() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        for width in (1280, 800):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_function("document.querySelectorAll('.textpoint text').length == 4", timeout=30000)
            labels = page.evaluate(LABEL_BOXES, "Cost vs quality")
            assert [(a[0], b[0]) for i, a in enumerate(labels) for b in labels[i + 1:] if overlaps(a, b)] == [], width
        browser.close()
