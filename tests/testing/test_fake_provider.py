"""Tests of the fake provider itself, through raw urllib/aiohttp clients (never the bench package)."""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import time
import urllib.error
import urllib.request
from typing import Any

import aiohttp
import jsonschema
import pytest

from bench._schema_instance import SchemaInstance
from bench.testing.fake_provider import FakeProvider
from bench.testing.fake_provider.replies import fake_text

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

RUBRIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "verdict": {"type": "string", "enum": ["pass", "fail", "unsure"]},
        "rationale": {"type": "string", "minLength": 20},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "flagged": {"type": "boolean"},
        "criteria": {
            "type": "array",
            "minItems": 2,
            "maxItems": 4,
            "items": {"$ref": "#/$defs/Criterion"},
        },
        "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
    },
    "required": ["score", "verdict", "rationale", "criteria"],
    "additionalProperties": False,
    "$defs": {
        "Criterion": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "met": {"type": "boolean"},
                "weight": {"type": "number", "exclusiveMinimum": 0, "maximum": 2},
                "kind": {"const": "criterion"},
            },
            "required": ["name", "met", "weight", "kind"],
            "additionalProperties": False,
        }
    },
}


def chat_body(text: str = "hello", **extra: Any) -> dict[str, Any]:
    """A minimal chat completion request body."""
    return {"model": "fake-model", "messages": [{"role": "user", "content": text}], **extra}


def post(fake: FakeProvider, body: Any, headers: dict[str, str] | None = None,
         path: str = "/v1/chat/completions", timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    """POST JSON to the fake; returns (status, headers, raw body) for successes and HTTP errors alike."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{fake.port}{path}", data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with NO_PROXY.open(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def content_of(raw: bytes) -> str:
    """The assistant content of a chat.completion body."""
    return json.loads(raw)["choices"][0]["message"]["content"]


def assert_openai_error(raw: bytes) -> None:
    """The body is an OpenAI-style error."""
    error = json.loads(raw)["error"]
    assert {"message", "type", "code"} <= set(error)


async def concurrent_posts(url: str, bodies: list[dict[str, Any]]) -> list[int]:
    """POST all bodies at once over one aiohttp session; returns the statuses."""
    async with aiohttp.ClientSession() as session:
        async def one(body: dict[str, Any]) -> int:
            async with session.post(f"{url}/chat/completions", json=body) as response:
                await response.read()
                return response.status
        return await asyncio.gather(*(one(b) for b in bodies))


def wait_for(predicate: Any, timeout: float = 2.0) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# --------------------------------------------------------------------------- replies

def test_plain_reply_shape_and_determinism(fake: FakeProvider) -> None:
    status, _, raw = post(fake, chat_body("one two three"))
    assert status == 200
    reply = json.loads(raw)
    assert reply["object"] == "chat.completion" and reply["model"] == "fake-model"
    assert {"id", "created"} <= set(reply)
    choice = reply["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"].startswith("fake answer ")
    assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    assert content_of(post(fake, chat_body("one two three"))[2]) == choice["message"]["content"]
    assert content_of(post(fake, chat_body("something else"))[2]) != choice["message"]["content"]


def test_v1_prefix_is_optional_and_models_listed(fake: FakeProvider) -> None:
    assert post(fake, chat_body(), path="/chat/completions")[0] == 200
    for path in ("/v1/models", "/models"):  # by default it lists nothing and answers any model
        with NO_PROXY.open(f"http://127.0.0.1:{fake.port}{path}", timeout=5) as response:
            assert json.loads(response.read()) == {"object": "list", "data": []}
    fake.configure(served_models=["fake-model", "other"])
    with NO_PROXY.open(f"http://127.0.0.1:{fake.port}/v1/models", timeout=5) as response:
        assert [m["id"] for m in json.loads(response.read())["data"]] == ["fake-model", "other"]
    assert post(fake, chat_body())[0] == 200
    status, _headers, body = post(fake, {**chat_body(), "model": "nope"})
    assert status == 404 and "The model `nope` does not exist" in body.decode()


def test_schema_reply_validates_and_is_deterministic(fake: FakeProvider) -> None:
    response_format = {"type": "json_schema",
                       "json_schema": {"name": "rubric", "strict": True, "schema": RUBRIC_SCHEMA}}
    contents = []
    for text in ("judge answer A", "judge answer B", "judge answer A"):
        status, _, raw = post(fake, chat_body(text, response_format=response_format))
        assert status == 200
        contents.append(content_of(raw))
        jsonschema.validate(json.loads(contents[-1]), RUBRIC_SCHEMA)
    assert contents[0] == contents[2]  # same request, same reply


@pytest.mark.parametrize("schema", [
    {"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 5},
    {"type": "integer", "minimum": 1, "maximum": 100, "multipleOf": 7},
    {"type": "number", "minimum": 0.5, "maximum": 0.5},
    {"type": ["null", "string"], "minLength": 3, "maxLength": 3},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "maxItems": 2},
    {"type": "array", "prefixItems": [{"const": 1}, {"type": "string"}], "minItems": 2, "maxItems": 2},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
               {"required": ["a", "b"]}]},
    {"oneOf": [{"type": "string", "format": "date-time"}, {"type": "integer"}]},
])
def test_schema_instance_edge_cases(schema: dict[str, Any]) -> None:
    for seed in range(20):
        jsonschema.validate(SchemaInstance(schema, random.Random(seed), fake_text).of(schema), schema)


def test_llama_cpp_schema_form_validates(fake: FakeProvider) -> None:
    schema = {"type": "object", "properties": {"label": {"enum": ["a", "b"]},
                                                "n": {"type": "integer", "minimum": 7, "maximum": 7}},
              "required": ["label", "n"]}
    raw = post(fake, chat_body("x", response_format={"type": "json_object", "schema": schema}))[2]
    value = json.loads(content_of(raw))
    jsonschema.validate(value, schema)
    assert value["n"] == 7


def test_replies_match_content_and_status(fake: FakeProvider) -> None:
    fake.configure(replies=[{"match": "capital", "content": "Paris"},
                            {"match": "forbidden", "status": 403},
                            {"match": "a", "content": "fallback"}])
    schema_format = {"type": "json_schema", "json_schema": {"name": "x", "schema": RUBRIC_SCHEMA}}
    assert content_of(post(fake, chat_body("the capital of France", response_format=schema_format))[2]) == "Paris"
    assert content_of(post(fake, chat_body("say a word"))[2]) == "fallback"
    status, _, raw = post(fake, chat_body("this is forbidden"))
    assert status == 403
    assert_openai_error(raw)
    assert content_of(post(fake, chat_body("xyz"))[2]).startswith("fake answer ")


# --------------------------------------------------------------------------- faults

def test_429_with_retry_after(fake: FakeProvider) -> None:
    fake.configure(rate_429=1.0, retry_after_s=0.05)
    status, headers, raw = post(fake, chat_body())
    assert status == 429 and headers["Retry-After"] == "0.05"
    assert_openai_error(raw)
    fake.configure(retry_after_s=None)
    status, headers, _ = post(fake, chat_body())
    assert status == 429 and "Retry-After" not in headers
    assert fake.stats()["faults"]["429"] == 2


def test_500(fake: FakeProvider) -> None:
    fake.configure(rate_500=1.0)
    status, _, raw = post(fake, chat_body())
    assert status == 500
    assert_openai_error(raw)
    assert fake.stats()["statuses"] == {"500": 1}


def test_fail_first_is_per_distinct_request(fake: FakeProvider) -> None:
    fake.configure(fail_first=2, retry_after_s=1)
    first = [post(fake, chat_body("same"))[:2] for _ in range(3)]
    assert [s for s, _ in first] == [429, 429, 200]
    assert first[0][1]["Retry-After"] == "1"
    assert post(fake, chat_body("other"))[0] == 429
    assert post(fake, chat_body("same", model="other-model"))[0] == 429
    fake.configure(fail_first=1, fail_status=500)  # re-configuring restarts the attempt counts
    assert [post(fake, chat_body("same"))[0] for _ in range(2)] == [500, 200]
    assert fake.stats()["faults"]["fail_first"] == 5


def test_random_faults_are_seeded(fake: FakeProvider) -> None:
    def run() -> list[int]:
        fake.configure(reset=True, rate_500=0.5, seed=7)
        return [post(fake, chat_body(str(i)))[0] for i in range(20)]

    first = run()
    assert first == run()
    assert set(first) == {200, 500}


def test_malformed_body(fake: FakeProvider) -> None:
    fake.configure(rate_malformed=1.0)
    status, _, raw = post(fake, chat_body())
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(raw)
    assert fake.stats()["faults"]["malformed"] == 1


def test_empty_content(fake: FakeProvider) -> None:
    fake.configure(rate_empty=1.0)
    status, _, raw = post(fake, chat_body())
    choice = json.loads(raw)["choices"][0]
    assert status == 200 and choice["message"]["content"] == "" and choice["finish_reason"] == "length"


def test_reset_connection(fake: FakeProvider) -> None:
    fake.configure(rate_reset=1.0)
    with pytest.raises((ConnectionError, http.client.HTTPException, urllib.error.URLError)):
        post(fake, chat_body())

    async def aio() -> None:
        async with aiohttp.ClientSession() as session, \
                session.post(f"{fake.url}/chat/completions", json=chat_body()) as response:
            await response.read()

    with pytest.raises(aiohttp.ClientConnectionError):
        asyncio.run(aio())
    assert fake.stats()["faults"]["reset"] == 2
    assert "200" not in fake.stats()["statuses"]


def test_hang_times_out_client(fake: FakeProvider) -> None:
    fake.configure(rate_hang=1.0)

    async def aio() -> None:
        timeout = aiohttp.ClientTimeout(total=0.3)
        async with aiohttp.ClientSession(timeout=timeout) as session, \
                session.post(f"{fake.url}/chat/completions", json=chat_body()) as response:
            await response.read()

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(aio())
    assert fake.stats()["faults"]["hang"] == 1
    assert wait_for(lambda: fake.stats()["in_flight"] == 0)  # the server drops the abandoned handler


def test_require_key(fake: FakeProvider) -> None:
    fake.configure(require_key="sk-test")
    status, _, raw = post(fake, chat_body())
    assert status == 401
    assert_openai_error(raw)
    assert post(fake, chat_body(), headers={"Authorization": "Bearer wrong"})[0] == 401
    assert post(fake, chat_body(), headers={"Authorization": "Bearer sk-test"})[0] == 200
    recent = fake.stats()["recent"]
    assert [r["_auth"] for r in recent] == [False, True, True]
    assert "sk-test" not in json.dumps(recent) and "wrong" not in json.dumps(recent)


def test_invalid_json_is_400(fake: FakeProvider) -> None:
    status, _, raw = post(fake, b"not json")
    assert status == 400
    assert_openai_error(raw)


# --------------------------------------------------------------------------- counters and admin

def test_counters_and_peak_in_flight(fake: FakeProvider) -> None:
    fake.configure(latency_ms=200)
    bodies = [chat_body(f"q{i}", model="m-a" if i % 2 else "m-b") for i in range(20)]
    started = time.monotonic()
    statuses = asyncio.run(concurrent_posts(fake.url, bodies))
    assert statuses == [200] * 20
    assert time.monotonic() - started < 1.5  # concurrent, not serial
    stats = fake.stats()
    assert stats["requests"] == 20 and stats["in_flight"] == 0 and stats["peak_in_flight"] == 20
    assert stats["statuses"] == {"200": 20}
    assert stats["by_model"] == {"m-a": 10, "m-b": 10}
    assert len(stats["recent"]) == 20 and all(r["_auth"] is False for r in stats["recent"])



def test_timeline_gives_each_requests_model_and_span_and_a_reset_clears_it(fake: FakeProvider) -> None:
    fake.configure(latency_ms=200)
    before = time.time()
    bodies = [chat_body(f"q{i}", model="m-a" if i < 3 else "m-b") for i in range(5)]
    assert asyncio.run(concurrent_posts(fake.url, bodies)) == [200] * 5
    after = time.time()
    timeline = fake.timeline()
    assert timeline["dropped"] == 0
    spans = timeline["spans"]
    assert sorted(m for m, _s, _e in spans) == ["m-a", "m-a", "m-a", "m-b", "m-b"]
    assert all(before <= start and start + 0.19 <= end <= after for _m, start, end in spans)  # epoch, latency inside
    assert max(s for _m, s, _e in spans) < min(e for _m, _s, e in spans)  # all 5 in flight together, as the peak says
    assert fake.stats()["peak_in_flight_by_model"] == {"m-a": 3, "m-b": 2}
    fake.reset()
    assert fake.timeline() == {"spans": [], "dropped": 0}


def test_recent_keeps_the_last_200_newest_last(fake: FakeProvider) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)  # one keep-alive connection
    for i in range(205):
        connection.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(f"n{i}")),
                           headers={"Content-Type": "application/json"})
        assert connection.getresponse().read()
    connection.close()
    recent = fake.stats()["recent"]
    assert [r["messages"][0]["content"] for r in recent] == [f"n{i}" for i in range(5, 205)]


def test_admin_reset_restores_defaults(fake: FakeProvider) -> None:
    fake.configure(rate_500=1.0, latency_ms=5)
    post(fake, chat_body())
    fake.reset()
    stats = fake.stats()
    assert stats["requests"] == 0 and stats["statuses"] == {} and stats["recent"] == []
    assert post(fake, chat_body())[0] == 200
    assert fake.configure()["latency_ms"] == 0


def test_admin_config_merges_resets_and_rejects_unknown_keys(fake: FakeProvider) -> None:
    assert fake.configure(rate_500=0.5)["rate_500"] == 0.5
    config = fake.configure(latency_ms=1)
    assert config["rate_500"] == 0.5 and config["latency_ms"] == 1
    config = fake.configure(reset=True, rate_429=0.25)
    assert config["rate_500"] == 0.0 and config["rate_429"] == 0.25
    with pytest.raises(RuntimeError, match="unknown config key"):
        fake.configure(rate_typo=1.0)


def test_provider_lifecycle_and_cli_latency_default() -> None:
    with FakeProvider(latency_ms=30, rate_500=1.0) as provider:
        assert provider.url == f"http://127.0.0.1:{provider.port}/v1"
        assert post(provider, chat_body())[0] == 500
        provider.reset()
        started = time.monotonic()
        assert post(provider, chat_body())[0] == 200
        assert time.monotonic() - started >= 0.03
        process = provider.process
    assert process is not None and process.poll() is not None
    with pytest.raises(RuntimeError, match="not started"):
        _ = provider.url


def test_provider_start_failure_is_clear() -> None:
    with pytest.raises(RuntimeError, match="unknown config key"):
        FakeProvider(no_such_key=1).start()


def test_packed_schemas_get_one_grade_per_id_and_corrupt_items_go_off_scale(fake):
    import json as _json
    import urllib.request as _rq

    ids = [f"i{n}" for n in range(40)]
    schema = {"type": "object", "required": ["grades"], "additionalProperties": False, "properties": {
        "grades": {"type": "array", "items": {"type": "object", "required": ["id", "scores"], "properties": {
            "id": {"type": "string", "enum": ids},
            "scores": {"type": "object", "required": ["x"], "properties": {"x": {"type": "integer", "enum": [1, 2, 3]}}}}}}}}

    def ask():
        body = {"model": "m", "messages": [{"role": "user", "content": "grade"}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "g", "schema": schema}}}
        req = _rq.Request(f"{fake.url}/chat/completions", data=_json.dumps(body).encode(),
                          headers={"Content-Type": "application/json"})
        with _rq.urlopen(req, timeout=10) as resp:
            return _json.loads(_json.loads(resp.read())["choices"][0]["message"]["content"])["grades"]

    clean = ask()
    assert [g["id"] for g in clean] == ids and all(g["scores"]["x"] in (1, 2, 3) for g in clean)
    fake.configure(corrupt_items=0.5)
    bad = sum(g["scores"]["x"] == 99 for g in ask())
    assert 8 <= bad <= 32
