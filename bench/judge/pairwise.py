"""The ``pairwise`` mode: A against B, asked in both orders; the swapped verdict is mapped back, so both
judgments of a pair read in the original order (position bias shows as their disagreement)."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from bench.core.errors import Halted, JudgeParseError, ProviderError
from bench.core.records import Judgment
from bench.core.writer import Halt
from bench.judge._asking import SingleGrader, Spend, ask_json, failure, run_bounded
from bench.judge._prompts import DATA_NOTE, PAIR_USER, framed, references
from bench.judge.layout import judge_messages
from bench.config.reply_schemas import response_format
from bench.judge.images import with_images  # a rubric with images: true shows the scenario's images
from bench.judge.grader import Emit, Item, Judge, Request
from bench.judge.shown_reasoning import response_block  # the candidate's reasoning, on the rubric's request
from bench.judge.replies import MIRROR, extract_json, parse_verdict, rationale_of
from bench.judge.solutions import solution_messages, solve, stopped_after_solution
from bench.judge.transcripts import shown_text  # each answer, or its whole conversation
from bench.models.client import LLM

ORDERS = ("AB", "BA")  # as given, and swapped


async def grade_pair(judge: Judge, item: Item, llm: LLM, order: str) -> Judgment:
    """Judge A vs B in one order ("AB" as given, "BA" swapped); the verdict is stored in the original order."""
    base, spend = judge.base(item, order), Spend()
    try:  # ``solve_first``: the judge's own answer, asked once for both orders (the second finds it cached)
        item, solved = await solve(judge, item, llm, spend)
    except ProviderError as err:
        return failure(base, err, solution_messages(judge, item), None, spend)
    messages, na, nb = _pair_messages(judge, item, order)
    labels = list(judge.rubric.labels)
    details = {"truncated_chars": [na.get("truncated_chars", 0), nb.get("truncated_chars", 0)]} if na or nb else {}
    details.update(solved)
    try:
        shown, raw = await ask_json(llm, judge, messages, response_format(judge.rubric.pairwise_schema(), "verdict"),
                                    lambda t: parse_verdict(t, labels), spend, item.attempt,
                                    label=judge.judgment_ids(item)[judge.grader.orders.index(order)],
                                    sample=item.repeat)
    except (JudgeParseError, ProviderError) as err:
        return failure(base, err, messages, getattr(err, "raw", None), spend, details=details)
    except Halted as stop:  # the budget refused the grading: a paid answer is still written, with its spend
        raise stopped_after_solution(stop, base, messages, spend, details)
    verdict = shown if order == "AB" else MIRROR.get(shown, shown)
    obj = _maybe_json(raw)
    return Judgment(**base, verdict=verdict, rationale=rationale_of(obj) or raw, raw=raw, usage=spend.total(),
                    details={**details, "shown_verdict": shown})


def _pair_messages(judge: Judge, item: Item, order: str) -> tuple[list[dict], dict, dict]:
    """Return the messages of one pairwise order and the truncation notes of the two responses as shown."""
    first, second = (0, 1) if order == "AB" else (1, 0)
    (a, na), (b, nb) = shown_text(judge, item, first), shown_text(judge, item, second)
    tag, context = framed(item.question, (a, b), references(judge.rubric, item))
    user = PAIR_USER.format(context=context, note=DATA_NOTE,
                            a=response_block(judge, item, first, tag + "a", a),
                            b=response_block(judge, item, second, tag + "b", b),
                            labels=", ".join(judge.rubric.labels))
    return with_images(judge.rubric, judge_messages(judge, user), [item]), na, nb


def _maybe_json(text: str) -> Any:
    try:
        return extract_json(text)
    except JudgeParseError:
        return None


class PairwiseGrader(SingleGrader):
    """Grades two responses against each other, once in each order."""

    compares = True
    orders = ORDERS

    def requests_per_item(self, judge: Judge) -> float:
        return float(len(ORDERS))

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> list[Request]:
        rf = response_format(judge.rubric.pairwise_schema(), "verdict")
        ids = judge.judgment_ids(item)
        return [(_pair_messages(judge, item, o)[0], rf) for o, jid in zip(ORDERS, ids) if jid not in done]

    async def grade(self, judge: Judge, items: list[Item], llm: LLM, emit: Emit, *, seed: int,
                    done: Set[str], halt: Halt | None) -> None:
        tasks = []
        for item in items:  # an order graded earlier is not asked again (a resume never writes a second success)
            ids = judge.judgment_ids(item) if done else ["", ""]
            tasks += [lambda i=item, o=o: grade_pair(judge, i, llm, o) for o, jid in zip(ORDERS, ids) if jid not in done]
        await run_bounded(tasks, emit, llm, halt, judge)


GRADER = PairwiseGrader()
