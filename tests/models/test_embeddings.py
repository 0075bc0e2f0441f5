"""Embeddings through the LLM seam against the fake provider: bench's HTTP client and LiteLLM's aembedding alike
get the fake's vectors and usage, priced; a retried failure is retried, a budget too small refuses before
sending, a dry model answers in process; per-token vectors (llama.cpp's) are mean-pooled."""

import asyncio

import pytest

from bench._word_vectors import word_count, word_vector
from bench.core.errors import BudgetReached, ProviderError
from bench.models.budget import Budget
from bench.models.client import LLM, Limits
from bench.models.embeddings import pooled
from bench.models.routing import ModelSpec

FAST = dict(backoff_s=0.01, backoff_max_s=0.05, timeout_s=5, retries=2)
TEXT = "a cat sat on the mat"


def embed(llm, spec, *texts):
    async def go():
        try:
            return await asyncio.gather(*(llm.embed(spec, t) for t in texts), return_exceptions=True)
        finally:
            await llm.aclose()
    return asyncio.run(go())


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_an_embedding_is_the_fakes_vector_priced_from_its_usage(fake, transport):
    spec = ModelSpec("openai/emb", api_base=fake.url, transport=transport, price=(2.0, 0.0))
    [got] = embed(LLM(Limits(**FAST)), spec, TEXT)
    assert got.vector == word_vector(TEXT)
    assert (got.usage.prompt_tokens, got.usage.completion_tokens, got.usage.calls) == (word_count(TEXT), 0, 1)
    assert got.usage.cost_usd == pytest.approx(word_count(TEXT) * 2.0 / 1e6) and not got.usage.estimated
    stats = fake.stats()
    assert stats["embeddings"] == 1 and stats["billed"]["prompt_tokens"] == word_count(TEXT)


def test_a_failed_embedding_is_retried_and_an_unpriced_usage_is_estimated(fake):
    fake.configure(require_key="k1", omit_usage=True)
    spec = ModelSpec("openai/emb", api_base=fake.url, api_key_env="SIM_KEY_UNSET", price=(1.0, 0.0))
    [refused] = embed(LLM(Limits(**FAST)), spec, TEXT)
    assert isinstance(refused, ProviderError) and refused.kind == "auth"  # final: not retried
    fake.configure(require_key=None)
    [got] = embed(LLM(Limits(**FAST)), spec, TEXT)
    assert got.usage.estimated and got.usage.prompt_tokens >= word_count(TEXT)  # no usage: a bound, never zero


def test_a_budget_too_small_refuses_before_sending(fake, tmp_path):
    llm = LLM(Limits(**FAST))
    llm.budget = Budget(1e-9, tmp_path)
    [refused] = embed(llm, ModelSpec("openai/emb", api_base=fake.url, price=(1000.0, 0.0)), TEXT)
    assert isinstance(refused, BudgetReached) and fake.stats()["embeddings"] == 0


def test_a_dry_model_embeds_in_process_for_free(fake):
    [got] = embed(LLM(Limits(**FAST)), ModelSpec("dry/emb"), TEXT)
    assert got.vector == word_vector(TEXT) and got.usage.cost_usd == 0.0 and fake.stats()["requests"] == 0


def test_per_token_vectors_are_mean_pooled():
    assert pooled([[1.0, 2.0], [3.0, 6.0]]) == [2.0, 4.0]
    assert pooled([1, 2]) == [1.0, 2.0]
    with pytest.raises(ValueError):
        pooled([])
