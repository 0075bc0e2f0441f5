"""What a run folder has spent: the sum of every record's paid cost, failed attempts and earlier runs included.

A record answered wholly from the response cache cost nothing now (its usage carries the original
call's cost, which was paid once, by whoever made that call); every other record counts its
``cost_usd`` in full: every paid attempt of its calls (an empty reply retried, a failed item's paid
replies: ``Usage.paid_attempts``), and, for a reply that carried no usage, the cost of its estimated
tokens (``Usage.estimated``: a bound, never zero). A record whose price was unknown counts nothing and is
reported apart, so a budget (``limits.budget_usd``) never treats an unpriced call as free without saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore


@dataclass(frozen=True)
class RunSpend:
    """A run folder's spend: USD over priced records, how many paid records had no price, how many had a
    reply over its output limit, an estimated usage (no usage in a reply), or more than one paid attempt."""

    usd: float
    unpriced: int
    over_limit: int = 0
    estimated: int = 0
    repaid: int = 0

    def notes(self) -> str:
        """Return what the spend holds besides plain replies, for a summary line ("" when nothing; an unknown
        price is said where a budget needs it, not after every sweep of a self-hosted model)."""
        said = [f"{self.over_limit} with a reply over its max_tokens (usage.over_limit)" if self.over_limit else "",
                f"{self.estimated} estimated: a reply had no usage, counted from its text (usage.estimated)"
                if self.estimated else "",
                f"{self.repaid} paid more than once (usage.paid_attempts)" if self.repaid else ""]
        return "; ".join(s for s in said if s)


def recorded_spend(run_dir: str | Path) -> RunSpend:
    """Return what the records of ``run_dir`` say was paid (every attempt of every candidate and judgment)."""
    store, usd, unpriced, flagged = RunStore(Path(run_dir)), 0.0, 0, [0, 0, 0]
    for kind in (Candidate, Judgment):
        for rec in store.iter(kind):
            usage = rec.usage
            if usage is None or usage.cached or not usage.calls:
                continue
            if usage.cost_usd is None:
                unpriced += 1
            else:
                usd += usage.cost_usd
            flagged[0] += usage.over_limit
            flagged[1] += usage.estimated
            flagged[2] += bool(usage.paid_attempts)
    return RunSpend(round(usd, 9), unpriced, *flagged)
