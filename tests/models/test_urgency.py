"""A full shared cap serves the most urgent waiting request first (bench.models.ratelimit.URGENCY).

A sweep whose models' caps add up to more than its own cap must choose who gets a freed slot. First come, first
served let the model that bounds the sweep (the one with the most rounds left) wait behind models that finish early
anyway: on the benchmark's grid (caps 2, 3, 4, 6 under 12) the cap-2 model spent a fifth of the sweep below its cap.
The order holds in a process (LocalLimiter) and through the sweep's lease server, for every kernel at once.
"""

from __future__ import annotations

import asyncio
import time

from bench.models.ratelimit import SWEEP_KEY, TOKEN_ENV, Caps, LeaseServer, LocalLimiter, RemoteLimiter

ONE = Caps(max_concurrency=1)
RANKS = [("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 0.0), ("e", 5.0), ("f", 3.0)]
SERVED = ["b", "e", "c", "f", "a", "d"]  # most urgent first; arrival order among equals; no urgency last


async def _order(limiters: list, gates: LocalLimiter) -> list[str]:
    """Hold the one slot, queue a request per RANKS entry (each from the next limiter in turn), then let them through
    one at a time; return the names in the order they got the slot. ``gates``: where the queue is (the process's
    limiter, or the lease server's)."""
    first = limiters[0]
    held = await first.acquire(SWEEP_KEY, ONE)
    served: list[str] = []

    async def ask(i: int, name: str, rank: float) -> None:
        limiter = limiters[i % len(limiters)]
        lease = await limiter.acquire(SWEEP_KEY, ONE, rank=rank)
        served.append(name)
        await asyncio.sleep(0)
        limiter.release(lease)

    tasks = []
    for i, (name, rank) in enumerate(RANKS):
        tasks.append(asyncio.ensure_future(ask(i, name, rank)))
        deadline = time.monotonic() + 30
        while len(gates.gates[SWEEP_KEY].waiters) < i + 1:  # it waits at the gate before the next one arrives
            assert time.monotonic() < deadline, "a request never reached the gate"
            await asyncio.sleep(0.001)  # polling the gate's queue (readiness), not a fixed wait
    first.release(held)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
    return served


def test_a_process_serves_the_most_urgent_waiting_request_first():
    limiter = LocalLimiter()
    assert asyncio.run(_order([limiter], limiter)) == SERVED


def test_the_lease_server_serves_the_most_urgent_request_of_any_kernel_first(monkeypatch):
    with LeaseServer(window_s=60, host="127.0.0.1") as server:
        monkeypatch.setenv(TOKEN_ENV, server.token)

        async def main() -> list[str]:
            clients = [RemoteLimiter(server.address), RemoteLimiter(server.address)]  # two kernels
            for c in clients:  # connected and greeted before the clock of arrivals runs
                c.release(await c.acquire("warm @ x", ONE))
            return await _order(clients, server.limiter)

        assert asyncio.run(main()) == SERVED
