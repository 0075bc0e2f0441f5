"""A sweep stopped on purpose (a ``Halted``: the budget reached, a batch refused, a price unknown): its exit code
and its closing lines.

The kernel's ``Halted`` ends its execution with its ``exit_code``, not a crash; the report and MLflow still
follow, and the summary says what was spent, what was not started and how to continue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.core.errors import BudgetReached, Halted
from bench.core.spend import recorded_spend
from bench.core.tally import Counts, StoreTally
from bench.estimate import planned_progress
from bench.models.budget import PriceUnknown, dollars
from bench.run import Run, shown_path

KNOWN = (BudgetReached, PriceUnknown)  # imported here so every Halted a kernel may raise is a known subclass


def halted_exit_code(ename: str | None) -> int | None:
    """Return the exit code of the ``Halted`` subclass named ``ename`` (a kernel's error), else None (a crash)."""
    codes: dict[str, int] = {}
    stack: list[type[Halted]] = [Halted]
    while stack:
        cls = stack.pop()
        codes[cls.__name__] = cls.exit_code
        stack += cls.__subclasses__()
    return codes.get(ename or "")


def not_started(run: Run) -> tuple[int, int | None]:
    """Return (answers, judgments) the run plans that have no record yet (None: the run has no judges)."""
    plan = planned_progress(run)
    tally = StoreTally(run.dir)
    tally.refresh()
    models = tally.by_model(plan.cells)
    answers = sum(max(0, n - models.get(m, Counts()).done) for m, n in plan.per_model.items())
    if plan.judgments is None:
        return answers, None
    return answers, max(0, plan.judgments - sum(c.done for c in tally.by_judge(plan.rubrics).values()))


def spend_line(run: Run) -> str | None:
    """Return the summary line of what the run folder's spend holds besides plain replies: replies over their
    max_tokens, usages estimated (a reply without usage), items paid more than once (None when there are none)."""
    spend = recorded_spend(run.dir)
    notes = spend.notes()
    return f"spend: {dollars(spend.usd)} recorded in {shown_path(run.dir)}; of its records: {notes}" if notes else None


def stopped_summary(run: Run, halted: Sequence[Any], retry: str) -> str:
    """Return the closing lines of a sweep whose ``halted`` executions stopped on purpose (see the module doc)."""
    answers, judgments = not_started(run)
    left = " and ".join([f"{answers} answers"] + ([f"{judgments} judgments"] if judgments is not None else []))
    params = shown_path(run.params_path)
    if any(ex.halted == BudgetReached.__name__ for ex in halted):
        spend = recorded_spend(run.dir)
        limit = run.sweep.limits.budget_usd or 0.0
        unpriced = f" (and {spend.unpriced} records with no known price)" if spend.unpriced else ""
        return (f"budget reached: spent {dollars(spend.usd)} of limits.budget_usd = {dollars(limit)}{unpriced} in "
                f"{shown_path(run.dir)}; {left} not started (no record: nothing failed)\n"
                f"to continue, raise limits.budget_usd in {params} and re-run: {retry}")
    reasons = "\n".join(f"  {ex.name}: {ex.error}" for ex in halted)
    return (f"stopped before the end ({', '.join(sorted({ex.halted for ex in halted}))}); {left} not started "
            f"(no record: nothing failed):\n{reasons}\nfix what it says, then re-run: {retry}")
