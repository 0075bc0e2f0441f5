"""Asking a judge model: one repair turn for an unusable reply, the spend behind a judgment, a bounded pool.
A reply enters the response cache only once it parses, so a bad reply is never served again from the cache."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from bench.core.errors import Halted, JudgeParseError, ProviderError
from bench.core.records import Judgment, Usage, add_usage, failed_usage
from bench.core.writer import Halt
from bench.judge._prompts import REPAIR
from bench.judge.grader import Emit, Judge
from bench.models.client import LLM
from bench.models.ratelimit import URGENCY

Task = Callable[[], Awaitable[Judgment | list[Judgment]]]  # grades one item (or one packed call's items) when called


class Spend:
    """Every provider request and cache hit behind one judgment: replies, repair turns, failed calls."""

    def __init__(self) -> None:
        self.parts: list[Usage] = []
        self.logprobs: list | None = None  # the token logprobs of the last reply, when the judge asked for them

    def reply(self, usage: Usage) -> None:
        self.parts.append(usage)

    def failed(self, err: ProviderError) -> None:
        self.parts.append(failed_usage(err))

    def total(self) -> Usage | None:
        return add_usage(self.parts)


def failure(base: dict, err: Exception, prompt: list[dict], raw: str | None, spend: Spend, **extra: Any) -> Judgment:
    """Return the failed Judgment of ``err``: its kind, the prompt, the raw reply and what was spent."""
    kind = getattr(err, "kind", None) or ("parse" if isinstance(err, JudgeParseError) else "internal")
    return Judgment(**base, error=str(err), error_kind=kind, prompt=prompt, raw=raw, usage=spend.total(), **extra)


async def ask_json(llm: LLM, judge: Judge, messages: list[dict], rf: dict, parse: Callable[[Any], Any],
                   spend: Spend, attempt: int = 1, timeout_s: float | None = None,
                   label: str | None = None, sample: int = 0) -> tuple[Any, str]:
    """Return (parsed value, raw reply), one repair turn, usage in ``spend``; raises JudgeParseError, ProviderError."""
    async def ask(msgs: list[dict]) -> Any:
        try:
            comp = await llm.complete(judge.entry.spec(), msgs, response_format=rf, timeout_s=timeout_s,
                                      attempt=attempt, cache_reply=False, label=label, sample=sample)
        except ProviderError as err:
            spend.failed(err)
            raise
        spend.reply(comp.usage)
        spend.logprobs = comp.logprobs
        return comp

    comp = await ask(messages)
    try:
        value = parse(comp.text)
    except JudgeParseError as err:
        comp = await ask([*messages, {"role": "assistant", "content": comp.text},
                          {"role": "user", "content": REPAIR.format(reason=err)}])
        try:
            value = parse(comp.text)
        except JudgeParseError as err2:
            err2.raw = comp.text  # type: ignore[attr-defined]
            raise
    llm.keep(comp)
    return value, comp.text


async def run_bounded(tasks: list[Task], emit: Emit, llm: LLM, halt: Halt | None = None, judge: Judge | None = None) -> None:
    """Run task factories in a bounded pool, emitting judgments; none starts after ``halt`` or ``Halted``."""
    work = iter(tasks)
    own = halt is None
    halt = Halt() if halt is None else halt
    specs = [judge.entry.spec()] if judge is not None else []  # on a Batch API: every task at once, one batch
    n_workers = llm.pool(len(tasks), specs)
    left, inherited = len(tasks), URGENCY.get()  # pipelined: the urgency of the collect lane whose answer this grades

    async def worker() -> None:
        nonlocal left
        for make in work:
            if halt:  # a write failed or the budget is reached: start nothing new (tasks in flight finish, are kept)
                return
            left -= 1
            URGENCY.set(max(inherited, (left + 1) / n_workers))  # rounds left, as a collect lane's (candidates.lanes)
            try:
                result = await make()
            except Halted as stop:
                for j in finished_before(stop):
                    emit(j)
                halt.stop(stop)
                return
            for j in result if isinstance(result, list) else [result]:
                emit(j)

    await asyncio.gather(*(worker() for _ in range(n_workers)))
    if own:
        halt.check()


class SingleGrader:
    """A mode that grades each item by its own ``grade_one(judge, item, llm)``: one judgment per item, unpacked."""

    grade_one: Callable[[Judge, Any, LLM], Awaitable[Judgment]]
    compares = False
    orders: tuple[str | None, ...] = (None,)
    packed = False

    def requests_per_item(self, judge: Judge) -> float:
        return 1.0

    async def grade(self, judge: Judge, items: list[Any], llm: LLM, emit: Emit, *, seed: int,
                    done: Any, halt: Halt | None) -> None:
        await run_bounded([lambda i=item: self.grade_one(judge, i, llm) for item in items], emit, llm, halt, judge)


def finished_before(stop: Halted, done: list[Judgment] | None = None) -> list[Judgment]:
    """Return the judgments a task finished before ``stop`` ended it (with ``done``: note them on it first)."""
    if done:
        stop.finished = [*getattr(stop, "finished", []), *done]  # type: ignore[attr-defined]
    return list(getattr(stop, "finished", []))
