"""One sweep per run folder, and one request for identical requests in flight at the same moment."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import socket
import time

import pytest

from bench.core.errors import ProviderError
from bench.models.client import LLM, Limits
from bench.core.records import Candidate
from bench.models.routing import ModelSpec
from bench.core.store import RunStore
from bench.testing.grids import grid, started, sweep, sweep_args

BUDGET_S = 120  # generous: a loaded 2-core machine


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + BUDGET_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_second_sweep_of_the_same_run_folder_refuses_naming_the_holder(tmp_path, fake):
    fake.configure(latency_ms=300)
    params = grid(tmp_path / "g.yaml", fake.url, topics=12,
                  limits={"max_concurrency": 2, "timeout_s": 10, "retries": 0})
    with started(tmp_path, *sweep_args(params)) as first:
        wait_until(lambda: fake.stats()["in_flight"] > 0, "the first sweep's requests")
        second = sweep(tmp_path, params)
        assert second.returncode == 2, second.stdout + second.stderr
        lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "is being written by another sweep" in lines[0]
        assert f"host {socket.gethostname()}, PID {first.pid}, since 20" in lines[0] and "--wait" in lines[0]
        out, err = first.communicate(timeout=BUDGET_S)
        assert first.returncode == 0, out[-2000:] + err[-2000:]
    ids = collections.Counter(c.id for c in RunStore(tmp_path / "runs/g").read(Candidate))
    assert len(ids) == 12 and set(ids.values()) == {1} and fake.stats()["requests"] == 12  # paid once each


def test_wait_queues_behind_the_holder_and_a_killed_holder_leaves_no_stuck_lock(tmp_path, fake):
    fake.configure(latency_ms=300)
    params = grid(tmp_path / "g.yaml", fake.url, topics=12,
                  limits={"max_concurrency": 2, "timeout_s": 10, "retries": 0})
    with started(tmp_path, *sweep_args(params)) as first:
        wait_until(lambda: fake.stats()["in_flight"] > 0, "the first sweep's requests")
        os.killpg(first.pid, signal.SIGKILL)  # a crashed holder: the kernel releases its flock
        first.wait()
    fake.configure(latency_ms=0)
    resumed = sweep(tmp_path, params)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    fake.configure(latency_ms=1500)  # the holder keeps the lock ~6 s: longer than the waiter takes to ask for it
    params = grid(tmp_path / "g.yaml", fake.url, topics=16,  # a grown grid: 4 new items, one at a time
                  limits={"max_concurrency": 1, "timeout_s": 10, "retries": 0})
    with started(tmp_path, *sweep_args(params)) as third:
        wait_until(lambda: fake.stats()["in_flight"] > 0, "the third sweep's requests")
        waiter = sweep(tmp_path, params, "--wait")
        assert waiter.returncode == 0 and "waiting for run folder" in waiter.stderr
        assert third.wait(timeout=BUDGET_S) == 0  # the waiter started after the holder was done
    assert len(RunStore(tmp_path / "runs/g").done_ids(Candidate)) == 16


@pytest.mark.parametrize("fails", [False, True])
def test_identical_requests_in_flight_are_sent_once(fake, fails):
    fake.configure(latency_ms=200, **({"replies": [{"match": "same", "status": 500}]} if fails else {}))
    llm = LLM(Limits(max_concurrency=16, retries=0, timeout_s=10))
    spec = ModelSpec("openai/fake-a", api_base=fake.url)
    messages = [{"role": "user", "content": "the same question"}]

    async def ask():
        try:
            return await llm.complete(spec, messages)
        except ProviderError as err:
            return err

    async def main():
        try:
            return await asyncio.gather(*(ask() for _ in range(9)))
        finally:
            await llm.aclose()

    results = asyncio.run(main())
    assert fake.stats()["requests"] == 1
    if fails:
        assert all(isinstance(r, ProviderError) and r.kind == "server" for r in results)
        assert sorted(r.attempts for r in results) == [0] * 8 + [1]  # one request, eight shared its failure
    else:
        assert len({r.text for r in results}) == 1
        assert sorted((r.usage.calls, r.usage.cache_hits) for r in results) == [(0, 1)] * 8 + [(1, 0)]
