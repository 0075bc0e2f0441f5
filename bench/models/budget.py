"""``limits.budget_usd``: a hard cap on what a run folder spends, held before every paid request (docs/budget.md).

A request reserves its worst case, is refused with ``BudgetReached`` (or ``PriceUnknown``), and is settled with
what it was billed; a sweep's executions share one cap in its lease server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError, BudgetReached, Halted
from bench.core.journal import settle
from bench.core.paths import cache_path
from bench.core.spend import dollars, recorded_spend
from bench.models._leases import RemoteLimiter
from bench.models._messages import prompt_messages
from bench.models._purse import Purse
from bench.models.cache import open_cache
from bench.models.ratelimit import limiter_for
from bench.models.routing import Route, cache_prices, price_per_token
from bench.models.tokens import bound_counter, output_ceiling


class PriceUnknown(Halted):
    """A budget is set but a model's price is unknown: its spend cannot be capped, so nothing is sent to it."""

    exit_code = 2  # bench.core.outcome.EXIT_BAD_INPUT: declare the price (or drop the budget) and re-run


@dataclass(frozen=True)
class Held:
    """One granted reservation: its worst-case USD, and where it is held (the lease server's id, or None)."""

    usd: float
    rid: int | None = None
    server: RemoteLimiter | None = None


_PRICER: Budget | None = None  # prices reservations outside any budget (``reservation``)


def reservation(route: Route, body: dict[str, Any]) -> float | None:
    """Return the most ``body`` can cost on ``route`` (what a budget reserves), None when its price is unknown."""
    global _PRICER
    if _PRICER is None:
        _PRICER = Budget(float("inf"), ".")
    try:
        return _PRICER.worst_case(route, body)
    except PriceUnknown:
        return None


def sweep_budget(limit: float | None, run_dir: str | Path, root: Path | None = None) -> tuple[float, float] | None:
    """Return (``limits.budget_usd``, the run folder's spend now) after settling what a kill left in flight."""
    if limit is None:
        return None
    settle(run_dir, open_cache(root=root))
    return float(limit), recorded_spend(run_dir).usd


def cache_holding(run_dir: str | Path) -> Callable[[list[str]], set[str]]:
    """Return a function telling which request keys the response cache of ``run_dir`` holds."""
    path = cache_path(runs=Path(run_dir).parent)  # runs/<sweep>: its runs folder's cache, or $BENCH_CACHE
    cache = open_cache(path) if path.is_dir() else None
    return (lambda keys: cache.held(keys)) if cache is not None else (lambda keys: set())


class Budget:
    """The spend cap of one client (``LLM.budget``): reserve a paid request's worst case, settle its real cost."""

    def __init__(self, limit_usd: float, run_dir: str | Path, params: str = "the params file",
                 lease_server: str | None = None):
        self.limit = float(limit_usd)
        self.run_dir = Path(run_dir)
        self.params = params
        self.lease_server = lease_server  # the sweep's server that holds the budget (None: this process holds it)
        self.purse: Purse | None = None  # this process's cap, made on the first paid request (not shared)
        self._prices: dict[tuple[Any, bool], tuple[float, float] | None] = {}
        self.counting: dict[str, str] = {}  # model -> what counted its prompts (a tokenizer, or "UTF-8 bytes")
        self.claimed = 0.0  # cached replies a killed process paid, counted by this process's records (``count``)
        self._telling: set[asyncio.Task] = set()  # ``count``s on their way to the sweep's lease server

    def worst_case(self, route: Route, body: dict[str, Any], batch: bool = False) -> float:
        """Return the most ``body`` can cost on ``route``: its prompt (counted never short) and whole output limit."""
        key = (route.spec, batch)
        if key not in self._prices:
            self._prices[key] = price_per_token(route, batch)
        price = self._prices[key]
        if price is None:
            raise PriceUnknown(f"limits.budget_usd is set, but the price of {route.spec.model} is unknown, so its "
                               f"spend cannot be capped; nothing was sent to it. Declare it on that entry in "
                               f"{self.params} (price: {{input_per_mtok: …, output_per_mtok: …}}), or remove "
                               f"limits.budget_usd")
        if price == (0.0, 0.0):
            return 0.0
        counter = bound_counter(route)  # each image part at its bound (tokens.IMAGE_TOKENS)
        self.counting[route.spec.model] = counter.tokenizer
        if "input" in body:  # an embeddings request: its texts, no output
            return price[0] * counter.messages(prompt_messages(body))
        messages = body.get("messages") or []
        prompt = price[0]  # never a cache hit; a cache write (a cache_control mark) at its price when higher
        if breakpoints(messages):
            prompt = max(prompt, cache_prices(route, batch)[1])  # type: ignore[index]
        return prompt * counter.messages(messages) + price[1] * output_ceiling(route, body)

    async def reserve(self, route: Route, body: dict[str, Any], *, batch: bool = False) -> Held | None:
        """Reserve one request's worst case before it is sent (None when free); BudgetReached or PriceUnknown."""
        usd = self.worst_case(route, body, batch)
        if usd <= 0:
            return None
        if self.lease_server:
            server = limiter_for(address=self.lease_server)
            assert isinstance(server, RemoteLimiter)
            rid, answer = await server.reserve(usd)
            if answer.get("ok"):
                return Held(usd, rid, server)
            if "error" in answer:
                raise BenchError(f"{answer['error']} (the notebook's shared_budget parameter is set: leave it False "
                                 f"outside `bench sweep`)")
            raise self.reached(route, usd, answer)
        if self.purse is None:
            self.purse = Purse(self.limit, recorded_spend(self.run_dir).usd + self.claimed)
        if await self.purse.reserve(usd):
            return Held(usd)
        raise self.reached(route, usd, self.purse.report())

    def settle(self, held: Held | None, paid: dict[str, Any] | float | None) -> None:
        """End a reservation with the reply's usage (its ``cost_usd``) or a cost (None: unknown; 0.0: not paid)."""
        if held is None:
            return
        cost = paid.get("cost_usd") if isinstance(paid, dict) else paid
        if held.server is not None and held.rid is not None:
            held.server.settle(held.rid, cost)
        elif self.purse is not None:
            self.purse.settle(held.usd, cost)

    def count(self, usd: float | None) -> None:
        """Count as spent now a cached reply a killed process paid and no record counted (the sweep's purse too)."""
        if not usd:
            return
        self.claimed += float(usd)
        if self.purse is not None:
            self.purse.spent += float(usd)
        if self.lease_server:
            server = limiter_for(address=self.lease_server)
            assert isinstance(server, RemoteLimiter)
            server.spent(float(usd))
            if server.transport is None:  # connect now: the other kernels' reservations must see it too
                task = asyncio.get_running_loop().create_task(server.connect())
                self._telling.add(task)  # kept until done (a task only the loop holds may be collected)
                task.add_done_callback(self._telling.discard)

    def reached(self, route: Route, usd: float, state: dict[str, Any]) -> BudgetReached:
        """Return the BudgetReached of a refused request (``state``: ``Purse.report``): spent, cost, what to do."""
        counted, estimated = self.counting.get(route.spec.model), recorded_spend(self.run_dir).estimated_note()
        return BudgetReached(f"limits.budget_usd = {dollars(float(state['limit']))} reached: {self.run_dir} has "
                             f"spent {dollars(float(state['spent']))}{estimated}, and the next "
                             f"request to {route.spec.model} "
                             f"may cost up to {dollars(usd)}{f' (prompt counted with {counted})' if counted else ''}; "
                             f"no paid call starts any more ({in_flight(state)}; what was not started has no "
                             f"record, never a failed one). Raise limits.budget_usd in {self.params} and run again "
                             f"to continue")


def in_flight(state: dict[str, Any]) -> str:
    """Return what the calls in flight may still add to the spend, from a purse's ``report``."""
    n, overruns = int(state.get("in_flight", 0)), int(state.get("overruns", 0))
    seen = (f"{overruns} repl(ies) so far cost more than reserved, by up to {dollars(float(state['margin']))} each"
            if overruns else "")
    if not n:
        return "no call is in flight" + (f"; {seen}" if seen else "")
    said = f"{n} call(s) in flight finish and are kept: they reserved {dollars(float(state.get('reserved', 0)))}"
    if not overruns:
        return said + ", and add more only if a reply costs more than its reservation"
    return (f"{said} and {dollars(float(state['margin_usd']))} more is set aside ({seen}); they pass the budget only "
            f"if a reply overruns by more than that")


def budget_line(state: dict[str, Any]) -> str:
    """Return the closing budget line of a sweep from its purse's ``report`` (spent, overruns, ``surprise``)."""
    line = f"budget: spent {dollars(float(state['spent']))} of {dollars(float(state['limit']))}"
    if not state.get("overruns"):
        return line + "; every reply cost at most what it reserved"
    return (f"{line}; {state['overruns']} repl(ies) cost more than reserved (+{dollars(float(state['overrun_usd']))} "
            f"in all, up to {dollars(float(state['margin']))} each, set aside from then on for every call in "
            f"flight); the budget can be passed by at most {dollars(float(state['surprise']))}: what replies overran "
            f"past the margin set aside when they were sent")


def breakpoints(messages: list[dict[str, Any]]) -> bool:
    """Return whether a request asks to write its prompt cache (a ``cache_control`` part, billed above input)."""
    return any(isinstance(m.get("content"), list) and any(isinstance(p, dict) and "cache_control" in p
                                                            for p in m["content"]) for m in messages)
