"""A reasoning model that spends its whole output limit thinking returns no answer: asking again would spend the
same again, so the call fails for good at once (``reasoning_cut``), says to raise the output limit, counts the one
paid reply with its reasoning tokens, and its failed record keeps the thinking. Replies come from the loopback
fake provider through the real seam and the real collect stage."""

from __future__ import annotations

import asyncio

import pytest

from bench.core.errors import ProviderError
from bench.core.records import Candidate, failed_usage
from bench.core.store import RunStore
from bench.models._paid import itemized, with_paid
from bench.models.client import LLM, Limits
from bench.models.routing import ModelSpec
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import grid, model

ASK = [{"role": "user", "content": "What is two plus two?"}]
PRICE = (1.0, 10.0)


def fail(spec: ModelSpec) -> ProviderError:
    async def go():
        llm = LLM(Limits(max_concurrency=2, timeout_s=20, retries=4, backoff_s=0.01), cache=None)
        try:
            await llm.complete(spec, ASK)
        finally:
            await llm.aclose()
    with pytest.raises(ProviderError) as err:
        asyncio.run(go())
    return err.value


def test_a_think_block_never_closed_fails_at_once_and_counts_its_one_paid_reply(fake):
    fake.configure(replies=[{"match": "two plus", "content": "<think>" + "long thought " * 50}])
    err = fail(ModelSpec("openai/r1", api_base=fake.url, price=PRICE, params={"max_tokens": 80}))
    assert fake.stats()["requests"] == 1, "a reply cut off while thinking is not asked again"
    assert err.kind == "reasoning_cut" and not err.retryable and err.attempts == 1
    assert "max_tokens" in str(err) and "thinking" in str(err)
    assert err.reasoning.startswith("long thought")  # the thinking it paid for, kept for the failed record
    usage = failed_usage(err)
    assert usage.calls == 1 and usage.completion_tokens == fake.stats()["billed"]["completion_tokens"]
    assert usage.cost_usd and usage.cost_usd > 0, "the reply was billed"


def test_reasoning_apart_with_an_empty_answer_is_final_and_its_reasoning_tokens_are_counted(fake):
    fake.configure(replies=[{"match": "two plus", "content": ""}], reasoning_content=True)
    err = fail(ModelSpec("openai/thinker", api_base=fake.url, price=PRICE, params={"reasoning_effort": "high"}))
    assert fake.stats()["requests"] == 1 and err.kind == "reasoning_cut" and not err.retryable
    usage = failed_usage(err)
    assert usage.reasoning_tokens == 48  # 24 words × high: the fake counts a word a token
    assert usage.completion_tokens == fake.stats()["billed"]["completion_tokens"]
    assert err.paid[0]["reasoning_tokens"] == 48


def test_an_empty_reply_without_thinking_is_still_retried(fake):
    fake.configure(replies=[{"match": "two plus", "content": ""}])
    err = fail(ModelSpec("openai/plain", api_base=fake.url))
    assert err.kind == "empty" and fake.stats()["requests"] == 5  # retries: 4


def test_the_failed_candidate_keeps_the_thinking_and_counts_one_call(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    fake.configure(replies=[{"match": "", "content": "<think>weighing it up " * 20}])
    path = grid(tmp_path / "g.yaml", fake.url, topics=2,
                models=[model("m1", fake.url, price={"input_per_mtok": 1.0, "output_per_mtok": 10.0})],
                limits={"max_concurrency": 2, "timeout_s": 10, "retries": 3, "backoff_s": 0.01})
    run = open_run(path)
    result = asyncio.run(run_collect(run, progress="none"))
    assert result.failed == 2 and fake.stats()["requests"] == 2
    for cand in RunStore(run.dir).latest(Candidate).values():
        assert cand.error_kind == "reasoning_cut" and cand.output is None
        assert cand.reasoning and cand.reasoning.startswith("weighing it up")
        assert cand.usage.calls == 1 and cand.usage.cost_usd > 0


def test_paid_attempts_sum_their_reasoning_tokens():
    first = itemized({"prompt_tokens": 10, "completion_tokens": 300, "reasoning_tokens": 290, "cost_usd": 0.003,
                      "finish_reason": "length"}, 1)
    usage = with_paid({"prompt_tokens": 10, "completion_tokens": 120, "reasoning_tokens": 100, "cost_usd": 0.0012,
                       "finish_reason": "stop"}, [first], 2)
    assert usage["reasoning_tokens"] == 390 and usage["completion_tokens"] == 420
    plain = with_paid({"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.0}, [itemized(
        {"prompt_tokens": 10, "completion_tokens": 0, "cost_usd": 0.0}, 1)], 2)
    assert plain.get("reasoning_tokens") is None, "no reply said it thought: not counted as zero"
