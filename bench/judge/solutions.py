"""The judge's own answer to a question (a rubric's ``solve_first: true``), asked before it sees any candidate.

The judge first answers the item's question itself, in a request of its own: ``SOLVE_SYSTEM``, then the
question as the user turn (with the scenario's images when the rubric shows images), with the judge's
params and no response format. Its identity is the judge, the
question and the repeat (``repeats: k``: one answer per repeat), never the candidate: every candidate asked
the same question (every cell of one prompt on one scenario, both orders of a pair) is graded against the
same answer, which an identical request in flight or the response cache serves, so it is paid once per
judge × question × repeat and a resume finds it in the cache. It is never asked as a fresh attempt: a
failed request is not cached, so the next try asks again anyway, and a good answer stays good when the
grading that followed it failed.

The answer is shown to the judge as its own reference answer (``bench.judge._prompts.OWN_ANSWER``) and
kept in each judgment's ``details["solution"]``. Its usage is counted on the one judgment whose grading
sent the request (``details["solution_paid"]: true``), never on those that reused it: summed over the
records, it counts once, as the budget and the usage tables need. When a stop (``Halted``: the budget) refuses
the grading after the answer was paid, that judgment is still written, as a failure carrying the spend
(``stopped_after_solution``): the answer is cached, so a resume reuses it unpaid and would otherwise never
count what it cost.
"""

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
    """Return the messages asking the judge to answer ``item``'s question itself (with the scenario's images
    when the rubric shows the judge images: the question the candidates answered had them)."""
    messages = [{"role": "system", "content": SOLVE_SYSTEM}, {"role": "user", "content": item.question}]
    return with_images(judge.rubric, messages, [item])


def solution_label(judge: Judge, item: Item) -> str:
    """Return the name of ``item``'s solution request in a Batch API ledger (the repeat in it: the request
    body is the same for every repeat)."""
    return f"{judge.entry.id}#solution#{item.repeat}"


async def solve(judge: Judge, item: Item, llm: LLM, spend: Spend) -> tuple[Item, dict[str, Any]]:
    """Return ``item`` with the judge's own answer and the details that record it (unchanged and {} when the
    rubric does not ``solve_first``). A request actually sent is counted on ``spend``; a reply reused (from
    the cache, or shared with an identical request in flight) is not. Raises ProviderError (counted on
    ``spend``) when the request fails, and ``Halted`` when the budget refuses it."""
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
    """Return ``stop``, with the failed judgment of an item whose own answer was paid (``details["solution_paid"]``)
    noted on it (``finished``: ``run_bounded`` writes it), carrying ``spend`` and the ``prompt`` that was refused.

    Without it the item would get no record (as any item a stop cuts short) and the answer's cost would be lost:
    the answer is cached, so the resume that grades the item again reuses it without paying or counting it.
    ``stop`` is returned unchanged when this grading paid no answer.
    """
    if details.get("solution_paid"):
        kind = "budget" if isinstance(stop, BudgetReached) else "stopped"
        finished_before(stop, [Judgment(**base, error=f"the judge's own answer was paid, then the grading was not "
                                                      f"sent: {stop}", error_kind=kind, prompt=prompt,
                                        usage=spend.total(), details=details, **extra)])
    return stop
