"""Whether a run folder can be gated at all: a run still being written or with damaged judgments cannot (exit 6),
with a reason naming the folder and what to do."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.config.rubrics import run_scales
from bench.core.paths import project_root
from bench.core.records import Judgment
from bench.core.reviewed import COMPOSITE, off_scale
from bench.core.runlock import holder, is_held
from bench.core.store import RunStore
from bench.core.sweeps import read_sweeps

SHOWN = 3  # damaged lines or grades named per reason (the count says how many)


def unfit(run_dir: Path, *, writing_checked: bool = True) -> list[str]:
    """Return why the run folder ``run_dir`` cannot be gated (empty: it can). ``writing_checked`` False: the
    caller is the sweep writing it (its own end), which holds the lock and has not written its end yet."""
    reasons = _being_written(run_dir) if writing_checked else []
    unreadable, grades = _judgment_lines(run_dir)
    if unreadable:
        reasons.append(f"{len(unreadable)} judgment line(s) unreadable ({', '.join(unreadable[:SHOWN])}"
                       f"{', …' if len(unreadable) > SHOWN else ''}): the file is damaged; re-run the sweep "
                       f"(`bench sweep` redoes what it cannot read) or restore the folder")
    bad = _off_scale(run_dir, grades)
    if bad:
        reasons.append(f"{len(bad)} judgment(s) with a grade that is not a number on its rubric's scale "
                       f"({'; '.join(bad[:SHOWN])}{'; …' if len(bad) > SHOWN else ''}): a damaged record or a "
                       f"judge reply read wrongly; fix or remove those lines, then re-judge")
    return reasons


def _being_written(run_dir: Path) -> list[str]:
    """Return a reason when a sweep holds the folder or its last sweep never ended (killed, or running elsewhere)."""
    if is_held(run_dir):
        return [f"{run_dir} is still being written ({holder(run_dir)}): gate it once its sweep has ended"]
    sweeps = read_sweeps(run_dir)
    if sweeps and sweeps[-1].get("end") is None:
        return [f"{run_dir}: its last sweep (started {sweeps[-1].get('started') or sweeps[-1].get('time', '?')}) "
                f"never ended: killed, or still running on another machine; run it again to finish the run"]
    return []


def _judgment_lines(run_dir: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Return the judgment lines no record can be read from (``file:line``) and the successful judgments' grades
    (rubric, scores, score) as written, NaN and infinities included (Python's json reads those literals)."""
    unreadable, grades = [], []
    for path in RunStore(run_dir).files(Judgment):
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if not isinstance(rec, dict) or not isinstance(rec.get("judge_id"), str):
                unreadable.append(f"{path.name}:{lineno}")
            elif rec.get("error") is None and rec.get("mode") != "pairwise":
                grades.append(rec)
    return unreadable, grades


def _off_scale(run_dir: Path, grades: list[dict[str, Any]]) -> list[str]:
    """Return ``judge id: criterion = value`` for each grade that is NaN, ±inf or off its rubric's scale."""
    kinds = [SimpleNamespace(rubric_id=g.get("rubric_id"), rubric_hash=g.get("rubric_hash")) for g in grades]
    scales = run_scales(run_dir, [k for k in kinds if isinstance(k.rubric_hash, str)], project_root())
    bad = []
    for g in grades:
        values = {**{k: v for k, v in (g.get("scores") or {}).items()}, COMPOSITE: g.get("score")}
        bad += [f"{g.get('id', '?')}: {w}" for w in off_scale(_numbers(values), scales.get(g.get("rubric_hash")))]
    return bad


def _numbers(values: dict[str, Any]) -> dict[str, Any]:
    """Return ``values`` with a value that is no number as NaN (off_scale then names it)."""
    return {k: v if v is None or isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
            for k, v in values.items()}
