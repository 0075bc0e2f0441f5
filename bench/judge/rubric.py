"""The ``rubric`` mode: one item per call, a score per criterion, their composite and a rationale."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from bench.core.errors import Halted, JudgeParseError, ProviderError
from bench.core.records import Judgment
from bench.judge._asking import SingleGrader, Spend, ask_json, failure
from bench.judge._prompts import (DATA_NOTE, RUBRIC_USER, criterion_scales, framed, references, score_fields)
from bench.judge.layout import judge_messages
from bench.config.reply_schemas import response_format
from bench.judge.images import with_images  # a rubric with images: true shows the scenario's images
from bench.judge.grader import Item, Judge, Request
from bench.judge.shown_reasoning import response_block  # the candidate's reasoning, on the rubric's request
from bench.judge.logprobs import expected_scores, logprob_note
from bench.judge.replies import extract_json, rationale_of, validate_scores
from bench.judge.solutions import solution_messages, solve, stopped_after_solution
from bench.judge.transcripts import shown_text  # the answer, or its whole conversation
from bench.models.client import LLM


def rubric_messages(judge: Judge, item: Item) -> tuple[list[dict], dict]:
    """Return the messages grading one item and the truncation note of its response."""
    text, note = shown_text(judge, item, 0)
    tag, context = framed(item.question, (text,), references(judge.rubric, item))
    user = RUBRIC_USER.format(context=context, response=response_block(judge, item, 0, tag, text),
                              note=DATA_NOTE, fields=score_fields(judge.rubric))
    return with_images(judge.rubric, judge_messages(judge, user), [item]), note


async def grade_rubric(judge: Judge, item: Item, llm: LLM, **extra: Any) -> Judgment:
    """Return one item's rubric judgment (scores per criterion, composite, rationale) or its failure."""
    base = judge.base(item)
    given, spend = extra.pop("details", {}), extra.pop("spend", None) or Spend()
    try:  # ``solve_first``: the judge's own answer, asked once per question (a packed fallback brings it)
        item, solved = await solve(judge, item, llm, spend)
    except ProviderError as err:
        return failure(base, err, solution_messages(judge, item), None, spend, details=given, **extra)
    messages, note = rubric_messages(judge, item)
    details = {**note, **given, **solved}
    scales = criterion_scales(judge.rubric)
    parse = lambda text: (lambda obj: (validate_scores(obj, scales), obj))(extract_json(text))  # noqa: E731
    try:
        (scores, obj), raw = await ask_json(llm, judge, messages, response_format(judge.rubric.item_schema(), "grade"),
                                            parse, spend, item.attempt, label=judge.judgment_ids(item)[0],
                                            sample=item.repeat)
    except (JudgeParseError, ProviderError) as err:
        return failure(base, err, messages, getattr(err, "raw", None), spend, details=details, **extra)
    except Halted as stop:  # the budget refused the grading: a paid answer is still written, with its spend
        raise stopped_after_solution(stop, base, messages, spend, details, **extra)
    expected = expected_scores(raw, spend.logprobs, scales)  # with the judge's logprobs only (bench.judge.logprobs)
    details.update(logprob_note(judge.entry, spend.logprobs))  # asked for and none came: the sampled score stands
    return Judgment(**base, scores=scores, score=judge.rubric.composite(scores), rationale=rationale_of(obj),
                    raw=raw, usage=spend.total(), details=details, expected_scores=expected or None,
                    expected_score=judge.rubric.composite(expected) if expected and set(expected) == set(scores)
                    else None, **extra)


class RubricGrader(SingleGrader):
    """Grades each item by its own call against the rubric's anchored criteria."""

    grade_one = staticmethod(grade_rubric)

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> list[Request]:
        return [(rubric_messages(judge, item)[0], response_format(judge.rubric.item_schema(), "grade"))]


GRADER = RubricGrader()
