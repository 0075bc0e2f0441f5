"""Tests of the fake provider's Files + Batch API, through LiteLLM's files/batches functions and plain HTTP.

Every test talks to a real fake provider process (the session's, reset per test, or its own); nothing
is mocked. Waiting is by polling a batch's status, never by a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import urllib.error
import urllib.request
from typing import Any

import litellm
import openai
import pytest

from bench.testing.fake_provider import FakeProvider

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ENDPOINT = "/v1/chat/completions"
TERMINAL = ("completed", "failed", "expired", "cancelled")


# --------------------------------------------------------------------------- helpers

def line(custom_id: str, text: str, model: str = "fake-model", **extra: Any) -> dict[str, Any]:
    """One batch input line asking ``text`` of ``model``."""
    return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT,
            "body": {"model": model, "messages": [{"role": "user", "content": text}], **extra}}


def jsonl(lines: list[Any]) -> bytes:
    """Lines as a JSONL file (a str line is written as it is)."""
    return "".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in lines).encode()


def call(fake: FakeProvider, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One plain HTTP request to the fake; (status, raw body) for successes and HTTP errors alike."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{fake.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with NO_PROXY.open(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def upload(fake: FakeProvider, data: bytes, purpose: str = "batch", prefix: str = "/v1",
           headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """``POST /files`` as multipart/form-data; (status, JSON body)."""
    boundary = f"fake-{secrets.token_hex(8)}"
    form = (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n{purpose}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="input.jsonl"\r\n'
            f"Content-Type: application/jsonl\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    status, raw = call(fake, "POST", f"{prefix}/files", form,
                       {"Content-Type": f"multipart/form-data; boundary={boundary}", **(headers or {})})
    return status, json.loads(raw)


def submit(fake: FakeProvider, lines: list[Any]) -> dict[str, Any]:
    """Upload ``lines`` and create a batch of them over plain HTTP; the batch object."""
    status, stored = upload(fake, jsonl(lines))
    assert status == 200, stored
    status, raw = call(fake, "POST", "/v1/batches", {"input_file_id": stored["id"], "endpoint": ENDPOINT,
                                                     "completion_window": "24h"})
    assert status == 200, raw
    return json.loads(raw)


def wait_batch(fake: FakeProvider, batch_id: str, until: Any = TERMINAL, timeout: float = 5) -> dict[str, Any]:
    """Poll ``GET /v1/batches/{id}`` until its status is in ``until`` (or the predicate ``until`` holds)."""
    deadline = time.monotonic() + timeout
    while True:
        batch = json.loads(call(fake, "GET", f"/v1/batches/{batch_id}")[1])
        if (until(batch) if callable(until) else batch["status"] in until) or time.monotonic() > deadline:
            return batch
        time.sleep(0.02)


def file_lines(fake: FakeProvider, file_id: str | None) -> list[dict[str, Any]]:
    """The JSONL lines of a stored file (``GET /v1/files/{id}/content``)."""
    assert file_id is not None
    status, raw = call(fake, "GET", f"/v1/files/{file_id}/content")
    assert status == 200
    return [json.loads(text) for text in raw.decode().splitlines()]


def litellm_kwargs(fake: FakeProvider) -> dict[str, Any]:
    """What bench passes LiteLLM for an OpenAI-compatible api_base."""
    return {"custom_llm_provider": "openai", "api_base": fake.url, "api_key": "x"}


# --------------------------------------------------------------------------- lifecycle through LiteLLM

def test_lifecycle_through_litellm_statuses_in_order_and_output_matches(fake: FakeProvider) -> None:
    # each status and count held long enough for a poll through LiteLLM to see it on a loaded machine
    fake.configure(batch_delays_s={"validating": 1.0, "in_progress": 0.05, "finalizing": 1.0}, batch_line_ms=150)
    lines = [line(f"item-{i}", f"question number {i}") for i in range(6)]
    kwargs = litellm_kwargs(fake)

    async def run() -> tuple[Any, list[tuple[str, int]], bytes]:
        stored = await litellm.acreate_file(file=("input.jsonl", jsonl(lines)), purpose="batch", **kwargs)
        assert stored.purpose == "batch" and stored.bytes == len(jsonl(lines))
        batch = await litellm.acreate_batch(input_file_id=stored.id, endpoint=ENDPOINT, completion_window="24h",
                                            metadata={"run": "t1"}, **kwargs)
        seen = [(batch.status, batch.request_counts.completed)]
        deadline = time.monotonic() + 60
        while batch.status not in TERMINAL and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            batch = await litellm.aretrieve_batch(batch_id=batch.id, **kwargs)
            seen.append((batch.status, batch.request_counts.completed))
        content = await litellm.afile_content(file_id=batch.output_file_id, **kwargs)
        return batch, seen, content.content

    batch, seen, output = asyncio.run(run())
    statuses = [s for n, (s, _) in enumerate(seen) if n == 0 or seen[n - 1][0] != s]
    assert statuses == ["validating", "in_progress", "finalizing", "completed"]
    completed = [c for _, c in seen]
    assert completed == sorted(completed) and any(0 < c < 6 for c in completed)  # grew one line at a time
    assert batch.request_counts.total == 6 and batch.request_counts.completed == 6
    assert batch.request_counts.failed == 0 and batch.error_file_id is None and batch.errors is None
    assert batch.metadata == {"run": "t1"} and batch.model == "fake-model"
    assert batch.created_at <= batch.in_progress_at <= batch.finalizing_at <= batch.completed_at
    results = [json.loads(text) for text in output.decode().splitlines()]
    assert sorted(r["custom_id"] for r in results) == sorted(item["custom_id"] for item in lines)
    for result in results:
        assert set(result) == {"id", "custom_id", "response", "error"} and result["error"] is None
        assert result["id"].startswith("batch_req_") and result["response"]["status_code"] == 200
        body = result["response"]["body"]
        assert body["object"] == "chat.completion" and body["usage"]["prompt_tokens"] == 3
    stats = fake.stats()
    assert stats["requests"] == 0 and stats["statuses"] == {}  # batch lines are not chat requests
    assert stats["batches"].pop("route_calls")["create"] == 1
    assert stats["batches"] == {"created": 1, "files_uploaded": 1, "lines_answered": 6, "lines_failed": 0,
                                "lines_expired": 0, "lines_billed": 6, "billed_prompt_tokens": 18,
                                "billed_completion_tokens": 18, "by_status": {"completed": 1}}
    by_id = {r["custom_id"]: r["response"]["body"] for r in results}
    status, raw = call(fake, "POST", "/v1/chat/completions", lines[2]["body"])  # the same body, asked directly
    assert status == 200
    direct = json.loads(raw)
    assert direct["choices"] == by_id["item-2"]["choices"] and direct["usage"] == by_id["item-2"]["usage"]


def test_files_routes_and_no_v1_prefix(fake: FakeProvider) -> None:
    data = jsonl([line("a", "hello")])
    status, stored = upload(fake, data, prefix="")
    assert status == 200 and stored["object"] == "file" and stored["id"].startswith("file-")
    assert {"bytes": len(data), "filename": "input.jsonl", "purpose": "batch", "status": "processed"}.items() \
        <= stored.items()
    for prefix in ("/v1", ""):
        assert json.loads(call(fake, "GET", f"{prefix}/files/{stored['id']}")[1]) == stored
        assert call(fake, "GET", f"{prefix}/files/{stored['id']}/content") == (200, data)
    status, raw = call(fake, "POST", "/batches", {"input_file_id": stored["id"], "endpoint": ENDPOINT,
                                                  "completion_window": "24h"})
    assert status == 200
    assert wait_batch(fake, json.loads(raw)["id"])["status"] == "completed"
    assert json.loads(call(fake, "DELETE", f"/v1/files/{stored['id']}")[1])["deleted"] is True
    status, raw = call(fake, "GET", f"/v1/files/{stored['id']}")
    assert status == 404 and json.loads(raw)["error"]["code"] == "not_found"


# --------------------------------------------------------------------------- validation

@pytest.mark.parametrize(("lines", "config", "code", "line_no"), [
    ([line("a", "x"), "this is not json", line("c", "y")], {}, "invalid_json_line", 2),
    ([line("a", "x"), {k: v for k, v in line("b", "y").items() if k != "custom_id"}], {},
     "missing_required_parameter", 2),
    ([line("a", "x"), line("b", "y"), line("a", "z")], {}, "duplicate_custom_id", 3),
    ([line("a", "x"), {**line("b", "y"), "url": "/v1/embeddings"}], {}, "url_mismatch", 2),
    ([line("a", "x"), line("b", "y", model="other-model")], {}, "model_mismatch", 2),
    ([line(f"i{n}", "x") for n in range(4)], {"batch_max_requests": 3}, "too_many_tasks", None),
    ([line(f"i{n}", "some longer text") for n in range(4)], {"batch_max_bytes": 200}, "file_too_large", None),
    ([], {}, "empty_file", None),
])
def test_a_bad_input_file_fails_the_batch_with_errors(fake: FakeProvider, lines: list[Any], config: dict[str, Any],
                                                      code: str, line_no: int | None) -> None:
    fake.configure(batch_delays_s={"validating": 0.05}, **config)
    batch = submit(fake, lines)
    assert batch["status"] == "validating" and batch["errors"] is None
    batch = wait_batch(fake, batch["id"])
    assert batch["status"] == "failed" and batch["failed_at"] is not None
    assert batch["errors"]["object"] == "list"
    error = batch["errors"]["data"][0]
    assert error["code"] == code and error["line"] == line_no and error["message"]
    assert batch["output_file_id"] is None and batch["error_file_id"] is None
    assert fake.stats()["batches"]["lines_answered"] == 0


def test_create_refusals(fake: FakeProvider) -> None:
    status, stored = upload(fake, jsonl([line("a", "x")]))
    good = {"input_file_id": stored["id"], "endpoint": ENDPOINT, "completion_window": "24h"}
    for change, expected in [({"input_file_id": "file-nope"}, 404), ({"endpoint": "/v1/embeddings"}, 400),
                             ({"completion_window": "1h"}, 400), ({"metadata": {"n": 1}}, 400)]:
        status, raw = call(fake, "POST", "/v1/batches", {**good, **change})
        assert status == expected, (change, raw)
        assert json.loads(raw)["error"]["message"]
    status, other = upload(fake, b"{}", purpose="assistants")
    status, raw = call(fake, "POST", "/v1/batches", {**good, "input_file_id": other["id"]})
    assert status == 400 and "purpose" in json.loads(raw)["error"]["message"]
    assert fake.stats()["batches"]["created"] == 0


# --------------------------------------------------------------------------- partial failures, expiry, cancel

def test_partial_failures_go_to_the_error_file(fake: FakeProvider) -> None:
    fake.configure(replies=[{"match": "forbidden", "status": 403}, {"match": "capital", "content": "Paris"}],
                   batch_fail_match=["explode"], batch_fail_status=503)
    batch = submit(fake, [line("ok", "the capital of France"), line("denied", "this is forbidden"),
                          line("boom", "please explode"), line("fine", "plain question")])
    batch = wait_batch(fake, batch["id"])
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
    outputs = {r["custom_id"]: r for r in file_lines(fake, batch["output_file_id"])}
    errors = {r["custom_id"]: r for r in file_lines(fake, batch["error_file_id"])}
    assert set(outputs) == {"ok", "fine"} and set(errors) == {"denied", "boom"}
    assert outputs["ok"]["response"]["body"]["choices"][0]["message"]["content"] == "Paris"
    for custom_id, status in (("denied", 403), ("boom", 503)):
        result = errors[custom_id]
        assert result["error"] is None and result["response"]["status_code"] == status
        assert result["response"]["request_id"] and {"message", "type", "code"} <= set(
            result["response"]["body"]["error"])
    assert "batch_fail_match 'explode'" in errors["boom"]["response"]["body"]["error"]["message"]
    stats = fake.stats()
    assert stats["batches"]["lines_answered"] == 4 and stats["batches"]["lines_failed"] == 2
    assert stats["requests"] == 0 and stats["statuses"] == {}


def test_served_models_and_seeded_fail_rate_apply_to_lines(fake: FakeProvider) -> None:
    fake.configure(served_models=["fake-model"])
    batch = wait_batch(fake, submit(fake, [line("a", "x", model="unknown-model")])["id"])
    [result] = file_lines(fake, batch["error_file_id"])
    assert result["response"]["status_code"] == 404 and batch["output_file_id"] is None

    def failed_ids() -> list[str]:
        fake.configure(reset=True, batch_fail_rate=0.5, seed=11)
        done = wait_batch(fake, submit(fake, [line(f"r{n}", f"q{n}") for n in range(20)])["id"])
        return sorted(r["custom_id"] for r in file_lines(fake, done["error_file_id"]))

    first = failed_ids()
    assert 0 < len(first) < 20 and first == failed_ids()


def test_expiry_sends_the_unanswered_lines_to_the_error_file(fake: FakeProvider) -> None:
    fake.configure(batch_expire_after=2)
    batch = wait_batch(fake, submit(fake, [line(f"e{n}", f"q{n}") for n in range(5)])["id"])
    assert batch["status"] == "expired" and batch["expired_at"] is not None and batch["completed_at"] is None
    assert batch["request_counts"] == {"total": 5, "completed": 2, "failed": 0}
    assert [r["custom_id"] for r in file_lines(fake, batch["output_file_id"])] == ["e0", "e1"]
    expired = file_lines(fake, batch["error_file_id"])
    assert [r["custom_id"] for r in expired] == ["e2", "e3", "e4"]
    for result in expired:
        assert result["response"] is None and result["error"]["code"] == "batch_expired" and result["error"]["message"]
    assert fake.stats()["batches"]["lines_expired"] == 3


def test_cancel_through_litellm(fake: FakeProvider) -> None:
    fake.configure(batch_line_ms=60, batch_delays_s={"cancelling": 2.0})  # a retrieve through LiteLLM sees it
    batch = submit(fake, [line(f"c{n}", f"q{n}") for n in range(40)])
    wait_batch(fake, batch["id"], lambda b: b["request_counts"]["completed"] >= 2)
    kwargs = litellm_kwargs(fake)
    cancelling = asyncio.run(litellm.acancel_batch(batch_id=batch["id"], **kwargs))
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    assert asyncio.run(litellm.aretrieve_batch(batch_id=batch["id"], **kwargs)).status == "cancelling"
    batch = wait_batch(fake, batch["id"], timeout=60)
    assert batch["status"] == "cancelled" and batch["cancelled_at"] is not None
    answered = file_lines(fake, batch["output_file_id"])
    assert 2 <= len(answered) == batch["request_counts"]["completed"] < 40
    assert [r["custom_id"] for r in answered] == [f"c{n}" for n in range(len(answered))]
    status, raw = call(fake, "POST", f"/v1/batches/{batch['id']}/cancel")
    assert status == 409 and "cancelled" in json.loads(raw)["error"]["message"]
    assert fake.stats()["batches"]["by_status"] == {"cancelled": 1}


# --------------------------------------------------------------------------- list, support, auth, reset

def test_list_newest_first_with_cursor(fake: FakeProvider) -> None:
    ids = [submit(fake, [line("a", f"x{n}")])["id"] for n in range(3)]
    page = asyncio.run(litellm.alist_batches(limit=2, **litellm_kwargs(fake)))
    assert [b.id for b in page.data] == [ids[2], ids[1]] and page.has_more is True
    status, raw = call(fake, "GET", f"/v1/batches?limit=2&after={ids[1]}")
    rest = json.loads(raw)
    assert status == 200 and [b["id"] for b in rest["data"]] == [ids[0]] and rest["has_more"] is False
    assert rest["first_id"] == rest["last_id"] == ids[0] and rest["object"] == "list"
    everything = json.loads(call(fake, "GET", "/batches")[1])
    assert [b["id"] for b in everything["data"]] == ids[::-1] and everything["first_id"] == ids[2]
    assert call(fake, "GET", "/v1/batches?limit=0")[0] == 400


def test_batches_unsupported_answers_404_everywhere(fake: FakeProvider) -> None:
    fake.configure(batches_supported=False)
    with pytest.raises(openai.NotFoundError):
        asyncio.run(litellm.acreate_file(file=("in.jsonl", b"{}"), purpose="batch", **litellm_kwargs(fake)))
    for prefix in ("/v1", ""):
        for method, path in [("GET", "/files/f"), ("GET", "/files/f/content"), ("POST", "/batches"),
                             ("GET", "/batches"), ("GET", "/batches/b"), ("POST", "/batches/b/cancel")]:
            status, raw = call(fake, method, prefix + path, {})
            assert status == 404 and "no Batch API" in json.loads(raw)["error"]["message"], (method, path)
        assert upload(fake, b"{}", prefix=prefix)[0] == 404
    assert fake.stats()["batches"]["files_uploaded"] == 0 and fake.stats()["statuses"] == {}


def test_require_key_guards_the_batch_routes(fake: FakeProvider) -> None:
    fake.configure(require_key="sk-batch")
    assert upload(fake, jsonl([line("a", "x")]))[0] == 401
    assert call(fake, "GET", "/v1/batches", headers={"Authorization": "Bearer wrong"})[0] == 401
    status, stored = upload(fake, jsonl([line("a", "x")]), headers={"Authorization": "Bearer sk-batch"})
    assert status == 200
    with pytest.raises(openai.AuthenticationError):
        asyncio.run(litellm.afile_retrieve(file_id=stored["id"], **litellm_kwargs(fake)))
    kwargs = {**litellm_kwargs(fake), "api_key": "sk-batch"}
    assert asyncio.run(litellm.afile_retrieve(file_id=stored["id"], **kwargs)).id == stored["id"]
    assert fake.stats()["statuses"] == {} and fake.stats()["requests"] == 0


def test_reset_drops_files_batches_and_counters(fake: FakeProvider) -> None:
    fake.configure(batch_delays_s={"validating": 30})  # still validating when reset cancels it
    batch = submit(fake, [line("a", "x")])
    assert fake.stats()["batches"]["by_status"] == {"validating": 1}
    fake.reset()
    assert call(fake, "GET", f"/v1/batches/{batch['id']}")[0] == 404
    assert call(fake, "GET", f"/v1/files/{batch['input_file_id']}")[0] == 404
    after = fake.stats()["batches"]
    assert after.pop("route_calls") == {"get_batch": 1, "get_file": 1}, "counted afresh since the reset"
    assert after == {"created": 0, "files_uploaded": 0, "lines_answered": 0, "lines_failed": 0,
                     "lines_expired": 0, "lines_billed": 0, "billed_prompt_tokens": 0, "billed_completion_tokens": 0,
                     "by_status": {}}


@pytest.mark.parametrize("config", [
    {"batch_delays_s": {"queued": 1}}, {"batch_delays_s": {"validating": -1}}, {"batch_fail_status": 200},
    {"batch_fail_rate": 1.5}, {"batch_fail_match": "boom"}, {"batch_expire_after": -1},
    {"batch_max_requests": 0}, {"batches_supported": "no"}, {"tokenizer": "gpt2"}, {"batch_line_ms": -5},
    {"batch_duplicate_lines": -1}, {"batch_unknown_lines": "2"}, {"batch_unreadable_lines": 1.5},
    {"batch_drop_metadata": 1},
])
def test_bad_batch_config_is_refused(fake: FakeProvider, config: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError, match=next(iter(config))):
        fake.configure(**config)


# --------------------------------------------------------------------------- token counting

MESSAGE_LISTS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "hello"}],
    [{"role": "system", "content": "You are a strict judge."},
     {"role": "user", "content": "Grade this answer: the capital of France is Paris. " * 60}],
    [{"role": "user", "name": "alice", "content": [{"type": "text", "text": "part one"},
                                                   {"type": "text", "text": "ünïcödé 日本語 <|endoftext|>"}]},
     {"role": "assistant", "content": "ok"}, {"role": "user", "content": "x" * 2500 + " y" * 600}],
]


@pytest.mark.parametrize(("tokenizer", "model"), [("o200k", "gpt-4o-mini"), ("cl100k", "gpt-4")])
def test_token_usage_equals_litellm_token_counter_offline(monkeypatch: pytest.MonkeyPatch, tokenizer: str,
                                                          model: str) -> None:
    with monkeypatch.context() as env:  # the fake finds LiteLLM's bundled encodings itself; any download fails
        env.delenv("TIKTOKEN_CACHE_DIR", raising=False)
        env.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        env.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        provider = FakeProvider(tokenizer=tokenizer).start()
    with provider:
        lines = []
        for n, messages in enumerate(MESSAGE_LISTS):
            status, raw = call(provider, "POST", "/v1/chat/completions", {"model": model, "messages": messages})
            usage = json.loads(raw)["usage"]
            content = json.loads(raw)["choices"][0]["message"]["content"]
            assert status == 200
            assert usage["prompt_tokens"] == litellm.token_counter(model=model, messages=messages)
            assert usage["completion_tokens"] == litellm.token_counter(model=model, text=content)
            lines.append({"custom_id": f"m{n}", "method": "POST", "url": ENDPOINT,
                          "body": {"model": model, "messages": messages}, "_usage": usage})
        batch = wait_batch(provider, submit(provider, [{k: v for k, v in item.items() if k != "_usage"}
                                                       for item in lines])["id"])
        outputs = file_lines(provider, batch["output_file_id"])
        results = {r["custom_id"]: r["response"]["body"]["usage"] for r in outputs}
        assert results == {item["custom_id"]: item["_usage"] for item in lines}  # batch lines count alike


def test_batch_route_fail_fails_the_first_calls_of_a_route_and_create_lost_still_creates(fake):
    fake.configure(batch_route_fail={"get_batch": 2, "create_lost": 1})
    status, stored = upload(fake, jsonl([line("a", "hello")]))
    assert status == 200
    status, raw = call(fake, "POST", "/v1/batches", {"input_file_id": stored["id"], "endpoint": ENDPOINT,
                                                     "completion_window": "24h"})
    assert status == 503 and b"lost" in raw, "the creator hears a server error ..."
    [made] = json.loads(call(fake, "GET", "/v1/batches")[1])["data"]
    assert fake.stats()["batches"]["created"] == 1, "... but the batch exists"
    assert [call(fake, "GET", f"/v1/batches/{made['id']}")[0] for _ in range(3)] == [503, 503, 200]
    with pytest.raises(RuntimeError, match="batch_route_fail must map some of"):
        fake.configure(batch_route_fail={"poll": 1})


def test_faulty_output_files_on_demand_and_every_answered_line_billed(fake):
    fake.configure(batch_duplicate_lines=1, batch_unknown_lines=2, batch_unreadable_lines=1, batch_drop_metadata=True)
    status, stored = upload(fake, jsonl([line("a", "one two"), line("b", "three"), line("c", "four")]))
    assert status == 200
    status, raw = call(fake, "POST", "/v1/batches", {"input_file_id": stored["id"], "endpoint": ENDPOINT,
                                                     "completion_window": "24h", "metadata": {"run": "t"}})
    assert status == 200 and json.loads(raw)["metadata"] is None, "batch_drop_metadata keeps none"
    batch = wait_batch(fake, json.loads(raw)["id"])
    assert batch["status"] == "completed" and batch["request_counts"]["completed"] == 3
    status, data = call(fake, "GET", f"/v1/files/{batch['output_file_id']}/content")
    raw_lines = data.decode().splitlines()
    unreadable = []
    readable = []
    for text in raw_lines:
        try:
            readable.append(json.loads(text))
        except ValueError:
            unreadable.append(text)
    assert len(unreadable) == 1 and '"custom_id": "a"' in unreadable[0] and '"usage": {' in unreadable[0]
    ids = [r["custom_id"] for r in readable]
    assert ids == ["a", "b", "c", "unknown-1", "unknown-2"], "a answered twice (once unreadable), 2 of no request"
    assert readable[0]["response"]["body"]["choices"][0]["message"]["content"].endswith("(again)")
    stats = fake.stats()["batches"]
    assert stats["lines_answered"] == 3 and stats["lines_billed"] == 6, "extra lines are billed too"
    assert stats["billed_prompt_tokens"] == batch["usage"]["input_tokens"]
