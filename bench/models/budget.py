"""``limits.budget_usd``: a hard cap on what a run folder spends, held before every paid request (README, Budgets).

What counts as spent: the run folder's records (``bench.core.spend.recorded_spend``: every paid reply,
earlier runs and failed attempts included) plus what this sweep has paid since it started. Before a
request goes on the wire it reserves its worst-case cost: its prompt (characters / 4, the estimate the
``tpm`` caps use: ``bench.models.ratelimit.estimate_tokens``) and its whole output limit (``max_tokens``;
1024 tokens when it sets none) at the price it is called at (``routing.price_per_token``, the Batch
API price for a batched call). It is granted when spent + reserved + it fits the budget; it waits while
requests on the wire may settle for less; it is refused with ``BudgetReached`` when spent + it passes the
budget. After the reply the reservation is settled with the real cost; a request that failed (an HTTP
error, a timeout) is released, as its record counts nothing. So the recorded spend stays within the budget
as long as a prompt has no more tokens than characters / 4 plus the output tokens its limit left unused.

A reply from the response cache sends nothing and is never refused; a free request (a dry model, a price
of 0) reserves nothing. A priced request under a budget whose model has no known price is refused with
``PriceUnknown``: its spend cannot be capped.

One process holds its cap in a ``Purse``. The executions of one sweep (``--jobs``, collect then judge, a
cluster's workers) hold theirs in the sweep's lease server (bench.models._leases), which ``bench sweep``
starts with the budget and the run folder's spend at the sweep's start, and names in BENCH_LIMITS_ADDRESS
with BENCH_BUDGET_USD set: then every reservation of every kernel is counted in that one place.

A stage that hears BudgetReached starts no new item; what is on the wire finishes and is written; the
items not started get no record (never a failed one); the stage then raises BudgetReached once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError, BudgetReached, Halted
from bench.core.spend import recorded_spend
from bench.models._leases import ADDRESS_ENV, RemoteLimiter
from bench.models._messages import output_limit
from bench.models._purse import Purse
from bench.models.ratelimit import DEFAULT_COMPLETION_TOKENS, estimate_tokens, limiter_for
from bench.models.routing import Route, price_per_token

BUDGET_ENV = "BENCH_BUDGET_USD"  # set by `bench sweep`: its lease server (BENCH_LIMITS_ADDRESS) holds the budget


class PriceUnknown(Halted):
    """A budget is set but a model's price is unknown: its spend cannot be capped, so nothing is sent to it."""

    exit_code = 2  # bench.core.outcome.EXIT_BAD_INPUT: declare the price (or drop the budget) and re-run


@dataclass(frozen=True)
class Held:
    """One granted reservation: its worst-case USD, and where it is held (the lease server's id, or None)."""

    usd: float
    rid: int | None = None
    server: RemoteLimiter | None = None


def dollars(usd: float) -> str:
    """Return ``usd`` as a short dollar amount that still shows a fraction of a cent."""
    return f"${usd:,.2f}" if usd >= 100 else f"${usd:.4f}" if usd >= 0.01 else f"${usd:.6f}"


def sweep_budget(limit: float | None, run_dir: str | Path) -> tuple[float, float] | None:
    """Return what a sweep's lease server holds for ``limits.budget_usd``: (the budget, the run folder's spend now)."""
    return None if limit is None else (float(limit), recorded_spend(run_dir).usd)


class Budget:
    """The spend cap of one client (``LLM.budget``): reserve a paid request's worst case, settle its real cost.

    ``params`` names the params file in the messages (where to raise ``limits.budget_usd``).
    """

    def __init__(self, limit_usd: float, run_dir: str | Path, params: str = "the params file"):
        self.limit = float(limit_usd)
        self.run_dir = Path(run_dir)
        self.params = params
        self.shared = bool(os.environ.get(BUDGET_ENV) and os.environ.get(ADDRESS_ENV))  # the sweep's server holds it
        self.purse: Purse | None = None  # this process's cap, made on the first paid request (not shared)
        self._prices: dict[tuple[Any, bool], tuple[float, float] | None] = {}

    def worst_case(self, route: Route, body: dict[str, Any], batch: bool = False) -> float:
        """Return the most ``body`` can cost on ``route``: its prompt estimate and its whole output limit."""
        key = (route.spec, batch)
        if key not in self._prices:
            self._prices[key] = price_per_token(route, batch)
        price = self._prices[key]
        if price is None:
            raise PriceUnknown(f"limits.budget_usd is set, but the price of {route.spec.model} is unknown, so its "
                               f"spend cannot be capped; nothing was sent to it. Declare it on that entry in "
                               f"{self.params} (price: {{input_per_mtok: …, output_per_mtok: …}}), or remove "
                               f"limits.budget_usd")
        limit = output_limit(body)
        out = max(0, DEFAULT_COMPLETION_TOKENS if limit is None else limit)
        return price[0] * (estimate_tokens(body) - out) + price[1] * out

    async def reserve(self, route: Route, body: dict[str, Any], *, batch: bool = False) -> Held | None:
        """Reserve the worst-case cost of one request before it is sent; None when it is free.

        Waits while requests on the wire may make room; raises BudgetReached when it would pass the
        budget, PriceUnknown when the model has no known price.
        """
        usd = self.worst_case(route, body, batch)
        if usd <= 0:
            return None
        if self.shared:
            server = limiter_for()
            assert isinstance(server, RemoteLimiter)
            rid, answer = await server.reserve(usd)
            if answer.get("ok"):
                return Held(usd, rid, server)
            if "error" in answer:
                raise BenchError(f"{answer['error']} ({BUDGET_ENV} is set: unset it outside `bench sweep`)")
            raise self.reached(route, usd, float(answer["spent"]), float(answer["limit"]))
        if self.purse is None:
            self.purse = Purse(self.limit, recorded_spend(self.run_dir).usd)
        if await self.purse.reserve(usd):
            return Held(usd)
        raise self.reached(route, usd, self.purse.spent, self.purse.limit)

    def settle(self, held: Held | None, cost_usd: float | None) -> None:
        """End a reservation: ``cost_usd`` is what the reply cost (None: unknown, counted as reserved; 0.0: not paid)."""
        if held is None:
            return
        if held.server is not None and held.rid is not None:
            held.server.settle(held.rid, cost_usd)
        elif self.purse is not None:
            self.purse.settle(held.usd, cost_usd)

    def reached(self, route: Route, usd: float, spent: float, limit: float) -> BudgetReached:
        """Return the BudgetReached of a request refused: what was spent, what it would have cost, what to do."""
        return BudgetReached(f"limits.budget_usd = {dollars(limit)} reached: {self.run_dir} has spent "
                             f"{dollars(spent)}, and the next request to {route.spec.model} may cost up to "
                             f"{dollars(usd)}; no paid call starts any more (calls on the wire finish and are "
                             f"kept; what was not started has no record, never a failed one). Raise "
                             f"limits.budget_usd in {self.params} and run again to continue")
