"""What a run folder has spent: the sum of every record's paid cost, failed attempts and earlier runs included.

A record answered wholly from the response cache costs nothing now; every other record counts its
``cost_usd`` in full, paid attempts and estimated usage included. A record of unknown price counts nothing
and is reported apart, so a budget never treats an unpriced call as free silently. A conversation counts its
model's and simulated user's requests alike, less turns the cache answered. Requests a kill left in flight
(``bench.core.journal``) count at their reservation, marked as estimated (``lost_in_flight``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.journal import read_repeats
from bench.core.records import Candidate, Judgment, Usage
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
    lost_in_flight: int = 0  # requests in flight at a kill, whose replies were lost: counted at their reservation
    lost_in_flight_usd: float = 0.0  # of ``usd``, what they count (an estimate: the most each could cost)

    def notes(self) -> str:
        """Return what the spend holds besides plain replies, for a summary line ("" when nothing; an unknown
        price is said where a budget needs it, not after every sweep of a self-hosted model)."""
        said = [f"{self.over_limit} with a reply over its max_tokens (usage.over_limit)" if self.over_limit else "",
                f"{self.estimated} estimated: a reply had no usage, counted from its text (usage.estimated)"
                if self.estimated else "",
                f"{self.repaid} paid more than once (usage.paid_attempts)" if self.repaid else "",
                f"${self.lost_in_flight_usd:.4f} estimated for {self.lost_in_flight} request(s) in flight at a kill "
                f"(counted at their reservation, repeats.json)" if self.lost_in_flight else ""]
        return "; ".join(s for s in said if s)


def recorded_spend(run_dir: str | Path) -> RunSpend:
    """Return what the records of ``run_dir`` say was paid (every attempt of every candidate and judgment,
    a conversation's simulated user included)."""
    store, usd, unpriced, flagged = RunStore(Path(run_dir)), 0.0, 0, [0, 0, 0]
    for kind in (Candidate, Judgment):
        for rec in store.iter(kind):
            for usage, by in _parts(rec):
                cost = paid_cost(usage, getattr(rec, "turns", None), by)
                if cost is None:
                    unpriced += 1
                else:
                    usd += cost
                if usage is not None and not usage.cached and usage.calls:
                    flagged[0] += usage.over_limit
                    flagged[1] += usage.estimated
                    flagged[2] += bool(usage.paid_attempts)
    lost = read_repeats(run_dir)  # requests a kill left in flight: at their reservation (bench.core.journal)
    lost_usd = float(lost.get("lost_in_flight_usd", 0.0))
    unpriced += int(lost.get("lost_in_flight_unpriced", 0))
    return RunSpend(round(usd + lost_usd, 9), unpriced, *flagged, lost_in_flight=_lost_count(lost),
                    lost_in_flight_usd=round(lost_usd, 9))


def _lost_count(repeats: dict[str, Any]) -> int:
    """Return the requests counted at their reservation (events of folders journaled before reservations: none)."""
    return sum(int(e.get("in_flight_repeats", 0)) for e in repeats.get("events", []) if "lost_in_flight_usd" in e)


def _parts(rec: Candidate | Judgment) -> list[tuple[Usage | None, str]]:
    """Return a record's usages and whose requests each counts: the model's (or judge's), the simulated user's."""
    simulated = getattr(rec, "simulator_usage", None)
    return [(rec.usage, "model")] + ([(simulated, "simulator")] if simulated is not None else [])


def paid_cost(usage: Usage | None, turns: list[dict[str, Any]] | None = None, by: str = "model") -> float | None:
    """Return the USD a record's ``usage`` paid now: 0.0 when it sent no request (every reply from the response
    cache), None when some paid reply had no known price. ``turns`` (a conversation's requests, each with
    its usage, ``by`` the model or the simulator) take out the cost of the turns the cache answered: a
    resumed conversation's usage adds its replayed turns at their original cost, paid by an earlier attempt."""
    if usage is None or usage.cached or not usage.calls:
        return 0.0
    if usage.cost_usd is None:
        return None
    replayed = sum(float(u.get("cost_usd") or 0.0) for u in _turn_usages(turns, by) if _from_cache(u))
    return max(0.0, usage.cost_usd - replayed)


def _turn_usages(turns: list[dict[str, Any]] | None, by: str) -> list[dict[str, Any]]:
    """Return the usage dicts of the ``by`` requests of a conversation's ``turns``."""
    return [t["usage"] for t in turns or () if isinstance(t, dict) and t.get("by", "model") == by
            and isinstance(t.get("usage"), dict)]


def _from_cache(usage: dict[str, Any]) -> bool:
    """Return whether a turn's reply came without a paid request (the response cache, or a request in flight)."""
    return bool(usage.get("cached")) or not usage.get("calls", 1)
