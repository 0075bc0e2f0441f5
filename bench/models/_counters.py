"""Per-model caps of one event loop: requests in flight, and sliding windows of request starts and tokens
(``LocalLimiter``: a process's default, and what the sweep's lease server holds for all its clients)."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    """What one model entry declares: requests in flight, request starts and tokens per window (None: no cap)."""

    max_concurrency: int | None = None
    rpm: int | None = None
    tpm: int | None = None

    @property
    def windowed(self) -> bool:
        return bool(self.rpm or self.tpm)


class _Lease:
    __slots__ = ("gate", "entry")

    def __init__(self, gate: "_Gate", entry: list | None):
        self.gate, self.entry = gate, entry


class _Gate:
    """The counters of one endpoint, and the requests waiting for them (most urgent first, then first come)."""

    __slots__ = ("window_s", "windowed", "in_flight", "entries", "tokens", "waiters", "timer")

    def __init__(self, window_s: float):
        self.window_s = window_s
        self.windowed = False  # some request declared rpm or tpm: from then on every start is in the window
        self.in_flight = 0
        self.entries: deque[list] = deque()  # [start time, tokens charged, still in the window]
        self.tokens = 0  # tokens charged by the entries still in the window
        self.waiters: deque[tuple[asyncio.Future, Caps, int, float]] = deque()  # by rank, descending
        self.timer: asyncio.TimerHandle | None = None

    def wait_for(self, caps: Caps, estimate: int, now: float) -> float:
        """Return 0 if a request fits now, else the seconds until the window may let it (inf: a release will)."""
        if caps.max_concurrency and self.in_flight >= caps.max_concurrency:
            return math.inf
        if not self.windowed:
            return 0.0
        entries = self.entries
        while entries and now - entries[0][0] >= self.window_s:
            gone = entries.popleft()
            self.tokens -= gone[1]
            gone[2] = False
        wait = 0.0
        if caps.rpm and len(entries) >= caps.rpm:  # the start that must leave the window first
            wait = entries[-caps.rpm][0] + self.window_s - now
        if caps.tpm and self.tokens + estimate > caps.tpm:
            freed, start = 0, now
            for start, tokens, _live in itertools.islice(entries, 64):  # bounded: past 64, wake up and look again
                freed += tokens
                if self.tokens - freed + estimate <= caps.tpm:
                    break
            wait = max(wait, start + self.window_s - now)
        return wait

    def take(self, caps: Caps, estimate: int, now: float) -> _Lease:
        self.in_flight += 1
        entry = None
        if self.windowed:
            entry = [now, estimate, True]
            self.entries.append(entry)
            self.tokens += estimate
        return _Lease(self, entry)

    def pump(self) -> None:
        """Admit the waiting requests that fit, in order; arm a timer when the window must slide first."""
        now = time.monotonic()
        waiters = self.waiters
        while waiters:
            fut, caps, estimate, _rank = waiters[0]
            if fut.done():  # given up (cancelled)
                waiters.popleft()
                continue
            wait = self.wait_for(caps, estimate, now)
            if wait:
                if wait != math.inf:
                    self._arm(wait + 0.001)
                return
            waiters.popleft()
            fut.set_result(self.take(caps, estimate, now))

    def wait_in_line(self, fut: asyncio.Future, caps: Caps, estimate: int, rank: float) -> None:
        """Queue a request behind every waiter at least as urgent (a request that claims no urgency: at the end)."""
        waiters = self.waiters
        i = len(waiters)
        while i and rank > waiters[i - 1][3]:  # from the end: most requests join behind the last one
            i -= 1
        waiters.insert(i, (fut, caps, estimate, rank))

    def _arm(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        if self.timer is not None:
            if self.timer.when() <= when:
                return
            self.timer.cancel()
        self.timer = loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self.timer = None
        self.pump()


class LocalLimiter:
    """Per-model caps of one event loop: in-flight counts and sliding windows of starts and tokens."""

    def __init__(self, window_s: float = 60.0):
        self.window_s = window_s
        self.gates: dict[str, _Gate] = {}

    async def acquire(self, key: str, caps: Caps, estimate: int = 0, rank: float = 0.0) -> _Lease:
        gate = self.gates.get(key)
        if gate is None:
            gate = self.gates[key] = _Gate(self.window_s)
        if caps.windowed:
            gate.windowed = True
            if caps.tpm:
                estimate = min(estimate, caps.tpm)  # a request bigger than the budget goes alone in an empty window
        if not gate.waiters:
            now = time.monotonic() if gate.windowed else 0.0
            if not gate.wait_for(caps, estimate, now):
                return gate.take(caps, estimate, now)
        fut = asyncio.get_running_loop().create_future()
        gate.wait_in_line(fut, caps, estimate, rank)
        gate.pump()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted just as it was cancelled
                self.release(fut.result())
            elif gate.waiters:
                gate.pump()  # the next in line may fit now
            raise

    async def acquire_pair(self, key: str, caps: Caps, estimate: int, shared_key: str, shared_caps: Caps,
                           rank: float = 0.0) -> tuple[_Lease, _Lease]:
        """Take a lease on endpoint ``key``, then one on a shared cap (most ``rank`` first); return both."""
        first = await self.acquire(key, caps, estimate)
        try:
            return first, await self.acquire(shared_key, shared_caps, rank=rank)
        except BaseException:
            self.release(first)
            raise

    def release_pair(self, pair: tuple[_Lease, _Lease], tokens: int | None = None) -> None:
        """End both leases of ``acquire_pair``; the shared slot one loop turn after the endpoint's, so it goes to the
        most urgent waiter (the endpoint's next request already waits for it), not the first come."""
        first, second = pair
        self.release(first, tokens)
        asyncio.get_running_loop().call_soon(self.release, second)

    def release(self, lease: _Lease, tokens: int | None = None) -> None:
        gate, entry = lease.gate, lease.entry
        gate.in_flight -= 1
        if tokens is not None and entry is not None and entry[2]:
            gate.tokens += tokens - entry[1]
            entry[1] = tokens
        if gate.waiters:
            gate.pump()
