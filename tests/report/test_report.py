"""`bench report` end to end: a fixture run made by a real sweep on the fake provider (five judges:
single, packed, an XSS-replying rubric, one with repeats and pairwise), its HTML report, the report opened in headless
Chromium from a file with the network cut, and nbval on notebooks/03_analyze.ipynb."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.analysis import summarize
from bench.testing.grids import ROOT, env, generate, grid, judge, model, prompt, rubric, sweep
from bench.testing.in_process import command
from tests.repo import parameterized_copy

CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
XSS_ANSWER = "<script>alert(1)</script> Try <img src=x onerror=alert(1)> now."
XSS_RATIONALE = "<img src=x onerror=alert(2)> looks fine"
XSS_TOPIC = "<script>alert(3)</script>"


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory, fake_server):
    """Sweep the fixture grid (which ends by rendering its report); return (tmp dir, sweep output)."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("report")
    rubric(tmp / "xss.md")
    url = fake_server.url
    grid(tmp / "rep.yaml", url, name="rep", seed=3,
         models=[model("m1", url, name="fake-a"), model("m2", url, name="fake-b")],
         prompts=[prompt("tip", "Persona {persona}: one tip about {topic}."),
                  prompt("tip", "As a {persona}, one tip about {topic}.", version="v2", system="MARKER-XSS-ANSWER")],
         scenarios=generate(persona=["nurse", "<b>bold</b> student"], topic=["email", XSS_TOPIC, "sleep"]),
         judges=[judge("single", url, name="judge"), judge("packed", url, name="judge", pack_size=4),
                 judge("xss", url, rubric="xss.md", name="judge"), judge("steady", url, name="judge-b", repeats=2),
                 judge("arena", url, rubric="arena-pairwise", name="judge", baseline="m1/tip@v1")],
         limits={"max_concurrency": 8, "timeout_s": 10, "retries": 2})
    fake_server.configure(replies=[
        {"match": "MARKER-XSS-ANSWER", "content": XSS_ANSWER},
        {"match": "MARKER-XSS-RUBRIC", "content": '{"scores": {"quality": 4}, "rationale": "%s"}' % XSS_RATIONALE}])
    out = sweep(tmp, tmp / "rep.yaml", report=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    return tmp, out


def test_sweep_ends_with_the_report_and_it_holds_every_section(fixture_run):
    tmp, out = fixture_run
    report = tmp / "reports" / "rep" / "index.html"
    assert f"report: {report}" in out.stdout
    text = report.read_text()
    for section in ("Leaderboard", "Per criterion", "Paired differences", "Bradley–Terry", "Judge reliability",
                    "Packed vs single-item grading", "Cost, tokens and latency", "Examples",
                    "Calibrated by human reviews", "Not enough blind reviews", "Pairwise: style control", "Judge stability",
                    "own variance",
                    "Answers graded least consistently across repeats",
                    "Probability-weighted scores"):
        assert section in text, section
    s = summarize(tmp / "runs" / "rep", resamples=100)
    for cell in s.overview["cell"].unique().to_list():  # every cell of the leaderboard is in the report
        assert cell in text
    assert set(s.overview["judge"]) == {"single", "packed", "xss", "steady"}
    assert s.stability_items["judge"].unique().to_list() == ["steady"] and (s.stability_items["repeats"] == 2).all()
    assert set(s.win_rates["cell"]) == {"m1/tip@v2", "m2/tip@v1", "m2/tip@v2"}
    assert s.packed.height == 4 and (s.packed["n"] == 24).all()  # 3 criteria + composite, 24 answers each
    assert (tmp / "runs" / "rep" / "notebooks" / "03_analyze.ipynb").exists()


def test_report_is_self_contained_and_escapes_run_text(fixture_run):
    tmp, _ = fixture_run
    text = (tmp / "reports" / "rep" / "index.html").read_text()
    assert not re.search(r'<script[^>]*src="https?://', text), "an external script would need the network"
    assert len(re.findall(r"plotly\.js v\d", text)) == 1, "plotly.js must be inlined exactly once"
    for raw in (XSS_ANSWER, XSS_RATIONALE, XSS_TOPIC, "<b>bold</b>"):
        assert raw not in text, f"unescaped run text in the report: {raw}"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "onerror=alert(2)" in text


def test_rerendering_calls_no_model(fixture_run, fake_server, tmp_path):
    tmp, _ = fixture_run
    requests = fake_server.stats()["requests"]
    out = command(tmp, "report", str(tmp / "runs" / "rep"), "--out", str(tmp_path / "again.html"), "--resamples", "200",
                  "--compare", "prompts")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "again.html").stat().st_size > 100_000
    assert fake_server.stats()["requests"] == requests  # the run's provider was never asked anything


def test_report_of_a_missing_or_empty_run_names_the_folder(tmp_path):
    for folder in (tmp_path / "nope", tmp_path):
        out = command(tmp_path, "report", str(folder))
        assert out.returncode == 2 and str(folder) in out.stderr, out.stderr


def test_report_in_headless_chromium_shows_answers_as_text_and_never_runs_them(fixture_run):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    tmp, _ = fixture_run
    url = (tmp / "reports" / "rep" / "index.html").as_uri()
    dialogs, remote = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.route(re.compile(r"^(?!file:).*"), lambda route: (remote.append(route.request.url), route.abort()))
        page.goto(url, wait_until="load")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 6", timeout=30000)
        body = page.inner_text("body")
        onerror_imgs = page.evaluate("document.querySelectorAll('img[onerror]').length")
        injected = page.evaluate("Array.from(document.scripts).filter(s => s.textContent.includes('alert(')).length")
        browser.close()
    assert dialogs == [], f"the report ran run text as code: {dialogs}"
    assert remote == [], f"the report reached for the network: {remote[:3]}"
    assert onerror_imgs == 0 and injected == 0
    assert XSS_ANSWER in body and XSS_RATIONALE in body and XSS_TOPIC in body  # shown as text


def test_analysis_notebook_passes_nbval(fixture_run, tmp_path):
    tmp, _ = fixture_run
    nb = parameterized_copy(ROOT / "notebooks" / "03_analyze.ipynb", tmp_path / "03_analyze.ipynb",
                            run_dir=str(tmp / "runs" / "rep"), resamples=100)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", str(nb)],
                         cwd=tmp_path, env=env(tmp), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:]
    assert "passed" in out.stdout
