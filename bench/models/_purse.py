"""A spend cap's counters on one event loop: USD spent, USD reserved by requests on the wire, and who waits.

``Purse`` is what ``bench.models.budget.Budget`` holds in a process, and what the sweep's lease server
(``bench.models._leases``) holds for every kernel of a sweep. A request reserves its worst-case cost
before it is sent and settles it with its real cost after. A reservation is granted when spent + reserved +
it fits the limit; refused at once when spent + it does not (no settle can make room: a settle only adds to
spent); otherwise it waits, first come first served, until the reservations on the wire settle.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Purse:
    """USD spent and reserved under ``limit``; ``reserve`` grants, waits for room, or refuses."""

    def __init__(self, limit: float, spent: float = 0.0):
        self.limit = float(limit)
        self.spent = float(spent)
        self.reserved = 0.0
        self.held = 0  # reservations granted and not settled (at 0, ``reserved`` is exactly 0: no float residue)
        self.waiters: deque[tuple[asyncio.Future, float]] = deque()

    def never_fits(self, usd: float) -> bool:
        """Return whether ``usd`` more would pass the limit even once every reservation is settled for nothing."""
        return self.spent + usd > self.limit

    async def reserve(self, usd: float) -> bool:
        """Return True once ``usd`` is reserved (waiting while reservations on the wire may make room), False
        when it can never fit. A cancelled wait reserves nothing."""
        if self.never_fits(usd):
            return False
        if not self.waiters and self.spent + self.reserved + usd <= self.limit:
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
        """End a reservation of ``reserved`` USD: ``cost`` is what the reply cost (None: unknown, counted as
        reserved); then grant or refuse whoever waits."""
        self.held -= 1
        self.reserved = self.reserved - reserved if self.held > 0 else 0.0
        self.spent += reserved if cost is None else max(0.0, float(cost))
        self._pump()

    def _take(self, usd: float) -> None:
        self.held += 1
        self.reserved += usd

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
        while alive and self.spent + self.reserved + alive[0][1] <= self.limit:
            fut, usd = alive.popleft()
            self._take(usd)
            fut.set_result(True)
