"""The ``packed`` mode: k items packed in one call; only the items whose grade is missing or invalid are
re-graded, singly, by the rubric mode (each record keeps its pack id and why)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Set
from dataclasses import dataclass, field

from bench.core.errors import Halted, JudgeParseError, ProviderError
from bench.core.records import Judgment, Usage, content_hash
from bench.core.writer import Halt
from bench.judge._asking import SingleGrader, Spend, failure, finished_before, run_bounded
from bench.judge._prompts import (DATA_NOTE, PACKED_BLOCK, PACKED_USER, criterion_scales, framed,
                                  references, score_fields)
from bench.judge.layout import judge_messages
from bench.config.reply_schemas import response_format
from bench.judge.images import with_images  # a rubric with images: true shows the scenario's images
from bench.judge.grader import Emit, Item, Judge
from bench.judge.shown_reasoning import response_block  # the candidate's reasoning, on the rubric's request
from bench.judge.logprobs import expected_scores, logprob_note, object_spans
from bench.judge.replies import extract_json, rationale_of, validate_scores
from bench.judge.rubric import grade_rubric
from bench.judge.solutions import solution_messages, solve, stopped_after_solution
from bench.judge.transcripts import shown_text  # the answer, or its whole conversation
from bench.models.client import LLM

_SHARED = Usage.model_construct(prompt_tokens=0, completion_tokens=0, cost_usd=0.0, calls=0, cache_hits=0,
                                attempts=0, cached=False)  # a packed item whose call is counted on the first item


def short_id(item: Item) -> str:
    """Return an item's stable short id in a packed call (from its candidate ids, and its turn)."""
    return "i" + content_hash(list(item.ids) + ([f"turn{item.turn}"] if item.turn is not None else []), length=6)


def packed_messages(judge: Judge, order: list[Item], ids: list[str]) -> tuple[list[dict], dict[str, dict]]:
    """Return the messages of one packed call and the truncation note of each item by short id."""
    blocks, notes = [], {}
    for sid, item in zip(ids, order):
        text, notes[sid] = shown_text(judge, item, 0)
        tag, context = framed(item.question, (text,), references(judge.rubric, item))
        blocks.append(PACKED_BLOCK.format(id=sid, context=context,
                                          response=response_block(judge, item, 0, tag, text)))
    messages = judge_messages(judge, PACKED_USER.format(k=len(order), blocks="\n\n".join(blocks), note=DATA_NOTE,
                                                        fields=score_fields(judge.rubric)))
    return with_images(judge.rubric, messages, order, labels=ids), notes


def pack_order(judge: Judge, items: list[Item], seed: int) -> list[Item]:
    """Return ``items`` in the order one packed call shows them: shuffled, reproducibly from their short ids."""
    order = sorted(items, key=short_id)
    random.Random(f"{seed}:{judge.entry.id}:{[short_id(i) for i in order]}").shuffle(order)
    return order


@dataclass
class PackReply:
    """What one packed call brought back: raw reply, valid grades, each other item's problem, the spend."""

    problems: dict[str, str]
    raw: str | None = None
    good: dict[str, tuple[dict, dict]] = field(default_factory=dict)
    expected: dict[str, dict[str, float]] = field(default_factory=dict)
    no_logprobs: dict[str, str] = field(default_factory=dict)  # asked for and none came (bench.judge.logprobs)
    call: Spend = field(default_factory=Spend)


async def grade_packed(judge: Judge, items: list[Item], llm: LLM, seed: int = 0) -> list[Judgment]:
    """Grade ``items`` in one call; re-grade singly only the items whose grade is missing or invalid."""
    order = pack_order(judge, items, seed)
    ids = [short_id(i) for i in order]
    # "b…": the pre-rename spelling, kept so that earlier Batch API lines and records match this call
    pack_id = "b" + content_hash(ids + ([f"repeat{order[0].repeat}"] if order[0].repeat else []), length=10)
    order, ids, solved, out = await _solve_all(judge, order, ids, llm)  # solve_first: each item's own answer
    if not order:
        return out
    messages, notes = packed_messages(judge, order, ids)
    try:
        reply = await _ask_pack(judge, order, ids, messages, llm, pack_id)
    except Halted as stop:  # the budget refused the call: items whose own answers were paid are written, failed
        for sid, item in zip(ids, order):
            answer, spend = solved.get(sid, ({}, Spend()))
            stopped_after_solution(stop, judge.base(item), messages, spend, answer, pack_id=pack_id)
        finished_before(stop, out)
        raise
    return out + await _judgments(judge, order, ids, reply, solved, notes, llm, pack_id)


async def _ask_pack(judge: Judge, order: list[Item], ids: list[str], messages: list[dict], llm: LLM,
                    pack_id: str) -> PackReply:
    """Return what the packed call of ``order`` brought; raises only ``Halted``."""
    timeout = llm.limits.timeout_s * (1 + 0.5 * (len(order) - 1))  # the timeout scales with k
    reply, scales = PackReply({sid: "missing from the reply" for sid in ids}), criterion_scales(judge.rubric)
    try:
        comp = await llm.complete(judge.entry.spec(), messages, timeout_s=timeout, cache_reply=False,
                                  attempt=max(i.attempt for i in order), label=pack_id, sample=order[0].repeat,
                                  response_format=response_format(judge.rubric.packed_schema(ids), "grades"))
        reply.raw = comp.text
        reply.call.reply(comp.usage)
        reply.good, reply.problems = _read_pack(comp.text, ids, scales)
        reply.expected = packed_expected_scores(comp.text, comp.logprobs, scales)
        reply.no_logprobs = logprob_note(judge.entry, comp.logprobs)
        if reply.good:
            llm.keep(comp)
    except JudgeParseError as err:
        reply.problems = {sid: f"packed reply unusable: {err}" for sid in ids}
    except ProviderError as err:
        reply.call.failed(err)
        reply.problems = {sid: f"packed call failed: {err}" for sid in ids}
    return reply


async def _judgments(judge: Judge, order: list[Item], ids: list[str], reply: PackReply,
                     solved: dict[str, tuple[dict, Spend]], notes: dict[str, dict], llm: LLM,
                     pack_id: str) -> list[Judgment]:
    """Return each item's judgment (its grade in ``reply``, else a single re-grade); a budget stop ends re-grades."""
    out: list[Judgment] = []
    stop: Halted | None = None
    for n, (sid, item) in enumerate(zip(ids, order)):
        answer, spend = solved.get(sid, ({}, Spend()))  # the item's own answer: its details, what it cost here
        spend.parts += reply.call.parts if n == 0 else []  # the packed call is counted once: on its first item
        if sid in reply.good:
            scores, obj = reply.good[sid]
            exp = reply.expected.get(sid) or None
            out.append(Judgment(**judge.base(item), scores=scores, score=judge.rubric.composite(scores),
                                rationale=rationale_of(obj), raw=reply.raw, usage=spend.total() or _SHARED,
                                pack_id=pack_id, details={**notes[sid], "pack_size": len(order), **answer,
                                                          **reply.no_logprobs},
                                expected_scores=exp, expected_score=judge.rubric.composite(exp)
                                if exp and set(exp) == set(scores) else None))
            continue
        details = {"fallback": "single", "reason": reply.problems[sid], **answer}
        if stop is not None:  # not asked: written only when its own answer was paid
            stopped_after_solution(stop, judge.base(item), None, spend, details, pack_id=pack_id)
            continue
        try:  # only this item is re-graded, singly
            out.append(await grade_rubric(judge, item, llm, pack_id=pack_id, spend=spend, details=details))
        except Halted as err:  # grade_rubric noted this item's failure on it when its own answer was paid
            stop = err
    if stop is not None:
        finished_before(stop, out)
        raise stop
    return out


async def _solve_all(judge: Judge, order: list[Item], ids: list[str], llm: LLM
                     ) -> tuple[list[Item], list[str], dict[str, tuple[dict, Spend]], list[Judgment]]:
    """Return (items with their own answers, short ids, each answer's details and spend, failures); raises Halted."""
    if not judge.rubric.solve_first:
        return order, ids, {}, []
    spends = [Spend() for _ in order]
    results = await asyncio.gather(*(solve(judge, item, llm, spend) for item, spend in zip(order, spends)),
                                   return_exceptions=True)
    kept, solved, failed = [], {}, []
    for item, sid, spend, result in zip(order, ids, spends, results):
        if isinstance(result, ProviderError):
            failed.append(failure(judge.base(item), result, solution_messages(judge, item), None, spend))
        elif not isinstance(result, BaseException):
            kept.append((result[0], sid))
            solved[sid] = (result[1], spend)
    stop = next((r for r in results if isinstance(r, BaseException) and not isinstance(r, ProviderError)), None)
    if isinstance(stop, Halted):  # the budget: the answers paid are cached, and written here with their spend
        for (item, sid) in kept:
            stopped_after_solution(stop, judge.base(item), None, solved[sid][1], solved[sid][0])
        finished_before(stop, failed)
    if stop is not None:
        raise stop  # Halted, or a bug
    return [item for item, _sid in kept], [sid for _item, sid in kept], solved, failed


def packed_expected_scores(text: str, logprobs: list | None, scales: dict) -> dict[str, dict[str, float]]:
    """Return each packed item's logprob-weighted scores by short id, read within the item's own object."""
    if not logprobs:
        return {}
    out = {}
    for start, end in object_spans(text):
        try:
            sid = json.loads(text[start:end]).get("id")
        except (ValueError, AttributeError):
            continue
        if isinstance(sid, str) and sid not in out:
            out[sid] = expected_scores(text, logprobs, scales, span=(start, end))
    return out


def _read_pack(text: str, ids: list[str], scales: dict) -> tuple[dict, dict]:
    """Return (valid grades by id, problems by id) from a packed reply; unknown and duplicated ids are problems."""
    data = extract_json(text)
    grades = data.get("grades") if isinstance(data, dict) else data
    if not isinstance(grades, list):
        raise JudgeParseError("expected a 'grades' array")
    seen: dict[str, int] = {}
    for g in grades:
        if isinstance(g, dict) and isinstance(g.get("id"), str):
            seen[g["id"]] = seen.get(g["id"], 0) + 1
    good, problems = {}, {sid: "missing from the reply" for sid in ids}
    for g in grades:
        sid = g.get("id") if isinstance(g, dict) else None
        if sid not in problems or seen.get(sid, 0) > 1:
            if sid in problems:
                problems[sid] = "graded more than once"
            continue
        try:
            good[sid] = (validate_scores(g, scales), g)
            problems.pop(sid)
        except JudgeParseError as err:
            problems[sid] = str(err)
    return good, problems


class PackedGrader(SingleGrader):
    """Grades ``pack_size`` items per call; which items share a call is decided while grading."""

    packed = True

    def requests_per_item(self, judge: Judge) -> float:
        return 1.0 / max(1, judge.entry.pack_size)

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> None:
        return None  # the messages depend on which items share the call

    async def grade(self, judge: Judge, items: list[Item], llm: LLM, emit: Emit, *, seed: int,
                    done: Set[str], halt: Halt | None) -> None:
        k = max(1, judge.entry.pack_size)
        rounds = [[i for i in items if i.repeat == r] for r in sorted({i.repeat for i in items})]  # one repeat per call
        chunks = [part[i:i + k] for part in rounds for i in range(0, len(part), k)]
        await run_bounded([lambda c=c: grade_packed(judge, c, llm, seed) for c in chunks], emit, llm, halt, judge)


GRADER = PackedGrader()
