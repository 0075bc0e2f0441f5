"""The process cap's slots: at most ``n`` requests in flight on one event loop, the rest served first come, first
served.

``asyncio.Semaphore`` (Python 3.11) leaves a waiter it wakes in its queue until the waiter's task runs, and
every release scans the queue from its head for one not yet woken: the releases of one loop turn cost 1 + 2 + … + k
steps. With a queue (a stage asks for twice its cap at once) that came to 150 bytecodes a request at 50 in flight, as
much as the seam's own key and cache lookup together. Here a release takes the first waiter off the queue and hands it
its slot (``free`` stays as it was), so nobody overtakes a waiter and a release is one step; a waiter cancelled
while it waits stays in the queue, done, and is skipped.
"""

from __future__ import annotations

import asyncio
from collections import deque


class ProcessCap:
    """Slots for at most ``n`` holders; ``acquire`` waits for one, ``release`` passes it to the first waiter."""

    __slots__ = ("free", "_waiters")

    def __init__(self, n: int) -> None:
        self.free = n  # slots nobody holds; the queue holds live waiters only while this is 0
        self._waiters: deque[asyncio.Future] = deque()

    async def acquire(self) -> None:
        """Take a slot, waiting for one first come, first served."""
        if self.free > 0:
            self.free -= 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:  # cancelled while it waited, or after its slot was handed over: pass that slot on
            if fut.done() and not fut.cancelled():
                self.release()
            else:
                fut.cancel()  # stays queued, done: ``release`` skips it
            raise

    def release(self) -> None:
        """Give a slot back: to the first live waiter, or to the free ones when none waits."""
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.free += 1

    def waiting(self) -> int:
        """Return how many requests wait for a slot (cancelled ones not yet skipped included)."""
        return len(self._waiters)
