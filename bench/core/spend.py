"""What a run folder has spent: the sum of every record's paid cost, failed attempts and earlier runs included.

A record answered wholly from the response cache cost nothing now (its usage carries the original
call's cost, which was paid once, by whoever made that call); every other record counts its
``cost_usd`` in full. A record whose price was unknown counts nothing and is reported apart, so a
budget (``limits.budget_usd``) never treats an unpriced call as free without saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore


@dataclass(frozen=True)
class Spend:
    """A run folder's spend: USD over priced records, and how many paid records had no price."""

    usd: float
    unpriced: int


def recorded_spend(run_dir: str | Path) -> Spend:
    """Return what the records of ``run_dir`` say was paid (every attempt of every candidate and judgment)."""
    store, usd, unpriced = RunStore(Path(run_dir)), 0.0, 0
    for kind in (Candidate, Judgment):
        for rec in store.iter(kind):
            usage = rec.usage
            if usage is None or usage.cached or not usage.calls:
                continue
            if usage.cost_usd is None:
                unpriced += 1
            else:
                usd += usage.cost_usd
    return Spend(round(usd, 9), unpriced)
