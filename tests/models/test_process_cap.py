"""The process cap's slots: never more holders than slots, waiters served in order, cancellations give slots back."""

from __future__ import annotations

import asyncio

from bench.models._process_cap import ProcessCap


async def _hold(cap: ProcessCap, name: str, order: list[str], held: list[str], peak: list[int],
                release: asyncio.Event) -> None:
    await cap.acquire()
    try:
        order.append(name)
        held.append(name)
        peak[0] = max(peak[0], len(held))
        await release.wait()
    finally:
        held.remove(name)
        cap.release()


def test_waiters_get_slots_first_come_first_served_and_never_more_than_the_cap():
    async def run() -> tuple[list[str], int, int]:
        cap, order, held, peak = ProcessCap(2), [], [], [0]
        release = asyncio.Event()
        tasks = [asyncio.create_task(_hold(cap, f"r{i}", order, held, peak, release)) for i in range(7)]
        for _ in range(100):  # the first two take their slots within a few turns of the loop
            if len(order) == 2:
                break
            await asyncio.sleep(0)
        assert cap.waiting() == 5 and cap.free == 0
        release.set()
        await asyncio.gather(*tasks)
        return order, peak[0], cap.free

    order, peak, free = asyncio.run(run())
    assert order == [f"r{i}" for i in range(7)]  # nobody overtakes a waiter
    assert peak == 2 and free == 2  # every slot came back


async def _held_with_two_waiters() -> tuple[ProcessCap, asyncio.Task, asyncio.Task]:
    """Return a cap of one slot, held, and the two tasks queued for it (in order)."""
    cap = ProcessCap(1)
    await cap.acquire()
    first, second = asyncio.create_task(cap.acquire()), asyncio.create_task(cap.acquire())
    await asyncio.sleep(0)
    return cap, first, second


def test_a_waiter_cancelled_while_it_waits_is_skipped_and_takes_no_slot():
    async def run() -> tuple[int, bool]:
        cap, gone, after = await _held_with_two_waiters()
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        cap.release()  # passes the slot over the cancelled waiter to the next
        await asyncio.wait_for(after, 5)
        cap.release()
        return cap.free, gone.cancelled()

    assert asyncio.run(run()) == (1, True)


def test_a_waiter_cancelled_after_its_slot_was_handed_over_passes_the_slot_on():
    async def run() -> tuple[int, bool]:
        cap, handed, nxt = await _held_with_two_waiters()
        cap.release()  # the slot is handed to ``handed``, whose task has not run yet ...
        handed.cancel()  # ... and is cancelled before it does
        await asyncio.gather(handed, return_exceptions=True)
        await asyncio.wait_for(nxt, 5)  # the slot went on to the next waiter, not lost
        cap.release()
        return cap.free, handed.cancelled()

    assert asyncio.run(run()) == (1, True)


def test_a_slot_handed_to_a_waiter_is_not_taken_by_a_newcomer_before_the_waiter_runs():
    async def run() -> tuple[bool, bool, int]:
        cap = ProcessCap(1)
        await cap.acquire()
        first = asyncio.create_task(cap.acquire())
        await asyncio.sleep(0)
        cap.release()  # handed to ``first``, whose task has not run yet
        newcomer = asyncio.create_task(cap.acquire())
        await asyncio.wait_for(first, 5)
        await asyncio.sleep(0)
        overtaken = newcomer.done()  # it must wait for ``first`` to give the slot back
        cap.release()
        await asyncio.wait_for(newcomer, 5)
        cap.release()
        return overtaken, first.done(), cap.free

    assert asyncio.run(run()) == (False, True, 1)
