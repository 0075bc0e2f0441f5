"""Tool calls through the one seam (bench.models.tools_support): ``LLM.complete(..., tools=...)`` sends the tools,
keys the request by them (a request without tools keeps the key of old caches), and returns the reply's calls in
OpenAI's wire form as ``Completion.tool_calls``, from either transport, from the cache, from an identical request
in flight and from a provider batch. A reply of tool calls only is an answer, never an "empty" retry; a server
without tools fails the request for good (HTTP 400); a model LiteLLM's map says calls no functions is refused
when the run is opened, naming the params file, the prompt, the model and what to do."""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.core.errors import ParamsError, ProviderError
from bench.core.records import canonical_json
from bench.models.batch_policy import BatchPolicy
from bench.models.batches.outputs import read_line
from bench.models.cache import request_key
from bench.models.client import LLM, Limits
from bench.models.routing import ModelSpec, resolve
from bench.models.tools_support import tools_refusal
from bench.run import open_run
from bench.testing.grids import grid, model, prompt

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"match": "weather", "name": "get_weather", "arguments": {"city": "Paris"}}


def ask(spec: ModelSpec, messages=ASK, *, cache: str | None = None, retries: int = 0, times: int = 1, **kw):
    """Return ``times`` identical requests' completions, asked at once by one client."""
    async def go():
        llm = LLM(Limits(max_concurrency=4, timeout_s=20, retries=retries, backoff_s=0.01), cache=cache)
        try:
            return await asyncio.gather(*(llm.complete(spec, messages, **kw) for _ in range(times)))
        finally:
            await llm.aclose()
    return asyncio.run(go())


@pytest.mark.parametrize("transport", ["auto", "litellm"])  # one aiohttp POST, and litellm.acompletion
def test_a_tool_call_comes_back_with_its_arguments_text_and_then_from_the_cache(fake, tmp_path, transport):
    fake.configure(tool_calls=[WEATHER])
    spec = ModelSpec("openai/agent", api_base=fake.url, transport=transport)
    cache = str(tmp_path / "c.sqlite")
    (comp,) = ask(spec, cache=cache, tools=TOOLS)
    assert comp.text == "" and comp.usage.finish_reason == "tool_calls" and comp.usage.completion_tokens == 2
    (call,) = comp.tool_calls
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}  # the text, as written
    assert fake.stats()["recent"][-1]["tools"] == TOOLS  # sent in OpenAI's form by either transport
    (again,) = ask(spec, cache=cache, tools=TOOLS)
    assert fake.stats()["requests"] == 1 and again.usage.cached and again.tool_calls == comp.tool_calls


def test_tools_key_the_request_and_a_request_without_them_keeps_the_old_key(fake):
    spec = ModelSpec("openai/agent", api_base=fake.url, params={"temperature": 0.2})
    route = resolve(spec)
    old = request_key(route.identity, spec.model, canonical_json(spec.params) + "\x1f" + canonical_json(None), 0,
                      canonical_json(ASK))  # the spelling of caches written before tools existed
    llm = LLM(Limits(), cache=None)
    assert llm.request_key(spec, ASK) == llm.request_key(spec, ASK, tools=None) == old
    with_tools = llm.request_key(spec, ASK, tools=TOOLS)
    assert with_tools != old
    assert llm.request_key(spec, ASK, tools=TOOLS, tool_choice="required") not in (old, with_tools)
    other = [{"type": "function", "function": {**TOOLS[0]["function"], "description": "Weather"}}]
    assert llm.request_key(spec, ASK, tools=other) not in (old, with_tools)  # another definition, another request


def test_a_reply_of_tool_calls_only_is_an_answer_not_an_empty_one_retried(fake):
    fake.configure(tool_calls=[WEATHER])
    (comp,) = ask(ModelSpec("openai/agent", api_base=fake.url), retries=3, tools=TOOLS)
    assert comp.tool_calls and comp.usage.attempts == 1 and fake.stats()["requests"] == 1


def test_identical_tool_requests_in_flight_share_one_reply_and_its_calls(fake):
    fake.configure(tool_calls=[WEATHER], latency_ms=300)  # the first is in flight while the others arrive
    comps = ask(ModelSpec("openai/agent", api_base=fake.url), times=3, tools=TOOLS)
    assert fake.stats()["requests"] == 1
    assert all(c.tool_calls == comps[0].tool_calls and c.tool_calls for c in comps)
    assert sorted(c.usage.calls for c in comps) == [0, 0, 1]


def test_the_history_and_the_tool_results_reach_the_model(fake):
    fake.configure(tool_calls=[WEATHER])
    spec = ModelSpec("openai/agent", api_base=fake.url)
    (first,) = ask(spec, tools=TOOLS)
    call = first.tool_calls[0]
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": first.tool_calls},
               {"role": "tool", "tool_call_id": call["id"], "name": "get_weather",
                "content": "Weather in Paris: sunny"}]
    (final,) = ask(spec, history, tools=TOOLS)
    assert final.tool_calls is None and final.usage.finish_reason == "stop"
    assert final.text.endswith(" [turn 1: What is the weather in Paris?] [tools: Weather in Paris: sunny]")
    chat = [*ASK, {"role": "assistant", "content": final.text}, {"role": "user", "content": "And tomorrow?"}]
    (second,) = ask(spec, chat)
    assert second.text.endswith(" [turn 2: And tomorrow?]")
    (single,) = ask(spec)
    assert "[turn" not in single.text  # a single-turn request answers as before


def test_a_server_without_tools_fails_the_request_for_good(fake):
    fake.configure(tools_supported=False)
    with pytest.raises(ProviderError) as err:
        ask(ModelSpec("openai/agent", api_base=fake.url), retries=3, tools=TOOLS)
    assert err.value.status == 400 and not err.value.retryable and err.value.attempts == 1
    assert "tools are not supported" in str(err.value) and fake.stats()["requests"] == 1


def test_a_batched_model_carries_its_tool_calls_through_the_batch(fake, tmp_path):
    fake.configure(tool_calls=[WEATHER])
    spec = ModelSpec("openai/agent", api_base=fake.url, price=(1.0, 2.0),
                     batch=BatchPolicy(poll_s=0.05, poll_max_s=0.2, gather_s=0.1))

    async def go():
        llm = LLM(Limits(retries=1, backoff_s=0.01, timeout_s=10))
        llm.batch_dir = tmp_path / "batches"
        try:
            return await llm.complete(spec, ASK, tools=TOOLS)
        finally:
            await llm.aclose()

    comp = asyncio.run(go())
    assert comp.usage.batch_id and comp.text == "" and comp.tool_calls[0]["function"]["name"] == "get_weather"
    assert fake.stats()["requests"] == 0 and fake.stats()["batches"]["created"] == 1


def test_a_bedrock_batch_line_turns_a_tool_use_into_a_tool_call_and_json_mode_into_content():
    used = {"recordId": "k1", "modelInput": {}, "modelOutput": {
        "type": "message", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                        "input": {"city": "Paris"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 31, "output_tokens": 9}}}
    _rid, status, body, _ = read_line(used)
    choice = body["choices"][0]
    assert status == 200 and choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == ""
    assert choice["message"]["tool_calls"] == [{"id": "toolu_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    converse = {"recordId": "k2", "modelInput": {}, "modelOutput": {"output": {"message": {"content": [
        {"toolUse": {"toolUseId": "t9", "name": "json_tool_call", "input": {"score": 4}}}]}}, "stopReason": "tool_use",
        "usage": {"inputTokens": 3, "outputTokens": 2}}}
    choice = read_line(converse)[2]["choices"][0]
    assert json.loads(choice["message"]["content"]) == {"score": 4} and "tool_calls" not in choice["message"]


def test_only_a_model_known_to_call_no_functions_is_refused_tools():
    refused = tools_refusal(ModelSpec("deepseek/deepseek-reasoner"))  # "supports_function_calling": false
    assert refused and "LiteLLM" in refused and "supports_function_calling" in refused
    assert tools_refusal(ModelSpec("openai/gpt-4.1-mini")) is None  # the map says it does
    assert tools_refusal(ModelSpec("azure/o3-mini")) is None  # the map is silent: not refused
    assert tools_refusal(ModelSpec("openai/gpt-5-chat", api_base="http://127.0.0.1:9/v1")) is None  # its server says
    assert tools_refusal(ModelSpec("dry/agent")) is None


def test_opening_a_run_refuses_tools_for_a_model_that_calls_no_functions(fake, tmp_path):
    tools = [{"name": "get_weather", "description": "Current weather", "result": "sunny in {city}",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    models = [model("m1", fake.url), {"id": "r1", "model": "deepseek/deepseek-reasoner"}]
    prompts = [prompt("agent", "Weather in {topic}?", tools=["get_weather"]), prompt("plain", "Tip on {topic}.")]
    path = grid(tmp_path / "p.yaml", fake.url, models=models, prompts=prompts, tools=tools)
    with pytest.raises(ParamsError) as err:
        open_run(path)
    (line,) = str(err.value).splitlines()
    assert str(path) in line and "model r1 (deepseek/deepseek-reasoner)" in line and "prompt agent " in line
    assert "supports_function_calling" in line and "--cells" in line
    assert len(open_run(path, cells="r1/plain@v1").cells) == 1  # the same model without tools is fine
    assert len(open_run(path, cells="m1/agent@v1").cells) == 1  # a server of its own answers for itself
