"""The judge's own answer to a question (``solve_first: true``), asked before it sees any candidate: paid once
per judge × question × repeat, served to every candidate by the cache, counted on the judgment that sent it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.core.errors import BudgetReached, Halted, ProviderError
from bench.core.records import Judgment
from bench.judge._asking import Spend, finished_before
from bench.judge._prompts import SOLVE_SYSTEM
from bench.judge.grader import Item, Judge
from bench.judge.images import with_images
from bench.models.client import LLM


def solution_messages(judge: Judge, item: Item) -> list[dict]:
    """Return the messages asking the judge to answer ``item``'s question itself (with its images)."""
    messages = [{"role": "system", "content": SOLVE_SYSTEM}, {"role": "user", "content": item.question}]
    return with_images(judge.rubric, messages, [item])


def solution_label(judge: Judge, item: Item) -> str:
    """Return ``item``'s solution request's label in a Batch API ledger (its repeat in it)."""
    return f"{judge.entry.id}#solution#{item.repeat}"


async def solve(judge: Judge, item: Item, llm: LLM, spend: Spend) -> tuple[Item, dict[str, Any]]:
    """Return ``item`` with the judge's answer and details ({} without solve_first); raises ProviderError, Halted."""
    if not judge.rubric.solve_first:
        return item, {}
    if item.solution is not None:  # asked already (a packed call's item re-graded singly)
        return item, {"solution": item.solution}
    try:
        comp = await llm.complete(judge.entry.spec(), solution_messages(judge, item), sample=item.repeat,
                                  label=solution_label(judge, item))
    except ProviderError as err:
        spend.failed(err)
        raise
    paid = not comp.usage.cached
    if paid:
        spend.reply(comp.usage)
    return replace(item, solution=comp.text), {"solution": comp.text, **({"solution_paid": True} if paid else {})}


def stopped_after_solution(stop: Halted, base: dict, prompt: list[dict] | None, spend: Spend, details: dict,
                           **extra: Any) -> Halted:
    """Return ``stop`` noting the failed judgment (``spend``, ``prompt``) of an item whose own answer was paid."""
    if details.get("solution_paid"):
        kind = "budget" if isinstance(stop, BudgetReached) else "stopped"
        finished_before(stop, [Judgment(**base, error=f"the judge's own answer was paid, then the grading was not "
                                                      f"sent: {stop}", error_kind=kind, prompt=prompt,
                                        usage=spend.total(), details=details, **extra)])
    return stop
