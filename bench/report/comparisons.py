"""The run report's links to the comparisons of the run (`bench compare A B` makes ``reports/<a>-vs-<b>/``):
every one whose run B is this run, relative, so the links hold when ``reports/`` is shared as a whole."""

from __future__ import annotations

import html
import json
from pathlib import Path
from urllib.parse import quote

from bench.core.paths import reports_root
from bench.report.display import _display, visible

DATA_FILE = "comparison.json"


def comparisons_of(run_name: str, reports: Path | None = None) -> list[dict[str, str]]:
    """Return each comparison whose run B is ``run_name`` (run A, relative link, counts), by run A; bad ones skipped."""
    root = reports or reports_root()
    found = []
    for path in sorted(root.glob(f"*/{DATA_FILE}")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("run_b") != run_name:
            continue
        counts = data.get("counts") or {}
        line = (f"{counts.get('better', 0)} significantly better, {counts.get('worse', 0)} worse, "
                f"of {counts.get('rows', 0)} compared")
        found.append({"run_a": str(data.get("run_a")), "href": f"../{quote(path.parent.name)}/index.html", "line": line})
    return sorted(found, key=lambda c: c["run_a"])


def show_comparisons(run_name: str) -> None:
    """Display a line linking the run's comparisons with earlier runs (nothing when there is none)."""
    found = comparisons_of(run_name)
    if not found:
        return
    links = "; ".join(f'<a href="{html.escape(c["href"])}">compared with {html.escape(visible(c["run_a"]))}</a> '
                      f"({html.escape(c['line'])})" for c in found)
    _display({"text/html": f'<p class="bench-note">Comparisons of this run: {links}.</p>',
              "text/plain": "; ".join(f"compared with {c['run_a']}: {c['href']}" for c in found)})
