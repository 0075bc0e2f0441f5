"""A model that thinks is billed for thinking it may never show, so neither the budget nor a reply without usage
may take its output to be short: with no output limit set, the budget reserves the model's own maximum output
(LiteLLM's map) for it, and a reply that carries no usage is counted at the request's output limit. A model that
does not think keeps the bounds it had."""

from __future__ import annotations

import asyncio

import pytest

from bench.models.budget import Budget
from bench.models.client import LLM, Limits
from bench.models.ratelimit import DEFAULT_COMPLETION_TOKENS
from bench.models.routing import ModelSpec, resolve
from bench.models.tokens import max_output_tokens

ASK = [{"role": "user", "content": "What is two plus two?"}]


def worst_output(budget: Budget, spec: ModelSpec, **body) -> float:
    """Return the output tokens ``spec``'s worst case holds for a request (its cost less the prompt's, per token)."""
    route = resolve(spec)
    empty = {"model": "m", "messages": ASK, "max_tokens": 0}
    price_out = spec.price[1] / 1e6
    return round((budget.worst_case(route, {"model": "m", "messages": ASK, **body})
                  - budget.worst_case(route, empty)) / price_out)


@pytest.mark.parametrize("spec", [ModelSpec("openai/o3-mini", price=(1.1, 4.4)),  # a reasoning model by the map
                                  ModelSpec("openai/gpt-4o", price=(2.5, 10.0), params={"reasoning_effort": "low"}),
                                  ModelSpec("anthropic/claude-haiku-4-5", price=(1.0, 5.0),
                                            params={"thinking": {"type": "enabled", "budget_tokens": 4000}})])
def test_a_thinking_model_without_an_output_limit_reserves_its_maximum_output(tmp_path, spec):
    most = max_output_tokens(resolve(spec))
    assert most and most > DEFAULT_COMPLETION_TOKENS
    body = {"reasoning_effort": "low"} if "reasoning_effort" in spec.params else {}
    assert worst_output(Budget(100.0, tmp_path), spec, **body) == most
    assert worst_output(Budget(100.0, tmp_path), spec, max_tokens=700, **body) == 700  # a limit set still holds


def test_a_model_that_does_not_think_keeps_the_default_output_reservation(tmp_path):
    spec = ModelSpec("openai/gpt-4o", price=(2.5, 10.0))
    assert worst_output(Budget(100.0, tmp_path), spec) == DEFAULT_COMPLETION_TOKENS


def ask(spec: ModelSpec):
    async def go():
        llm = LLM(Limits(retries=0, timeout_s=10), cache=None)
        try:
            return await llm.complete(spec, ASK)
        finally:
            await llm.aclose()
    return asyncio.run(go())


def test_a_thinking_reply_without_usage_is_counted_at_its_output_limit(fake):
    fake.configure(omit_usage=True)
    spec = ModelSpec("openai/thinker", api_base=fake.url, price=(1.0, 10.0),
                     params={"reasoning_effort": "high", "max_tokens": 500})
    comp = ask(spec)
    assert comp.text and comp.usage.estimated
    assert comp.usage.completion_tokens == 500, "its hidden thinking may have used the whole limit"
    assert comp.usage.cost_usd == pytest.approx((comp.usage.prompt_tokens * 1.0 + 500 * 10.0) / 1e6)
    plain = ask(ModelSpec("openai/plain", api_base=fake.url, params={"max_tokens": 500}))
    assert plain.usage.estimated and plain.usage.completion_tokens < 50, "no thinking: counted from its text"
