"""The rubric an import's judgments name, snapshotted in the run folder as a sweep's are (reviews, scales, verdict
labels and pass marks are read from it); its body says imported grades have no judge prompt."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.config.rubrics import Rubric, parse_rubric
from bench.core.records import content_hash

_BODY = ("Grades imported with `bench import verdicts` from another tool: bench asked no judge, and the judge's own "
         "instructions are not known.\n")


def _rubric(front: dict) -> tuple[Rubric, bytes]:
    text = f"---\n{json.dumps(front)}\n---\n{_BODY}"
    return parse_rubric(text, Path(f"{front['id']}.md")), text.encode()


def pairwise_rubric() -> tuple[Rubric, bytes]:
    """The rubric of imported pairwise verdicts: bench's five verdict labels, in the original order."""
    return _rubric({"id": "imported-pairwise", "version": "1", "mode": "pairwise"})


def graded_rubric(criteria: list[str], values: list[float], scale: tuple[int, int] | None) -> tuple[Rubric, bytes]:
    """The rubric of imported grades, each criterion on ``scale`` (else around ``values``), versioned by its hash."""
    lo, hi = scale or (math.floor(min(values, default=0)), math.ceil(max(values, default=1)))
    hi = max(hi, lo + 1)
    front = {"id": "imported", "mode": "rubric", "accuracy": True, "criteria": [  # a row's label is there to be met
        {"id": c, "description": f"{c}, as the importing tool graded it", "scale": [lo, hi],
         "anchors": {str(n): f"{c} {n}" for n in range(lo, hi + 1)}} for c in criteria]}
    return _rubric({**front, "version": content_hash(front, 8)})


def snapshot(rubric: Rubric, text: bytes) -> tuple[str, bytes]:
    """Where a rubric's snapshot lies in a run folder (as bench.config.rubrics.snapshot_rubric writes it), and it."""
    return f"rubrics/{rubric.hash}/{rubric.id}.md", text
