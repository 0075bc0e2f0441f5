"""A reasoning model's reply through the real seam: the thinking apart from the answer (a field of its own or
inline ``<think>``), its tokens counted and priced as output, kept by the cache, and the output limit sent under
the name the model takes. Every reply comes from the loopback fake provider, over both transports."""

from __future__ import annotations

import asyncio

import pytest

from bench.models.client import LLM, Limits
from bench.models.reasoning import billed_completion, split_think
from bench.models.routing import ModelSpec

ASK = [{"role": "user", "content": "What is two plus two?"}]
PRICE = (1.0, 10.0)  # USD per million input / output tokens


def ask(spec: ModelSpec, cache: str | None = None, n: int = 1):
    """Return the Completion of ``ASK`` from a fresh client (``n`` identical calls at once: the last one)."""
    async def go():
        llm = LLM(Limits(max_concurrency=4, timeout_s=20, retries=0), cache=cache)
        try:
            return (await asyncio.gather(*(llm.complete(spec, ASK) for _ in range(n))))[-1]
        finally:
            await llm.aclose()
    return asyncio.run(go())


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_reasoning_content_is_kept_apart_and_its_tokens_are_priced_as_output(fake, tmp_path, transport):
    fake.configure(reasoning_content=["thinker"], tokenizer="cl100k", bill_per_mtok={"input": 1.0, "output": 10.0})
    spec = ModelSpec("openai/thinker", api_base=fake.url, transport=transport, price=PRICE,
                     params={"reasoning_effort": "high"})
    comp = ask(spec, str(tmp_path / "c.sqlite"))
    assert comp.text.startswith("fake answer") and "fake reasoning" not in comp.text
    assert comp.reasoning.startswith("fake reasoning") and len(comp.reasoning.split()) == 48  # 24 words × high
    u = comp.usage
    assert u.reasoning_tokens and u.completion_tokens > u.reasoning_tokens
    billed = fake.stats()["billed"]
    assert (u.prompt_tokens, u.completion_tokens) == (billed["prompt_tokens"], billed["completion_tokens"])
    assert u.cost_usd == pytest.approx(billed["usd"]), "the thinking is billed and priced as output"
    sent = fake.stats()["requests"]
    again = ask(spec, str(tmp_path / "c.sqlite"))
    assert fake.stats()["requests"] == sent and again.usage.cached
    assert (again.text, again.reasoning, again.usage.reasoning_tokens) == (comp.text, comp.reasoning,
                                                                         u.reasoning_tokens), "the cache keeps it"


def test_identical_requests_in_flight_share_the_reasoning(fake):
    fake.configure(reasoning_content=True, latency_ms=200)
    comp = ask(ModelSpec("openai/thinker", api_base=fake.url), n=3)
    assert fake.stats()["requests"] == 1 and comp.reasoning.startswith("fake reasoning")


def test_two_efforts_think_for_different_lengths_and_cost_differently(fake):
    fake.configure(reasoning_content=True)
    low, high = (ask(ModelSpec("openai/thinker", api_base=fake.url, price=PRICE,
                               params={"reasoning_effort": e})) for e in ("low", "high"))
    assert low.usage.reasoning_tokens < high.usage.reasoning_tokens
    assert low.usage.cost_usd < high.usage.cost_usd


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_inline_think_is_split_off_with_the_default_markers(fake, transport):
    fake.configure(think_tags=["r1"])
    comp = ask(ModelSpec("openai/r1", api_base=fake.url, transport=transport))
    assert comp.text.startswith("fake answer") and "think>" not in comp.text
    assert comp.reasoning.startswith("fake reasoning") and "think>" not in comp.reasoning
    assert comp.usage.completion_tokens >= len((comp.text + " " + comp.reasoning).split()), "inline: billed as content"


def test_a_custom_end_marker_splits_a_reply_that_has_no_start_marker(fake):
    fake.configure(think_tags=True, think_markers=["", "[/THINK]"])
    plain = ask(ModelSpec("openai/qwen", api_base=fake.url))
    assert plain.reasoning is None and "[/THINK]" in plain.text, "no marker configured: the reply is left whole"
    split = ask(ModelSpec("openai/qwen", api_base=fake.url, think_end="[/THINK]"))
    assert split.text.startswith("fake answer") and "[/THINK]" not in split.text
    assert split.reasoning.startswith("fake reasoning")


def test_the_split_reads_each_form_of_inline_thinking():
    assert split_think("<think>a</think>\n\nanswer") == ("answer", "a", 18)
    assert split_think("a</think>\nanswer") == ("a</think>\nanswer", None, 0), "no start, no end marker configured"
    assert split_think("a</think>\nanswer", "</think>")[:2] == ("answer", "a")
    assert split_think("[THINK]a[/THINK]answer", "[/THINK]")[:2] == ("answer", "a")
    assert split_think("<think>cut off mid-thought")[:2] == ("", "cut off mid-thought"), "all reasoning, no answer"
    assert split_think("no thinking at all", "</think>") == ("no thinking at all", None, 0)


def test_reasoning_counted_outside_completion_tokens_is_added_once():
    assert billed_completion(10, 5, 15, 3) == 5, "OpenAI's convention: completion_tokens include the reasoning"
    assert billed_completion(10, 5, 18, 3) == 8, "total_tokens holds it on top: added"
    assert billed_completion(10, 5, None, 30) == 35, "more reasoning than completion: it cannot be included"


@pytest.mark.parametrize("model, sent", [("openai/o3-mini", "max_completion_tokens"), ("openai/gpt-5", "max_completion_tokens"),
                                         ("openai/gpt-4o-mini", "max_tokens"), ("openai/qwen3-8b", "max_tokens")])
@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_the_output_limit_is_sent_under_the_name_the_model_takes(fake, model, sent, transport):
    ask(ModelSpec(model, api_base=fake.url, transport=transport, params={"max_tokens": 64}))
    [body] = fake.stats()["recent"]
    limits = {k: v for k, v in body.items() if k in ("max_tokens", "max_completion_tokens")}
    assert limits == {sent: 64}
