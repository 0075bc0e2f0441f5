"""``think_end`` decides how a reply is split, and the cache keeps the reply after the split, so it is part of the
request's identity when it is set: adding or fixing it on an entry asks again instead of answering with the reply
split the old way. A model without it keeps the key it always had (old caches still answer)."""

from __future__ import annotations

import asyncio

from bench.core.records import canonical_json
from bench.models.cache import request_key
from bench.models.client import LLM, Limits
from bench.models.routing import ModelSpec, resolve

ASK = [{"role": "user", "content": "What is two plus two?"}]


def ask(spec: ModelSpec, cache: str):
    async def go():
        llm = LLM(Limits(max_concurrency=2, timeout_s=20, retries=0), cache=cache)
        try:
            return await llm.complete(spec, ASK)
        finally:
            await llm.aclose()
    return asyncio.run(go())


def test_setting_think_end_asks_again_and_splits_the_new_reply(fake, tmp_path):
    fake.configure(think_tags=True, think_markers=["", "[/THINK]"])
    cache = str(tmp_path / "c.sqlite")
    whole = ask(ModelSpec("openai/qwen", api_base=fake.url), cache)
    assert whole.reasoning is None and "[/THINK]" in whole.text  # no marker configured: left whole, and cached
    split = ask(ModelSpec("openai/qwen", api_base=fake.url, think_end="[/THINK]"), cache)
    assert fake.stats()["requests"] == 2, "a new think_end is a new request, never the reply split the old way"
    assert not split.usage.cached and split.text.startswith("fake answer") and "[/THINK]" not in split.text
    assert split.reasoning and split.reasoning.startswith("fake reasoning")
    other = ask(ModelSpec("openai/qwen", api_base=fake.url, think_end="◁/think▷"), cache)
    assert fake.stats()["requests"] == 3 and not other.usage.cached  # each marker its own identity
    again = ask(ModelSpec("openai/qwen", api_base=fake.url, think_end="[/THINK]"), cache)
    assert fake.stats()["requests"] == 3 and again.usage.cached and again.text == split.text


def test_a_model_without_think_end_keeps_the_key_it_always_had(fake):
    spec = ModelSpec("openai/qwen", api_base=fake.url, params={"temperature": 0.2})
    route = resolve(spec)
    settings = canonical_json(spec.params) + "\x1f" + canonical_json(None)
    before = request_key(route.identity, spec.model, settings, 0, canonical_json(ASK))  # the spelling of old caches
    assert LLM(Limits(), cache=None).request_key(spec, ASK) == before
    marked = ModelSpec("openai/qwen", api_base=fake.url, params={"temperature": 0.2}, think_end="</think>")
    assert LLM(Limits(), cache=None).request_key(marked, ASK) != before
