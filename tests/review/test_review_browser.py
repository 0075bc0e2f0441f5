"""The review panel in a real browser: JupyterLab on loopback, notebooks/04_review.ipynb on a tracked
fixture run, an answer graded blind and saved through the widgets in headless Chromium (Playwright): no
judge's grade shown and nothing pre-selected before the save, the judges shown after it; then the
Review record (blind), the MLflow assessment and the panel's history checked. The screenshot is kept in
tests/artifacts/review-panel.png."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.records import Review
from bench.core.store import RunStore
from bench.testing.grids import ROOT, env
from bench.testing.processes import fetch_when_up, free_port, stopped_at_exit
from tests.repo import parameterized_copy
from tests.review.test_review import CANARY, mlflow_for, tracked_run  # noqa: F401 (the module-scoped fixture)

CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "tests" / "artifacts"
BUDGET_S = 300  # readiness waits: generous for a freshly installed Chromium on a loaded 2-core machine
KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!(kernel && kernel.status === 'idle' && w.content && w.content.widgets.length > 0);
}"""


@pytest.fixture
def lab(tmp_path, tracked_run):  # noqa: F811
    """JupyterLab serving a parameterized copy of 04_review.ipynb; yield its notebook URL."""
    parameterized_copy(ROOT / "notebooks" / "04_review.ipynb", tmp_path / "04_review.ipynb",
                       run_dir=str(tracked_run), reviewer="tester", filter="all")
    port, log = free_port(), tmp_path / "lab.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={tmp_path}",
         "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run cells by command, wait on the kernel
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=tmp_path, env=env(tmp_path, OPENAI_API_KEY=CANARY, JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter")),
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    with stopped_at_exit(proc, grace_s=20):
        fetch_when_up(f"http://127.0.0.1:{port}/api/status", proc, BUDGET_S, log)
        yield f"http://127.0.0.1:{port}/lab/tree/04_review.ipynb"


def test_change_a_score_in_jupyterlab_and_save_it(lab, tracked_run):  # noqa: F811
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    before = {r.id for r in RunStore(tracked_run).read(Review)}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1300, "height": 1100})
        try:
            page.goto(lab, wait_until="domcontentloaded")
            page.wait_for_function(KERNEL_IDLE, timeout=BUDGET_S * 1000)  # the notebook open, its kernel started
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            panel = page.locator(".bench-review")
            panel.wait_for(timeout=BUDGET_S * 1000)
            page.wait_for_function("document.querySelector('.bench-review').innerText.includes('answers reviewed')")
            # blind: the judges' grades hidden and no value pre-selected until the review is saved
            assert panel.locator(".bench-review-hidden").count() == 1
            assert panel.locator(".bench-review-judges").count() == 0
            assert panel.locator(".widget-toggle-buttons button.mod-active").count() == 0
            groups = panel.locator(".widget-toggle-buttons").all()
            label = groups[0].locator(".widget-label").inner_text().strip()
            new = "4"
            for group in groups:
                group.locator("button", has_text=new).first.click()
            panel.locator("textarea").fill("checked in the browser")
            panel.locator(".bench-review-save").click()
            page.wait_for_selector(".bench-review-saved", timeout=30000)
            panel.locator(".bench-review-judges").wait_for(timeout=30000)  # shown once the review is saved
            history = panel.locator(".bench-review-history").inner_text()
            page.screenshot(path=str(ARTIFACTS / "review-panel.png"), full_page=True)
            progress_before = panel.inner_text()
            page.keyboard.press("Alt+KeyN")  # the shortcut moves to the next item
            page.wait_for_function("document.querySelector('.bench-review').innerText.includes('item 2 of')")
        finally:
            page.screenshot(path=str(ARTIFACTS / "review-panel-last.png"), full_page=True)
            browser.close()
    new_reviews = [r for r in RunStore(tracked_run).read(Review) if r.id not in before]
    assert len(new_reviews) == 1
    review = new_reviews[0]
    assert review.reviewer == "tester" and review.note == "checked in the browser" and review.blind
    assert review.scores[label] == float(new)
    assert f"tester: {label} {new}" in history and "item 1 of" in progress_before
    mlflow = mlflow_for(tracked_run)
    exp = mlflow.get_experiment_by_name("bench/rv")
    human = [a for t in mlflow.search_traces(locations=[exp.experiment_id], return_type="list")
             for a in t.info.assessments if a.source.source_type == "HUMAN" and a.source.source_id == "tester"]
    assert any(a.name.endswith(f".{label}") and float(a.value) == float(new) for a in human), \
        json.dumps([(a.name, a.value) for a in human])
