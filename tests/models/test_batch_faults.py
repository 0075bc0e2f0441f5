"""Batch mode under faults a researcher cannot arrange by hand: a caller that gives up, a lost reply to
"create batch", a status poll that fails on a resume, a batch task that dies.

Each test drives the real client (``LLM.complete`` on a batched model) against the session's fake
provider; faults come from the fake's ``batch_route_fail`` knob or from the file system, never from
patching bench or LiteLLM. What is counted is what the provider saw: batches created, lines answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.core.errors import ProviderError
from bench.models.batches import BatchPolicy, batches_of
from bench.models.client import LLM
from bench.models.limits import Limits
from bench.models.routing import ModelSpec

FAST = BatchPolicy(poll_s=0.05, poll_max_s=0.2, gather_s=0.1)
ASK = [{"role": "user", "content": "Name one prime number."}]
BUDGET_S = 120  # a hang shows as this budget running out; every passing run ends long before


def _llm(batch_dir: Path, retries: int = 2) -> LLM:
    llm = LLM(Limits(retries=retries, backoff_s=0.01, timeout_s=10, max_concurrency=4))
    llm.batch_dir = batch_dir
    return llm


def _spec(url: str, policy: BatchPolicy = FAST) -> ModelSpec:
    return ModelSpec(model="openai/m1", api_base=url, batch=policy, price=(1.0, 2.0))


async def _ask(llm: LLM, spec: ModelSpec, messages=ASK):
    try:
        return await asyncio.wait_for(llm.complete(spec, messages, label="item-1"), BUDGET_S)
    finally:
        await llm.aclose()


def test_a_caller_that_gives_up_before_its_batch_is_sent_is_not_submitted(fake, tmp_path):
    spec = _spec(fake.url, BatchPolicy(poll_s=0.05, poll_max_s=0.2, gather_s=2.0))

    async def main():
        llm = _llm(tmp_path / "batches")
        first = asyncio.create_task(llm.complete(spec, ASK, label="item-1"))
        for _ in range(2000):  # until the request has joined its endpoint's queue (the batch is sent gather_s later)
            if llm.calls:
                break
            await asyncio.sleep(0.005)
        assert llm.calls == 1
        first.cancel()  # e.g. a notebook cell interrupted
        with pytest.raises(asyncio.CancelledError):
            await first
        return await _ask(llm, spec)  # asked again before the queue is sent

    comp = asyncio.run(main())
    assert comp.text and comp.usage.batch_id
    stats = fake.stats()["batches"]
    assert stats["created"] == 1 and stats["lines_answered"] == 1, "the abandoned request is never sent"


def test_a_create_whose_reply_was_lost_is_found_by_its_metadata_not_created_again(fake, tmp_path):
    fake.configure(batch_route_fail={"create_lost": 1})  # the batch exists; its creator hears a 503
    comp = asyncio.run(_ask(_llm(tmp_path / "batches"), _spec(fake.url)))
    assert comp.text
    assert fake.stats()["batches"]["created"] == 1, "a lost reply is looked up before creating again"
    [info] = batches_of(tmp_path)
    assert info.batch_id == comp.usage.batch_id and info.finished


def test_a_resume_keeps_polling_when_the_ledgers_status_is_stale(fake, tmp_path):
    # A first process saw its batch "completed" but could not read the output file: its ledger says
    # "completed" with no "finished" (like a process killed between the two).
    fake.configure(batch_route_fail={"content": 1000})  # every read of an output file fails
    with pytest.raises(ProviderError):
        asyncio.run(_ask(_llm(tmp_path / "batches"), _spec(fake.url)))
    [info] = batches_of(tmp_path)
    assert info.status == "completed" and not info.finished
    # The resume adopts it, and its first poll fails (1 + 2 retries): the ledger's "completed" is stale
    # (it has no output file), so it must poll again rather than give the request up and submit it anew.
    polled = fake.stats()["batches"]["route_calls"]["get_batch"]
    fake.configure(batch_route_fail={"get_batch": polled + 3})
    comp = asyncio.run(_ask(_llm(tmp_path / "batches"), _spec(fake.url)))
    assert comp.text and comp.usage.batch_id == info.batch_id
    assert fake.stats()["batches"]["created"] == 1, "an adopted batch is never submitted twice"


def test_a_batch_task_that_dies_fails_its_waiting_calls_instead_of_hanging_them(fake, tmp_path):
    blocked = tmp_path / "batches"
    blocked.write_text("a file where the ledger's folder should be\n")  # the ledger cannot be written (a full disk)

    with pytest.raises(FileExistsError):  # the ledger's own error, not the hang budget's TimeoutError
        asyncio.run(_ask(_llm(blocked), _spec(fake.url)))
    assert fake.stats()["batches"]["created"] == 0, "nothing is sent that the ledger could not record first"
