"""`bench judges RUN`: how far each judge of a run can be trusted, as readable tables (or one JSON document).
Reads records only, calls no model; docs/judges.md says how to read each number."""

from __future__ import annotations

import json
from pathlib import Path

from bench import judge_trust as api  # its document and tables load polars on first use (bench.cli stays cheap)
from bench.core import paths


def judges_command(run: str, *, as_json: bool = False, resamples: int = 2000, seed: int = 0,
                   min_reviews: int = 10) -> int:
    """Print the judges of run folder (or sweep name) ``run``: tables, or the JSON document (``as_json``); return 0."""
    t = api.judged_run(_folder(run))
    doc = api.judges_document(t, resamples=resamples, seed=seed, min_reviews=min_reviews)
    print(json.dumps(doc, indent=2, ensure_ascii=False) if as_json else
          api.judges_text(doc, t.reviewed.line() if t.reviewed else ""))
    return 0


def _folder(arg: str) -> Path:
    """Return the run folder ``arg`` names: a path, else a sweep name under ``runs/`` (as `bench gate` reads it)."""
    path = paths.resolve(arg)
    if not path.is_dir() and "/" not in arg and paths.run_dir(arg).is_dir():
        return paths.run_dir(arg)
    return path
