"""The reviewed answers one judge is aligned on: each answer's item, its human grades and the judge's own grades.
Only each reviewer's latest *blind* review counts: a review that saw the judge's grade could echo it."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from bench.analysis import COMPOSITE, RunTables
from bench.core.digests import current_candidates
from bench.core.errors import BenchError
from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.judge import Item, Judge, items_for


@dataclass(frozen=True)
class ReviewedAnswer:
    """One reviewed answer: its unit (the answer's candidate id), what the judge grades, the human grades."""

    unit: str
    item: Item
    human: dict[str, list[float]]  # criterion -> each reviewer's grade (reviewers in name order)
    judged: dict[str, float] | None  # the judge's grades in the run (None: its judgment failed)
    reviews: tuple[str, ...] = field(default=())  # the review records' ids

    def human_grade(self, criterion: str) -> int:
        """Return the grade the reviewers gave ``criterion`` as one level (their median, the lower on a tie)."""
        values = sorted(self.human[criterion])
        return int(round(values[(len(values) - 1) // 2]))

    def disagreement(self) -> float:
        """Return how far the judge's grades were from the reviewers' (sum over criteria; failed: the most)."""
        if self.judged is None:
            return float("inf")
        return sum(abs(self.judged.get(c, 0.0) - sum(v) / len(v)) for c, v in self.human.items())


def reviewed_answers(t: RunTables, judge: Judge) -> list[ReviewedAnswer]:
    """Return the answers of the run ``t`` that some reviewer reviewed blind on ``judge``'s rubric version, in
    unit order; raise BenchError when the judge is not one `bench align` can align (rubric mode, whole answers)."""
    if judge.mode != "rubric" or judge.rubric.per_turn:
        raise BenchError(f"bench align aligns judges of the rubric mode grading whole answers; judge "
                         f"{judge.entry.id} grades in mode {judge.mode}{' per turn' if judge.rubric.per_turn else ''}")
    key = judge.rubric.key
    human: dict[str, dict[str, dict[str, float]]] = {}
    ids: dict[str, list[str]] = {}
    latest = t.reviewed.latest if t.reviewed is not None else {}
    for ((cands, rubric), reviewer), r in sorted(latest.items(), key=lambda kv: kv[0][1]):
        if rubric != key or not r.blind or not r.scores or len(cands) != 1:
            continue
        for criterion, value in r.scores.items():
            human.setdefault(cands[0], {}).setdefault(criterion, {})[reviewer] = float(value)
        ids.setdefault(cands[0], []).append(r.id)
    items = _items(t, judge)
    judged = _judged(t, judge.entry.id)
    out = []
    for unit in sorted(human):
        if unit in items:
            grades = {c: [v[name] for name in sorted(v)] for c, v in human[unit].items()}
            out.append(ReviewedAnswer(unit, items[unit], grades, judged.get(unit), tuple(ids[unit])))
    return out


def _items(t: RunTables, judge: Judge) -> dict[str, Item]:
    """Return the judge's items of the run (its first repeat) by candidate id, built as the judge stage builds them."""
    ok = [c for c in RunStore(t.run_dir).latest(Candidate).values() if c.ok]
    items = items_for(judge, list(t.scenarios.values()), current_candidates(t.run_dir, ok))
    return {item.ids[0]: item for item in items if item.repeat == 0 and item.turn is None}


def _judged(t: RunTables, judge_id: str) -> dict[str, dict[str, float]]:
    """Return the judge's criterion grades in the run by candidate id (its first repeat; successes only)."""
    mine = t.scores.filter((pl.col("judge") == judge_id) & (pl.col("repeat") == 0)
                           & (pl.col("criterion") != COMPOSITE))
    out: dict[str, dict[str, float]] = {}
    for row in mine.iter_rows(named=True):
        out.setdefault(row["candidate"], {})[row["criterion"]] = row["value"]
    return out
