"""The fake provider as a tool-using model and a conversation partner (bench.testing.fake_provider.tool_calls):
scripted tool calls, ``tools_supported``, and the multi-turn echo, through raw HTTP (never the bench package)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from bench.testing.fake_provider import FakeProvider

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]
WEATHER = {"match": "weather", "name": "get_weather", "arguments": {"city": "Paris"}}


def post(fake: FakeProvider, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a chat body to the fake; return (status, parsed JSON body) for successes and HTTP errors alike."""
    request = urllib.request.Request(f"{fake.url}/chat/completions", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with NO_PROXY.open(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def chat(messages: list[dict[str, Any]], model: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": messages, **extra}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def called(call: dict[str, Any], result: str) -> list[dict[str, Any]]:
    """The assistant message that made ``call`` and the tool message answering it."""
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": result}]


def test_a_scripted_tool_call_comes_back_in_openai_form_with_its_arguments_billed(fake):
    fake.configure(tool_calls=[WEATHER])
    status, body = post(fake, chat([user("What is the weather in Paris?")], tools=TOOLS))
    choice = body["choices"][0]
    assert status == 200 and choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}
    assert body["usage"]["completion_tokens"] == len(call["function"]["arguments"].split()) == 2  # words, never 0
    assert fake.stats()["billed"]["completion_tokens"] == 2


def test_until_counts_the_tool_results_and_the_next_script_takes_over(fake):
    fake.configure(tool_calls=[WEATHER, {"match": "weather", "name": "lookup_order", "arguments": "{}", "until": 2}])
    ask = [user("weather please")]
    first = post(fake, chat(ask, tools=TOOLS))[1]["choices"][0]["message"]["tool_calls"][0]
    assert first["function"]["name"] == "get_weather"
    ask += called(first, "sunny")
    second = post(fake, chat(ask, tools=TOOLS))[1]["choices"][0]["message"]["tool_calls"][0]
    assert second["function"] == {"name": "lookup_order", "arguments": "{}"} and second["id"] != first["id"]
    ask += called(second, "order 7 shipped")
    final = post(fake, chat(ask, tools=TOOLS))[1]["choices"][0]
    assert final["finish_reason"] == "stop" and "tool_calls" not in final["message"]
    assert final["message"]["content"].endswith(" [turn 1: weather please] [tools: sunny; order 7 shipped]")


def test_a_script_answers_only_requests_with_tools_and_its_own_model(fake):
    fake.configure(tool_calls=[{**WEATHER, "model": "agent"}])
    assert "tool_calls" not in post(fake, chat([user("weather?")]))[1]["choices"][0]["message"]  # no tools sent
    assert "tool_calls" not in post(fake, chat([user("weather?")], model="other", tools=TOOLS))[1]["choices"][0][
        "message"]
    assert post(fake, chat([user("weather?")], model="agent", tools=TOOLS))[1]["choices"][0]["message"]["tool_calls"]
    assert "tool_calls" not in post(fake, chat([user("hello")], model="agent", tools=TOOLS))[1]["choices"][0][
        "message"]  # no match: a normal reply


def test_string_arguments_are_sent_as_written_for_a_malformed_arguments_test(fake):
    fake.configure(tool_calls=[{"match": "x", "name": "get_weather", "arguments": '{"city": "Par'}])
    call = post(fake, chat([user("x")], tools=TOOLS))[1]["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["arguments"] == '{"city": "Par'


def test_a_server_without_tools_refuses_a_request_with_tools_with_a_400(fake):
    fake.configure(tools_supported=False, tool_calls=[WEATHER])
    status, body = post(fake, chat([user("weather?")], tools=TOOLS))
    assert status == 400 and "tools are not supported" in body["error"]["message"]
    status, body = post(fake, chat([user("weather?")]))
    assert status == 200 and body["choices"][0]["message"]["content"].startswith("fake answer")
    assert fake.stats()["statuses"] == {"200": 1, "400": 1}


def test_the_multi_turn_echo_shows_the_history_and_a_single_turn_answers_as_before(fake):
    single = post(fake, chat([user("Hi, I am Ada.")]))[1]["choices"][0]["message"]["content"]
    assert "[" not in single and single.startswith("fake answer")
    last = "Give me one tip about focusing on long texts, please, right now."
    history = [user("Hi, I am Ada."), {"role": "assistant", "content": "Hello Ada."}, user(last)]
    text = post(fake, chat(history))[1]["choices"][0]["message"]["content"]
    assert text.startswith("fake answer") and text.endswith(f" [turn 2: {last[:40]}]")
    assert last[:40] == "Give me one tip about focusing on long t"
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}}}
    json.loads(post(fake, chat(history, response_format=schema))[1]["choices"][0]["message"]["content"])  # still JSON


@pytest.mark.parametrize("bad", [
    {"tool_calls": {"match": "x"}},
    {"tool_calls": [{"match": "x"}]},  # no tool name
    {"tool_calls": [{"match": "x", "name": "f", "until": 0}]},
    {"tool_calls": [{"match": "x", "name": "f", "arguments": 3}]},
    {"tool_calls": [{"match": "x", "name": "f", "colour": "red"}]},
    {"tools_supported": "yes"},
])
def test_a_malformed_tools_config_is_refused(fake, bad):
    with pytest.raises(RuntimeError, match="tool"):
        fake.configure(**bad)
