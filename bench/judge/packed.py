"""The ``packed`` mode: k items packed in one call; only the items whose grade is missing or invalid are
re-graded, singly, by the rubric mode (each record keeps its pack id and why)."""

from __future__ import annotations

import json
import random
from collections.abc import Set

from bench.core.errors import Halted, JudgeParseError, ProviderError
from bench.core.records import Judgment, Usage, content_hash
from bench.core.writer import Halt
from bench.judge._asking import Spend, finished_before, run_bounded
from bench.judge._prompts import (CONTEXT, DATA_NOTE, PACKED_BLOCK, PACKED_USER, RESPONSE, clip, content_tag,
                                  criterion_scales, score_fields, system_message)
from bench.config.reply_schemas import response_format
from bench.judge.grader import Emit, Item, Judge
from bench.judge.logprobs import expected_scores, object_spans
from bench.judge.replies import extract_json, rationale_of, validate_scores
from bench.judge.rubric import grade_rubric
from bench.models.client import LLM

_SHARED = Usage.model_construct(prompt_tokens=0, completion_tokens=0, cost_usd=0.0, calls=0, cache_hits=0,
                                attempts=0, cached=False)  # a packed item whose call is counted on the first item


def short_id(item: Item) -> str:
    """Return an item's stable short id inside a packed call (from its candidate ids)."""
    return "i" + content_hash(list(item.ids), length=6)


def packed_messages(judge: Judge, order: list[Item], ids: list[str]) -> tuple[list[dict], dict[str, dict]]:
    """Return the messages of one packed call and the truncation note of each item by short id."""
    blocks, notes = [], {}
    for sid, item in zip(ids, order):
        text, notes[sid] = clip(item.texts[0], judge.rubric.max_chars)
        tag = content_tag(item.question, text)
        blocks.append(PACKED_BLOCK.format(id=sid, context=CONTEXT.format(tag=tag, question=item.question),
                                         response=RESPONSE.format(tag=tag, text=text)))
    messages = [{"role": "system", "content": system_message(judge.rubric)},
                {"role": "user", "content": PACKED_USER.format(k=len(order), blocks="\n\n".join(blocks),
                                                              note=DATA_NOTE, fields=score_fields(judge.rubric))}]
    return messages, notes


async def grade_packed(judge: Judge, items: list[Item], llm: LLM, seed: int = 0) -> list[Judgment]:
    """Grade ``items`` in one call; re-grade singly only the items whose grade is missing or invalid."""
    order = sorted(items, key=short_id)
    random.Random(f"{seed}:{judge.entry.id}:{[short_id(i) for i in order]}").shuffle(order)
    ids = [short_id(i) for i in order]
    # "b…": the spelling from before the packed mode was renamed, kept so that a provider Batch API line sent
    # for this call before then is found again (its label is this id) and old and new records count one call
    pack_id = "b" + content_hash(ids + ([f"repeat{order[0].repeat}"] if order[0].repeat else []), length=10)
    messages, notes = packed_messages(judge, order, ids)
    timeout = llm.limits.timeout_s * (1 + 0.5 * (len(order) - 1))  # the timeout scales with k
    good, problems, raw, call = {}, {sid: "missing from the reply" for sid in ids}, None, Spend()
    expected: dict[str, dict[str, float]] = {}
    try:
        comp = await llm.complete(judge.entry.spec(), messages, timeout_s=timeout, cache_reply=False,
                                  attempt=max(i.attempt for i in order), label=pack_id, sample=order[0].repeat,
                                  response_format=response_format(judge.rubric.packed_schema(ids), "grades"))
        raw = comp.text
        call.reply(comp.usage)
        good, problems = _read_pack(comp.text, ids, criterion_scales(judge.rubric))
        expected = packed_expected_scores(comp.text, comp.logprobs, criterion_scales(judge.rubric))
        if good:
            llm.keep(comp)
    except JudgeParseError as err:
        problems = {sid: f"packed reply unusable: {err}" for sid in ids}
    except ProviderError as err:
        call.failed(err)
        problems = {sid: f"packed call failed: {err}" for sid in ids}
    out = []
    for n, (sid, item) in enumerate(zip(ids, order)):
        spend = call if n == 0 else Spend()  # the packed call is counted once: on its first item
        if sid in good:
            scores, obj = good[sid]
            exp = expected.get(sid) or None
            out.append(Judgment(**judge.base(item), scores=scores, score=judge.rubric.composite(scores),
                                rationale=rationale_of(obj), raw=raw, usage=spend.total() or _SHARED,
                                pack_id=pack_id, details={**notes[sid], "pack_size": len(order)},
                                expected_scores=exp, expected_score=judge.rubric.composite(exp)
                                if exp and set(exp) == set(scores) else None))
        else:  # only this item is re-graded, singly; the record keeps its pack id and why
            try:
                out.append(await grade_rubric(judge, item, llm, pack_id=pack_id, spend=spend,
                                              details={"fallback": "single", "reason": problems[sid]}))
            except Halted as stop:  # the budget is reached: the items graded so far are kept, the rest not started
                finished_before(stop, out)
                raise
    return out


def packed_expected_scores(text: str, logprobs: list | None, scales: dict) -> dict[str, dict[str, float]]:
    """Return each packed item's probability-weighted scores by short id (``bench.judge.logprobs``), read
    within that item's own object of the reply."""
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


class PackedGrader:
    """Grades ``pack_size`` items per call; which items share a call is decided while grading."""

    compares = False
    orders = (None,)
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
