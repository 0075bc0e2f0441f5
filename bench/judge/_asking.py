"""Asking a judge model: one repair turn for an unusable reply, the spend behind a judgment, a bounded pool.

Every provider request and cache hit behind one judgment is counted on it (``Spend``);
a reply enters the response cache only once it parses, so a bad reply is never served
again from the cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from bench.core.errors import JudgeParseError, ProviderError
from bench.core.records import Judgment, Usage, add_usage, failed_usage
from bench.core.writer import Halt
from bench.judge._prompts import REPAIR
from bench.judge.grader import Emit, Judge
from bench.models.client import LLM

Task = Callable[[], Awaitable[Judgment | list[Judgment]]]  # grades one item (or one packed batch) when called


class Spend:
    """Every provider request and cache hit behind one judgment: replies, repair turns, failed calls."""

    def __init__(self) -> None:
        self.parts: list[Usage] = []

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
                   spend: Spend, attempt: int = 1, timeout_s: float | None = None) -> tuple[Any, str]:
    """Return (parsed value, raw reply), with one repair turn; raise JudgeParseError or ProviderError.

    Every call's usage goes into ``spend``; a reply enters the response cache only once it parses.
    """
    async def ask(msgs: list[dict]) -> Any:
        try:
            comp = await llm.complete(judge.entry.spec(), msgs, response_format=rf, timeout_s=timeout_s,
                                      attempt=attempt, cache_reply=False)
        except ProviderError as err:
            spend.failed(err)
            raise
        spend.reply(comp.usage)
        return comp

    comp = await ask(messages)
    try:
        value = parse(comp.text)
        llm.keep(comp)
        return value, comp.text
    except JudgeParseError as err:
        repair = [*messages, {"role": "assistant", "content": comp.text},
                  {"role": "user", "content": REPAIR.format(reason=err)}]
        again = await ask(repair)
        try:
            value = parse(again.text)
            llm.keep(again)
            return value, again.text
        except JudgeParseError as err2:
            err2.raw = again.text  # type: ignore[attr-defined]
            raise


async def run_bounded(tasks: list[Task], emit: Emit, llm: LLM, halt: Halt | None = None) -> None:
    """Run task factories with a bounded pool of workers, emitting their judgments as they finish.

    A worker checks ``halt`` (truthy once a write of the stage failed) before each new task.
    """
    work = iter(tasks)

    async def worker() -> None:
        for make in work:
            if halt:  # a write failed: start nothing new (tasks in flight finish, and are kept)
                return
            result = await make()
            for j in result if isinstance(result, list) else [result]:
                emit(j)

    await asyncio.gather(*(worker() for _ in range(min(len(tasks), 2 * llm.limits.max_concurrency) or 1)))
