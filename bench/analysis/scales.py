"""The scales a run's judges graded on, read from the rubrics the run snapshotted: what a figure's colours span
(a scale fitted to the data would paint a 3.1 and a 3.4 as "worst" and "best")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.analysis.tables import COMPOSITE
from bench.config.rubrics import Rubric, parse_rubric
from bench.core.errors import ParamsError

Scale = tuple[float, float]
UNIT: Scale = (0.0, 1.0)  # checks, checklist requirements and 0–1 composites (hybrid, checklist, automated)


def graded_scales(rubric: Rubric, mode: str) -> dict[str, Scale]:
    """Return each criterion's ``(lowest, highest)`` score under ``rubric`` graded in ``mode``, the composite's
    included; a check or a checklist requirement (pass/fail) reads on ``UNIT``."""
    scales: dict[str, Scale] = {item.id: UNIT for item in [*rubric.checks, *rubric.requirements]}  # pass/fail
    scales.update({c.id: (float(c.scale[0]), float(c.scale[1])) for c in rubric.criteria})
    lo, hi = rubric.composite_scale if mode in ("rubric", "packed") else UNIT
    scales[COMPOSITE] = (float(lo), float(hi))
    return scales


def judge_scales(run_dir: str | Path, judgments: Any) -> dict[str, dict[str, Scale]]:
    """Return per judge id the scale of each criterion it graded, from the run's rubric snapshots (several of one
    version: the widest); a judge whose rubric is not in the run folder is left out."""
    out: dict[str, dict[str, Scale]] = {}
    seen = judgments.select("judge", "rubric", "mode").unique().iter_rows() if judgments.height else []
    for judge, key, mode in seen:
        for rubric in _snapshots(Path(run_dir), str(key)):
            mine = out.setdefault(str(judge), {})
            for name, (lo, hi) in graded_scales(rubric, str(mode)).items():
                old = mine.get(name, (lo, hi))
                mine[name] = (min(lo, old[0]), max(hi, old[1]))
    return out


def _snapshots(run_dir: Path, key: str) -> list[Rubric]:
    """Return the run's snapshots of rubric ``id@version`` (unreadable ones skipped: a figure falls back)."""
    rid, _, version = key.rpartition("@")
    found = []
    for path in sorted(run_dir.glob(f"rubrics/*/{rid}.md")):
        try:
            rubric = parse_rubric(path.read_text(encoding="utf-8-sig"), path)
        except (OSError, ParamsError):
            continue
        if rubric.version == version:
            found.append(rubric)
    return found
