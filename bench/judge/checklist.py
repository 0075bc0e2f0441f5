"""The ``checklist`` mode: one call per requirement (fulfilled or not), concurrently; the score is the
fraction fulfilled."""

from __future__ import annotations

import asyncio
from collections.abc import Set
from typing import Any

from bench.core.errors import Halted, JudgeParseError, ProviderError
from bench.core.records import Judgment
from bench.judge._asking import SingleGrader, Spend, ask_json, failure
from bench.judge._prompts import CHECK_USER, DATA_NOTE, framed, references
from bench.judge.layout import judge_messages
from bench.config.reply_schemas import response_format
from bench.judge.images import with_images  # a rubric with images: true shows the scenario's images
from bench.judge.grader import Item, Judge, Request
from bench.judge.shown_reasoning import response_block  # the candidate's reasoning, on the rubric's request
from bench.judge.replies import extract_json, rationale_of
from bench.judge.solutions import solution_messages, solve, stopped_after_solution
from bench.judge.transcripts import shown_text  # the answer, or its whole conversation
from bench.models.client import LLM


async def grade_checklist(judge: Judge, item: Item, llm: LLM) -> Judgment:
    """Judge each requirement by its own call: a failed call is unfulfilled, all failing fail the item."""
    note = shown_text(judge, item, 0)[1]
    spend = Spend()  # every requirement's calls, repairs and failures count on the item's record
    try:  # ``solve_first``: the judge's own answer first, shown with every requirement
        item, solved = await solve(judge, item, llm, spend)
    except ProviderError as err:
        return failure(judge.base(item), err, solution_messages(judge, item), None, spend, details=note)
    # a batched judge asks every requirement at once: they wait in one provider batch, not in rounds
    sem = asyncio.Semaphore(len(judge.rubric.requirements) if judge.entry.batch else judge.entry.item_concurrency)
    rf = response_format(judge.rubric.requirement_schema(), "requirement")
    stopped: list[tuple[Halted, list[dict]]] = []  # a refused requirement call: the stop and its messages

    async def one(req) -> dict[str, Any] | None:
        messages = _check_messages(judge, item, req)
        async with sem:
            if stopped:
                return None
            try:
                obj, _raw = await ask_json(llm, judge, messages, rf, _fulfilled, spend, item.attempt,
                                           label=f"{judge.judgment_ids(item)[0]}#{req.id}", sample=item.repeat)
                return {"id": req.id, "fulfilled": obj["fulfilled"], "feedback": rationale_of(obj) or ""}
            except (JudgeParseError, ProviderError) as err:
                return {"id": req.id, "fulfilled": False, "error": str(err),
                        "feedback": "fallback: the judge call for this requirement failed; counted as unfulfilled"}
            except Halted as stop:
                stopped.append((stop, messages))
                return None

    results = await asyncio.gather(*(one(r) for r in judge.rubric.requirements))
    base = judge.base(item)
    if stopped:
        stop, refused = stopped[0]
        raise stopped_after_solution(stop, base, refused, spend, {**note, **solved})
    details = {**note, "requirements": results, "all_fulfilled": all(r["fulfilled"] for r in results), **solved}
    if all("error" in r for r in results):
        return Judgment(**base, error="every requirement call failed: " + results[0]["error"],
                        error_kind="checklist", details=details, usage=spend.total())
    scores = {r["id"]: 1.0 if r["fulfilled"] else 0.0 for r in results}
    return Judgment(**base, scores=scores, score=sum(scores.values()) / len(scores), details=details,
                    usage=spend.total())


def _check_messages(judge: Judge, item: Item, req: Any) -> list[dict]:
    text = shown_text(judge, item, 0)[0]
    tag, context = framed(item.question, (text,), references(judge.rubric, item))
    user = CHECK_USER.format(context=context, note=DATA_NOTE,
                             response=response_block(judge, item, 0, tag, text),
                             requirement=req.text)
    return with_images(judge.rubric, judge_messages(judge, user), [item])


def _fulfilled(text: str) -> dict:
    obj = extract_json(text)
    if not isinstance(obj, dict) or not isinstance(obj.get("fulfilled"), bool):
        raise JudgeParseError("expected {\"fulfilled\": true|false, \"feedback\": ...}")
    return obj


class ChecklistGrader(SingleGrader):
    """Grades each of the rubric's requirements by its own call."""

    grade_one = staticmethod(grade_checklist)

    def requests_per_item(self, judge: Judge) -> float:
        return float(len(judge.rubric.requirements))

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> list[Request]:
        rf = response_format(judge.rubric.requirement_schema(), "requirement")
        return [(_check_messages(judge, item, req), rf) for req in judge.rubric.requirements]


GRADER = ChecklistGrader()
