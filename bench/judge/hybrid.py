"""The ``hybrid`` mode: the rubric's checks and an LLM rubric grade, weighted into one 0–1 score."""

from __future__ import annotations

import asyncio
from collections.abc import Set

from bench.core.records import Judgment, add_usage
from bench.judge._asking import SingleGrader
from bench.judge.automated import NO_CALL, grade_automated, graded_checks
from bench.judge.similarity import similarity_checks
from bench.judge.grader import Item, Judge, Request
from bench.judge.rubric import GRADER as RUBRIC, grade_rubric
from bench.models.client import LLM


async def grade_hybrid(judge: Judge, item: Item, llm: LLM) -> Judgment:
    """Return weighted automated + LLM parts on 0–1; an LLM failure fails the item (checks kept in details)."""
    auto = await graded_checks(judge, item, llm) if similarity_checks(judge) else \
        await asyncio.to_thread(grade_automated, judge, item, llm.cache)
    if not auto.ok:  # an embedding failed, or a sandbox did not start: the item fails
        return auto
    llm_part = await grade_rubric(judge, item, llm)
    if auto.usage is not NO_CALL:  # the embeddings' cost is this judgment's too
        llm_part = llm_part.model_copy(update={"usage": add_usage([u for u in (auto.usage, llm_part.usage) if u])})
    details = {**llm_part.details, "checks": auto.details["checks"], "automated_score": auto.score}
    if not llm_part.ok:
        return llm_part.model_copy(update={"details": details})
    details["llm_score"] = judge.rubric.normalized(llm_part.scores or {})
    score = (details["llm_score"] if auto.score is None  # no check applied: the LLM part alone
             else judge.rubric.hybrid_score(llm_part.scores or {}, auto.score))
    return llm_part.model_copy(update={"scores": {**(llm_part.scores or {}), **(auto.scores or {})},
                                       "score": score, "details": details})


class HybridGrader(SingleGrader):
    """Grades each item by its checks (in process) and one rubric call."""

    grade_one = staticmethod(grade_hybrid)

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> list[Request]:
        return RUBRIC.first_requests(judge, item, done)  # the checks send nothing


GRADER = HybridGrader()
