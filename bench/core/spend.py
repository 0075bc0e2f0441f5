"""What a run folder has spent: every record's paid cost, failed attempts and earlier runs included.

A record answered wholly from the cache costs nothing now; one of unknown price is reported apart. A request
a kill left in flight counts at its reservation until a later reply claims it, in `bench status` and the estimate
from the kill on (docs/budget.md, Kills)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.journal import lost_attempts
from bench.core.records import Candidate, Judgment, Usage
from bench.core.store import RunStore

LOST = "in_flight_at_kill"  # marks a paid_attempts entry: a request a kill left in flight (bench.models._completion)


@dataclass(frozen=True)
class RunSpend:
    """A run folder's spend: USD over priced records, how many paid records had no price, how many had a
    reply over its output limit, an estimated usage (no usage in a reply), or more than one paid attempt."""

    usd: float
    unpriced: int
    over_limit: int = 0
    estimated: int = 0
    repaid: int = 0
    lost_in_flight: int = 0  # requests in flight at a kill, whose replies were lost (estimated spend)
    lost_in_flight_usd: float = 0.0  # of ``usd``, what they count: a repeat's cost, or a reservation
    lost_reserved: int = 0  # of ``lost_in_flight``, those no reply to the same request priced yet: at their reservation

    def notes(self) -> str:
        """Return what the spend holds besides plain replies, for a summary line ("" when nothing)."""
        said = [f"{self.over_limit} with a reply over its max_tokens (usage.over_limit)" if self.over_limit else "",
                f"{self.estimated} estimated: a reply had no usage, counted from its text (usage.estimated)"
                if self.estimated else "",
                f"{self.repaid} paid more than once (usage.paid_attempts)" if self.repaid else "",
                self._lost() if self.lost_in_flight else ""]
        return "; ".join(s for s in said if s)

    def estimated_note(self) -> str:
        """Return " (of which $X estimated: …)" for a spend line: what requests in flight at a kill count ("")."""
        return f" (of which {self._lost()})" if self.lost_in_flight else ""

    def _lost(self) -> str:
        every, n = self.lost_reserved == self.lost_in_flight, self.lost_in_flight
        how = (f"{'all' if every else self.lost_reserved} at {'their' if every else 'a'} reservation until the same "
               f"request is answered again" if self.lost_reserved else "each at the cost of its repeat")
        return f"{dollars(self.lost_in_flight_usd)} estimated: {n} request(s) in flight at a kill, {how}"


def dollars(usd: float) -> str:
    """Return ``usd`` as a short dollar amount that still shows a fraction of a cent."""
    return f"${usd:,.2f}" if usd >= 100 else f"${usd:.4f}" if usd >= 0.01 else f"${usd:.6f}"


def recorded_spend(run_dir: str | Path, held: Callable[[list[str]], set[str]] | None = None) -> RunSpend:
    """Return what ``run_dir``'s records say was paid, and the requests a kill left in flight no record claimed
    (``held``: see ``open_lost``)."""
    store, usd, unpriced, flagged = RunStore(Path(run_dir)), 0.0, 0, [0, 0, 0]
    claims: list[dict[str, Any]] = []
    for kind in (Candidate, Judgment):
        for rec in store.iter(kind):
            for usage, by in _parts(rec):
                cost = paid_cost(usage, getattr(rec, "turns", None), by)
                if cost is None:
                    unpriced += 1
                else:
                    usd += cost
                if usage is not None and not usage.cached and usage.calls:
                    claims += [a for a in usage.paid_attempts or () if LOST in a]
                    flagged[0] += usage.over_limit
                    flagged[1] += usage.estimated
                    flagged[2] += bool(usage.paid_attempts)
    left = open_lost(run_dir, Counter(a[LOST] for a in claims), held)  # at their reservation
    reserved = [r for attempts in left.values() for r in attempts]
    lost_usd = sum(r for r in reserved if r is not None) + sum(a.get("cost_usd") or 0.0 for a in claims)
    return RunSpend(round(usd + sum(r or 0.0 for r in reserved), 9), unpriced + sum(r is None for r in reserved),
                    *flagged, lost_in_flight=len(claims) + len(reserved), lost_in_flight_usd=round(lost_usd, 9),
                    lost_reserved=len(reserved))


def open_lost(run_dir: str | Path, claimed: Counter[str] | None = None,
              held: Callable[[list[str]], set[str]] | None = None) -> dict[str, list[float | None]]:
    """Return the requests kills left in flight that no record has claimed yet: {key: [reservation per attempt]}.

    ``claimed``: how many attempts of each key the records claim (None: read from the records). ``held``: which
    of some keys the response cache holds; given, a kill's journal no stage start settled yet counts too (what
    `bench status` and `bench estimate` show right after a kill: ``bench.models.budget.cache_holding``)."""
    lost = lost_attempts(run_dir, held)
    if lost and claimed is None:
        claimed = Counter(a[LOST] for kind in (Candidate, Judgment) for rec in RunStore(Path(run_dir)).iter(kind)
                          for usage, _by in _parts(rec) for a in (usage and usage.paid_attempts) or () if LOST in a)
    return {key: attempts[claimed[key]:] for key, attempts in lost.items()
            if isinstance(attempts, list) and len(attempts) > claimed[key]}


def _parts(rec: Candidate | Judgment) -> list[tuple[Usage | None, str]]:
    """Return a record's usages and whose requests each counts: the model's (or judge's), the simulated user's."""
    simulated = getattr(rec, "simulator_usage", None)
    return [(rec.usage, "model")] + ([(simulated, "simulator")] if simulated is not None else [])


def paid_cost(usage: Usage | None, turns: list[dict[str, Any]] | None = None, by: str = "model") -> float | None:
    """Return the USD a record's ``usage`` paid now (0.0 all cached, None an unknown price).
    ``turns`` take out a resumed conversation's replayed turns, paid by an earlier attempt."""
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
