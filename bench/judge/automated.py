"""The ``automated`` mode: the rubric's checks only (no model call); one score per check, 1 passed or 0 failed,
and their weighted fraction."""

from __future__ import annotations

from collections.abc import Set

from bench.config.checks import automated_score, run_checks
from bench.core.records import Judgment
from bench.core.writer import Halt
from bench.judge.grader import Emit, Item, Judge, Request
from bench.models.client import LLM


def grade_automated(judge: Judge, item: Item) -> Judgment:
    """Return the checks-only judgment: one score per check (1 passed, 0 failed) and their weighted fraction."""
    results = run_checks(judge.rubric.checks, item.texts[0])
    return Judgment(**judge.base(item), scores={r.id: 1.0 if r.passed else 0.0 for r in results},
                    score=automated_score(results, judge.rubric.checks),
                    details={"checks": [r.to_dict() for r in results]})


class AutomatedGrader:
    """Runs the rubric's checks on each response, in process."""

    compares = False
    orders = (None,)
    packed = False

    def requests_per_item(self, judge: Judge) -> float:
        return 0.0

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> list[Request]:
        return []

    async def grade(self, judge: Judge, items: list[Item], llm: LLM, emit: Emit, *, seed: int,
                    done: Set[str], halt: Halt | None) -> None:
        for item in items:  # no call to wait for: each judgment is emitted at once
            emit(grade_automated(judge, item))


GRADER = AutomatedGrader()
