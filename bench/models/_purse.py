"""A spend cap's counters on one event loop: USD spent, USD reserved by requests in flight, and who waits.

A reservation is granted when spent + reserved + it fits, refused when spent + it does not, else waits in order
(docs/budget.md).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import deque
from typing import Any


class Purse:
    """USD spent and reserved under ``limit``; ``reserve`` grants, waits for room, or refuses."""

    def __init__(self, limit: float, spent: float = 0.0):
        self.limit = float(limit)
        self.spent = float(spent)
        self.reserved = 0.0
        self.held = 0  # reservations granted and not settled (at 0, ``reserved`` is exactly 0: no float residue)
        self.waiters: deque[tuple[asyncio.Future, float]] = deque()
        self.margin = 0.0  # the largest overrun of one reply so far: set aside for each reservation in flight
        self.overruns = 0  # replies that cost more than their reservation
        self.overrun_usd = 0.0  # what they cost past their reservations, in all
        self.surprise = 0.0  # overruns past the margin set aside when granted: the most the limit is passed by
        self._granted: dict[float, list[float]] = {}  # reservation USD -> the margins set aside when granted

    def committed(self) -> float:
        """Return what the limit must hold now: spent, reserved, and the margin for each reservation in flight."""
        return self.spent + self.reserved + self.held * self.margin

    def never_fits(self, usd: float) -> bool:
        """Return whether ``usd`` more would pass the limit even once every reservation is settled for nothing."""
        return self.spent + usd + self.margin > self.limit

    def fits(self, usd: float) -> bool:
        """Return whether a reservation of ``usd`` (and its margin) fits beside everything committed now."""
        return self.committed() + usd + self.margin <= self.limit

    def report(self) -> dict[str, float | int]:
        """Return the counters a refusal and the budget line name (JSON-ready): spent, limit, in flight, overruns."""
        return {"spent": self.spent, "limit": self.limit, "in_flight": self.held, "reserved": self.reserved,
                "margin_usd": self.held * self.margin, "margin": self.margin, "overruns": self.overruns,
                "overrun_usd": self.overrun_usd, "surprise": self.surprise}

    async def reserve(self, usd: float) -> bool:
        """Return True once ``usd`` is reserved (waiting for room), False when it can never fit."""
        if self.never_fits(usd):
            return False
        if not self.waiters and self.fits(usd):
            self._take(usd)
            return True
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append((fut, usd))
        self._pump()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.result():  # granted just as it was given up
                self.settle(usd, 0.0)
            else:
                self._pump()  # the next in line may fit now
            raise

    def settle(self, reserved: float, cost: float | None) -> None:
        """End a reservation of ``reserved`` USD at ``cost`` (None: unknown, counted as reserved); serve the waiters."""
        self.held -= 1
        self.reserved = self.reserved - reserved if self.held > 0 else 0.0
        paid = reserved if cost is None else max(0.0, float(cost))
        self.spent += paid
        margins = self._granted.get(reserved)
        covered = margins.pop(margins.index(min(margins))) if margins else 0.0
        if margins == []:
            del self._granted[reserved]
        if paid > reserved:  # reconciled: it cost more than it reserved
            over = paid - reserved
            self.overruns += 1
            self.overrun_usd += over
            self.surprise += max(0.0, over - covered)
            self.margin = max(self.margin, over)
        self._pump()

    def _take(self, usd: float) -> None:
        self.held += 1
        self.reserved += usd
        self._granted.setdefault(usd, []).append(self.margin)

    def _pump(self) -> None:
        """Refuse every waiter that can never fit, then grant from the head of the line while it fits."""
        alive: deque[tuple[asyncio.Future, float]] = deque()
        for fut, usd in self.waiters:
            if fut.done():
                continue
            if self.never_fits(usd):
                fut.set_result(False)
            else:
                alive.append((fut, usd))
        self.waiters = alive
        while alive and self.fits(alive[0][1]):
            fut, usd = alive.popleft()
            self._take(usd)
            fut.set_result(True)


class Spending:
    """One lease-server connection's reservations of the sweep's budget: granted, or waiting for room."""

    def __init__(self, purse: Purse | None, writer: asyncio.StreamWriter):
        self.purse, self.writer = purse, writer
        self.held: dict[int, float] = {}  # reservation id -> USD reserved
        self.waiting: dict[int, tuple[asyncio.Task, float]] = {}

    def handle(self, op: str, rid: int, usd: Any) -> None:
        purse = self.purse
        if op == "reserve" and purse is None:
            self._answer({"id": rid, "ok": False, "error": "the sweep's limit server holds no budget"})
        elif op == "reserve":
            amount = max(0.0, float(usd))
            task = asyncio.ensure_future(purse.reserve(amount))
            self.waiting[rid] = (task, amount)
            task.add_done_callback(functools.partial(self._decided, rid))
        elif op == "spent" and purse is not None:  # no reservation: a reply a killed process paid
            purse.spent += max(0.0, float(usd))
        elif purse is not None and rid in self.held:  # settle
            purse.settle(self.held.pop(rid), None if usd is None else float(usd))
        elif purse is not None and (entry := self.waiting.pop(rid, None)) is not None:  # given up while waiting
            task, amount = entry
            if task.done() and not task.cancelled() and task.result():
                purse.settle(amount, 0.0)
            else:
                task.cancel()

    def _decided(self, rid: int, task: asyncio.Task) -> None:
        entry = self.waiting.pop(rid, None)
        if entry is None or task.cancelled():
            return  # given up meanwhile (the settle ended what was granted)
        purse = self.purse
        assert purse is not None
        if task.result():
            self.held[rid] = entry[1]
            self._answer({"id": rid, "ok": True})
        else:
            self._answer({"id": rid, "ok": False, **purse.report()})  # spent, limit, what is in flight

    def _answer(self, message: dict[str, Any]) -> None:
        self.writer.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def close(self) -> None:
        """The connection ended: waits are dropped, and what was in flight counts as spent (it may have been paid)."""
        for task, amount in self.waiting.values():
            if task.done() and not task.cancelled() and task.result():
                self.purse.settle(amount, None)  # type: ignore[union-attr]
            else:
                task.cancel()
        self.waiting.clear()
        for amount in self.held.values():
            self.purse.settle(amount, None)  # type: ignore[union-attr]
        self.held.clear()
