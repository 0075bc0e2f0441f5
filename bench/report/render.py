"""`bench report runs/<sweep>`: the executed analysis notebook as one self-contained HTML file, from records
only (re-made any time, offline); stderr is dropped and a failed cell stops rendering with an error."""

from __future__ import annotations

import html
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from bench.config.rubrics import run_scales
from bench.core.errors import BenchError
from bench.core.paths import project_root, reports_root
from bench.core.records import Candidate, Judgment, Review
from bench.core.reviewed import reviewed
from bench.core.store import RunStore, atomic_write
from bench.kernels import first_line, kernel_manager_class, papermill, prepare_driver

NOTEBOOK = "03_analyze.ipynb"
# nbconvert's templates load require.js and MathJax from a CDN: the report needs neither, and must stay offline
_EXTERNAL_SCRIPT = re.compile(r'<script[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>\s*', re.I)


def render_report(run_dir: str | Path, out: str | Path | None = None, *, resamples: int = 1000, seed: int = 0,
                  compare: str = "all", baseline: str | None = "auto", strong_weight: float = 1.0,
                  examples_per_cell: int = 1, human_overrides: bool = False) -> Path:
    """Execute the analysis notebook for ``run_dir`` and write its HTML report; return the report's path."""
    run = Path(run_dir).resolve()
    _check_run(run)
    page = "index-human.html" if human_overrides else "index.html"  # never overwrites the judges' report
    target = Path(out).resolve() if out else reports_root() / run.name / page
    if target.suffix != ".html":
        target = target / page
    executed = run / "notebooks" / (NOTEBOOK.replace(".ipynb", "-human.ipynb") if human_overrides else NOTEBOOK)
    executed.parent.mkdir(parents=True, exist_ok=True)
    params = {"run_dir": str(run), "resamples": resamples, "seed": seed, "compare": compare,
              "baseline": baseline, "strong_weight": strong_weight, "examples_per_cell": examples_per_cell,
              "human_overrides": human_overrides}
    _execute(project_root() / "notebooks" / NOTEBOOK, executed, params)
    atomic_write(target, to_html(executed, title=f"bench report: {run.name}").encode("utf-8"), shared=True)  # umask
    return target


def _check_run(run: Path) -> None:
    if not run.is_dir():
        raise BenchError(f"{run}: no such run folder; run `bench sweep params/<grid>.yaml` first")
    store = RunStore(run)
    if not store.files(Candidate) and not store.files(Judgment):
        raise BenchError(f"{run}: the run folder holds no candidates or judgments yet; nothing to report")
    if store.files(Review):  # a damaged review is left out of the report, and named here and in it
        judgments = store.latest(Judgment)
        found = reviewed(judgments, store.read(Review), run_scales(run, judgments.values(), project_root()))
        if found.damaged:
            print(f"report: {found.note()}", file=sys.stderr, flush=True)


def _execute(source: Path, executed: Path, params: dict[str, Any]) -> None:
    pm = papermill()  # only `bench report` executes a notebook

    prepare_driver()
    t0 = time.monotonic()
    try:
        pm.execute_notebook(str(source), str(executed), parameters=params, kernel_name="python3",
                            progress_bar=False, cwd=str(source.parent.parent),
                            kernel_manager_class=kernel_manager_class())
    except Exception as err:  # papermill saved the executed notebook: it shows the failing cell
        raise BenchError(f"the analysis notebook failed after {time.monotonic() - t0:.0f}s "
                         f"({type(err).__name__}: {first_line(err)}); see {executed}") from err


def shown_outputs(nb: Any, source: str | Path = "the notebook") -> Any:
    """Drop every stderr and error output of an executed notebook (in place; return it); a failed cell raises."""
    failed = []
    for n, cell in enumerate(nb.cells):
        kept = []
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                failed.append(f"cell {n}: {out.get('ename', 'Error')}: {_first_line_of(out.get('evalue', ''))}")
            elif not (kind == "stream" and out.get("name") == "stderr") and \
                    "application/vnd.jupyter.stderr" not in out.get("data", {}):
                kept.append(out)
        if "outputs" in cell:
            cell["outputs"] = kept
    if failed:
        raise BenchError(f"{source}: the analysis notebook has failed cells, so no report was written: "
                         + "; ".join(failed))
    return nb


def _first_line_of(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")[:300]


def to_html(notebook: str | Path, title: str) -> str:
    """Return an executed notebook as standalone HTML: code hidden, no external script, no stderr."""
    # nbconvert: 1 s of imports, only when a report is rendered
    import nbformat  # noqa: PLC0415
    from nbconvert import HTMLExporter  # noqa: PLC0415
    nb = shown_outputs(nbformat.read(str(notebook), as_version=4), notebook)
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": html.escape(title)}})
    return _EXTERNAL_SCRIPT.sub("", body)


def screenshot(report: str | Path, png: str | Path, *, width: int = 1250, height: int = 1500) -> Path:
    """Save a PNG of a rendered report's top in headless Chromium (``$BENCH_CHROMIUM``), never downloading one."""
    chromium = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        raise BenchError(f"{chromium} not found: install Chromium (Debian: apt-get install chromium) "
                         f"or set BENCH_CHROMIUM to its path")
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 (only `bench report --screenshot` needs it)
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(Path(report).resolve().as_uri(), wait_until="load")
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0", timeout=30000)
        page.wait_for_timeout(500)  # plotly's transitions
        page.screenshot(path=str(png))
        browser.close()
    return png
