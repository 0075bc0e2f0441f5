"""One request for identical requests in flight at the same moment. One sweep per run folder (a second refused
naming the holder, ``--wait`` queueing, a killed holder leaving no stuck lock): tests/sweep/test_kill_resume.py."""

from __future__ import annotations

import asyncio

import pytest

from bench.core.errors import ProviderError
from bench.models.client import LLM, Limits
from bench.models.routing import ModelSpec


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
