"""The provider registry (bench.models.providers): each registered provider answers the contract through the
real code path: a dry model and the loopback fake provider (direct and through LiteLLM) answer real requests;
the embedded model is resolved from a GGUF file without starting llama.cpp."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.core.errors import PreflightError
from bench.models import providers
from bench.models.batches.batch_api import unsupported
from bench.models.client import LLM, Limits
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec, price_per_token, resolve
from bench.models.tokens import BYTES, bound_counter, counter_for

FAST = dict(backoff_s=0.01, backoff_max_s=0.05, timeout_s=5)
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]


def answer(spec: ModelSpec):
    """Return one completion of ``spec`` through LLM.complete (no cache)."""
    async def go():
        llm = LLM(Limits(**FAST))
        try:
            return await llm.complete(spec, MESSAGES, params={"max_tokens": 8})
        finally:
            await llm.aclose()
    return asyncio.run(go())


def test_the_registry_lists_every_kind_once_in_order_of_precedence():
    assert [p.name for p in providers.REGISTRY] == ["dry", "local", "self_hosted", "litellm"]
    assert providers.provider_named("local") is providers.REGISTRY[1]
    with pytest.raises(KeyError, match="known: dry, local"):
        providers.provider_named("vertex")
    base = "http://127.0.0.1:9/v1"
    chosen = [providers.provider_for(ModelSpec(m, api_base=a)).name for m, a in [
        ("dry/gpt-4o", base), ("local/x.gguf", None), ("openai/m", base), ("hosted_vllm/m", base), ("openai/m", None),
        ("anthropic/claude-haiku-4-5", None)]]
    assert chosen == ["dry", "local", "self_hosted", "self_hosted", "litellm", "litellm"]
    assert providers.provider_for(ModelSpec("openai/m", api_base=base, transport="litellm")).name == "litellm"


def test_a_dry_model_answers_free_in_process_and_takes_what_it_stands_in_for():
    route = resolve(ModelSpec("dry/gpt-4o-mini", api_base="http://127.0.0.1:9/v1"))
    p = route.provider
    assert (p.name, route.transport, route.identity, route.key_env) == ("dry", "dry", "dry", None)
    assert p.takes_images(route) and p.takes_tools(route) and not p.logprobs(route)
    assert counter_for(route).tokenizer == "o200k_base" and bound_counter(route).tokenizer == BYTES
    assert price_per_token(route) == (0.0, 0.0) and p.batch_vendor(route) is None
    assert unsupported(route).startswith("model 'dry/gpt-4o-mini': a dry model has no Batch API")
    preflight([route.spec])  # its api_base is never probed: nothing listens on port 9
    comp = answer(route.spec)
    assert comp.text and comp.usage.cost_usd == 0.0


def test_a_self_hosted_server_is_reached_without_litellm_and_priced_only_when_declared(fake):
    route = resolve(ModelSpec("openai/fake-model", api_base=fake.url))
    p = route.provider
    assert (p.name, route.transport, route.vendor, route.identity) == (
        "self_hosted", "direct", "openai", f"openai@{fake.url.rstrip('/')}")
    assert p.takes_images(route) and p.takes_tools(route) and p.logprobs(route) and not p.translates_params
    assert counter_for(route).tokenizer == "cl100k_base" and bound_counter(route).tokenizer == BYTES
    assert price_per_token(route) is None and p.batch_vendor(route) == "openai" and unsupported(route) is None
    priced = resolve(ModelSpec("openai/fake-model", api_base=fake.url, price=(1.0, 2.0)))
    assert price_per_token(priced) == (1e-6, 2e-6)
    preflight([route.spec])
    comp = answer(route.spec)
    assert comp.text and comp.usage.prompt_tokens > 0 and comp.usage.cost_usd is None


def test_litellm_answers_for_every_other_string_with_its_own_map(fake):
    through = resolve(ModelSpec("openai/fake-model", api_base=fake.url, transport="litellm"))
    assert (through.provider.name, through.transport, through.served_model) == ("litellm", "litellm", "openai/fake-model")
    assert through.provider.translates_params and price_per_token(through) is None  # an api_base: not in the map
    assert answer(through.spec).text
    listed = resolve(ModelSpec("openai/gpt-4o-mini"))
    p = listed.provider
    assert (p.name, listed.transport, listed.key_env) == ("litellm", "direct", "OPENAI_API_KEY")
    assert p.takes_images(listed) and p.takes_tools(listed) and p.logprobs(listed)
    assert counter_for(listed).tokenizer == "o200k_base" and bound_counter(listed).tokenizer == "o200k_base"
    assert price_per_token(listed) is not None and p.batch_vendor(listed) == "openai"
    with pytest.raises(PreflightError, match="unknown model string 'nosuchvendor/x'"):
        resolve(ModelSpec("nosuchvendor/x"))


def test_the_embedded_model_is_routed_by_its_weights_without_starting_llama(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF" + b"\0" * 100)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BENCH_LOCAL_LOGPROBS", raising=False)
    route = resolve(ModelSpec("local/tiny.gguf"))
    p = route.provider
    assert (p.name, route.transport, route.api_base, route.key_env) == ("local", "direct", None, None)
    assert route.identity.startswith("local:tiny.gguf:104:") and p.launches and not p.named_in_listing
    assert not p.takes_images(route) and not p.takes_tools(route) and not p.logprobs(route)
    monkeypatch.setenv("BENCH_LOCAL_LOGPROBS", "1")
    assert p.logprobs(route)
    assert counter_for(route).tokenizer == "cl100k_base" and bound_counter(route).tokenizer == BYTES
    assert price_per_token(route) == (0.0, 0.0) and p.batch_vendor(route) is None  # the embedded model is free
    assert "the embedded model has no Batch API" in unsupported(route)
    folded = p.wire_messages(MESSAGES)
    assert [m["role"] for m in folded] == ["user"] and "Be brief." in folded[0]["content"]
