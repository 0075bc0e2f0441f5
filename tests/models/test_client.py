"""The LLM seam, through the real code path (bench's HTTP client, or LiteLLM itself) against the loopback fake provider."""

import asyncio
import json
import socket
import time

import jsonschema
import pytest

from bench.core.errors import PreflightError, ProviderError
from bench.models.client import LLM, Limits
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec
from bench.run import open_run
from bench.stage_runs import make_llm
from bench.testing.grids import grid

FAST = dict(backoff_s=0.01, backoff_max_s=0.05, timeout_s=5)
TRANSPORTS = ["direct", "litellm"]


def spec(fake, transport="direct", **kw):
    return ModelSpec("openai/fake-model", api_base=fake.url, transport=transport, params={"max_tokens": 16}, **kw)


def ask(llm, s, n, tag="q", **kw):
    """Send n distinct requests concurrently; return the completions (exceptions included)."""
    async def go():
        try:
            return await asyncio.gather(*(llm.complete(s, [{"role": "user", "content": f"{tag} {i}"}], **kw)
                                          for i in range(n)), return_exceptions=True)
        finally:
            await llm.aclose()
    return asyncio.run(go())


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cap_is_never_exceeded(fake, transport):
    fake.configure(latency_ms=150)
    llm = LLM(Limits(max_concurrency=6, **FAST))
    out = ask(llm, spec(fake, transport), 30)
    assert all(not isinstance(o, Exception) for o in out)
    stats = fake.stats()
    assert stats["requests"] == 30
    assert stats["peak_in_flight"] <= 6
    assert stats["peak_in_flight"] >= 5  # the cap is used, not just respected


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_twenty_percent_429s_lose_nothing(fake, transport):
    fake.configure(rate_429=0.2, retry_after_s=0.01, seed=3)
    llm = LLM(Limits(max_concurrency=16, retries=8, **FAST))
    out = ask(llm, spec(fake, transport), 100)
    assert [type(o).__name__ for o in out if isinstance(o, Exception)] == []
    stats = fake.stats()
    assert stats["statuses"].get("429", 0) >= 10
    assert stats["statuses"]["200"] == 100
    assert sum(o.usage.attempts for o in out) == stats["requests"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_hang_times_out_and_is_retried(fake, transport):
    fake.configure(fail_first=0, rate_hang=0.5, hang_s=30, seed=1)
    llm = LLM(Limits(max_concurrency=8, retries=8, backoff_s=0.01, backoff_max_s=0.05, timeout_s=0.5))
    t0 = time.monotonic()
    out = ask(llm, spec(fake, transport), 8)
    assert all(not isinstance(o, Exception) for o in out), out
    assert fake.stats()["faults"]["hang"] >= 1
    assert max(o.usage.attempts for o in out) >= 2
    assert time.monotonic() - t0 < 20


def test_cache_hit_makes_no_request(fake, tmp_path):
    cache = str(tmp_path / "responses")
    first = ask(LLM(Limits(**FAST), cache=cache), spec(fake), 5)
    again = ask(LLM(Limits(**FAST), cache=cache), spec(fake), 5)  # a new process would see the same file
    assert fake.stats()["requests"] == 5
    assert [a.text for a in again] == [f.text for f in first]
    assert all(a.usage.cached for a in again) and not any(f.usage.cached for f in first)


def test_samples_are_distinct_cache_entries(fake, tmp_path):
    llm = LLM(Limits(**FAST), cache=str(tmp_path / "c.sqlite"))
    msgs = [{"role": "user", "content": "same"}]

    async def go():
        out = [await llm.complete(spec(fake), msgs, sample=i) for i in (0, 1, 0)]
        await llm.aclose()
        return out

    out = asyncio.run(go())
    assert fake.stats()["requests"] == 2
    assert out[2].usage.cached


def test_failures_are_not_cached(fake, tmp_path):
    fake.configure(replies=[{"match": "boom", "content": "x", "status": 500}])
    cache = str(tmp_path / "c.sqlite")
    llm = LLM(Limits(retries=1, **FAST), cache=cache)
    (err,) = ask(llm, spec(fake), 1, tag="boom")
    assert isinstance(err, ProviderError) and err.kind == "server" and err.attempts == 2
    fake.configure(replies=[])
    (ok,) = ask(LLM(Limits(**FAST), cache=cache), spec(fake), 1, tag="boom")
    assert not ok.usage.cached and ok.text


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("status,kind", [(400, "bad_request"), (401, "auth"), (404, "not_found")])
def test_errors_that_cannot_succeed_are_not_retried(fake, transport, status, kind):
    fake.configure(replies=[{"match": "q", "content": "", "status": status}])
    (err,) = ask(LLM(Limits(retries=5, **FAST)), spec(fake, transport), 1)
    assert isinstance(err, ProviderError)
    assert (err.kind, err.status, err.retryable) == (kind, status, False)
    assert fake.stats()["requests"] == 1


def test_retry_after_is_honoured(fake):
    fake.configure(fail_first=1, fail_status=429, retry_after_s=0.4)
    t0 = time.monotonic()
    (ok,) = ask(LLM(Limits(retries=3, **FAST)), spec(fake), 1)
    assert ok.usage.attempts == 2
    assert time.monotonic() - t0 >= 0.4


@pytest.mark.parametrize("fault", ["rate_malformed", "rate_reset", "rate_500"])
def test_transient_faults_are_retried_to_success(fake, fault):
    fake.configure(**{fault: 0.4, "seed": 5})
    out = ask(LLM(Limits(max_concurrency=8, retries=10, **FAST)), spec(fake), 20)
    assert [o for o in out if isinstance(o, Exception)] == []
    assert fake.stats()["requests"] > 20


def test_empty_content_is_a_retried_failure_never_an_answer(fake):
    fake.configure(rate_empty=1.0)
    (err,) = ask(LLM(Limits(retries=2, **FAST)), spec(fake), 1)
    assert isinstance(err, ProviderError) and err.kind == "empty" and err.attempts == 3


def test_json_schema_reaches_the_server_and_the_reply_validates(fake):
    schema = {"type": "object", "required": ["score", "why"], "additionalProperties": False,
              "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "why": {"type": "string"}}}
    rf = {"type": "json_schema", "json_schema": {"name": "grade", "schema": schema, "strict": True}}
    (out,) = ask(LLM(Limits(**FAST)), spec(fake), 1, response_format=rf)
    jsonschema.validate(json.loads(out.text), schema)
    assert fake.stats()["recent"][-1]["response_format"] == rf


def test_usage_latency_and_unknown_cost(fake):
    (out,) = ask(LLM(Limits(**FAST)), spec(fake), 1)
    u = out.usage
    assert u.prompt_tokens >= 1 and u.completion_tokens >= 1 and u.latency_s > 0
    assert u.cost_usd is None  # a self-hosted api_base has no known price: unknown, not a crash
    (priced,) = ask(LLM(Limits(**FAST)), spec(fake, price=(1.0, 2.0)), 1, tag="priced")
    pu = priced.usage
    assert pu.cost_usd == pytest.approx((pu.prompt_tokens * 1.0 + pu.completion_tokens * 2.0) / 1e6)


def test_rpm_cap_spaces_requests(fake):
    llm = LLM(Limits(max_concurrency=50, rate_window_s=0.6, **FAST))
    t0 = time.monotonic()
    out = ask(llm, spec(fake, rpm=4), 8)
    assert all(not isinstance(o, Exception) for o in out)
    assert time.monotonic() - t0 >= 0.6  # the second four waited for the window


def test_key_comes_from_the_named_variable_and_is_never_recorded(fake, monkeypatch):
    fake.configure(require_key="canary-key-123")
    monkeypatch.setenv("BENCH_TEST_KEY", "wrong")
    (err,) = ask(LLM(Limits(**FAST)), spec(fake, api_key_env="BENCH_TEST_KEY"), 1)
    assert isinstance(err, ProviderError) and err.kind == "auth"
    assert "canary" not in str(err) and "wrong" not in str(err)
    monkeypatch.setenv("BENCH_TEST_KEY", "canary-key-123")
    (ok,) = ask(LLM(Limits(**FAST)), spec(fake, api_key_env="BENCH_TEST_KEY"), 1, tag="k")
    assert ok.text and "canary" not in repr(ok)
    assert all("canary" not in json.dumps(body) for body in fake.stats()["recent"])


def test_preflight_names_every_missing_key(monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_TEAM_KEY"):
        monkeypatch.delenv(var, raising=False)
    specs = [ModelSpec("openai/gpt-4o-mini"), ModelSpec("anthropic/claude-3-5-sonnet-20240620"),
             ModelSpec("openrouter/meta-llama/llama-3-8b-instruct", api_key_env="MY_TEAM_KEY")]
    with pytest.raises(PreflightError) as info:
        preflight(specs)
    msg = str(info.value)
    assert len(info.value.problems) == 3
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_TEAM_KEY", "gpt-4o-mini", "claude-3-5-sonnet"):
        assert name in msg


def test_preflight_passes_when_keys_and_servers_are_there(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    preflight([ModelSpec("openai/gpt-4o-mini"), spec(fake)])


def test_bad_api_base_fails_fast_with_its_address():
    base = f"http://127.0.0.1:{closed_port()}/v1"
    t0 = time.monotonic()
    with pytest.raises(PreflightError, match=base.replace(".", r"\.")):
        preflight([ModelSpec("openai/local-thing", api_base=base)])
    (err,) = ask(LLM(Limits(retries=4, backoff_s=1.0)), ModelSpec("openai/x", api_base=base), 1)
    assert isinstance(err, ProviderError) and base in str(err) and err.attempts == 1
    assert time.monotonic() - t0 < 5


def test_unknown_model_string_is_named():
    with pytest.raises(PreflightError, match="nonsense-model"):
        preflight([ModelSpec("nonsense-model")])


def test_an_immediate_repeat_is_answered_before_the_group_commit(fake, tmp_path):
    llm = LLM(Limits(**FAST), cache=str(tmp_path / "c.sqlite"))
    msgs = [{"role": "user", "content": "twice"}]

    async def go():
        first = await llm.complete(spec(fake), msgs)
        again = await llm.complete(spec(fake), msgs)  # within the 10 ms commit window
        await llm.aclose()
        return first, again

    first, again = asyncio.run(go())
    assert again.usage.cached and again.text == first.text
    assert fake.stats()["requests"] == 1


def test_replies_are_committed_even_if_the_process_exits_without_closing(fake, tmp_path):
    import subprocess
    import sys
    code = ("import asyncio, sys\nfrom bench.models.client import LLM, Limits\nfrom bench.models.routing import ModelSpec\n"
            "llm = LLM(Limits(), cache=sys.argv[2])\n"
            "spec = ModelSpec('openai/fake-model', api_base=sys.argv[1])\n"
            "print(asyncio.run(llm.complete(spec, [{'role': 'user', 'content': 'exit early'}])).usage.cached)\n")
    cache = str(tmp_path / "c.sqlite")
    runs = [subprocess.run([sys.executable, "-c", code, fake.url, cache], capture_output=True, text=True)
            for _ in range(2)]
    assert [r.stdout.strip() for r in runs] == ["False", "True"], runs[0].stderr
    assert fake.stats()["requests"] == 1


def test_a_model_cap_holds_under_a_larger_global_cap(fake):
    fake.configure(latency_ms=150)
    out = ask(LLM(Limits(max_concurrency=20, **FAST)), spec(fake, max_concurrency=3), 12)
    assert all(not isinstance(o, Exception) for o in out)
    assert fake.stats()["peak_in_flight"] == 3


def test_every_limits_knob_of_a_params_file_reaches_the_client(tmp_path, fake):
    """One Limits: what `limits:` says (backoff, retry budget, rate window) is what the client uses."""
    knobs = {"max_concurrency": 3, "timeout_s": 7, "retries": 2, "backoff_s": 0.02, "backoff_max_s": 0.1,
             "retry_budget_s": 9, "rate_window_s": 5}
    run = open_run(grid(tmp_path / "p.yaml", fake.url, limits=knobs))
    assert make_llm(run).limits.model_dump(include=set(knobs)) == knobs
    assert make_llm(run, max_concurrency=1).limits.max_concurrency == 1


def test_a_retry_after_the_client_was_closed_gets_a_fresh_session_not_the_closed_one(fake):
    """A request that outlives ``aclose`` (a late task of a stage) retries on a session of its own: the closed
    one would fail it with aiohttp's "Session is closed", which is no provider failure."""
    fake.configure(rate_429=1.0, retry_after_s=1.5)
    llm = LLM(Limits(max_concurrency=4, retries=2, **FAST))

    async def go():
        task = asyncio.create_task(llm.complete(spec(fake), [{"role": "user", "content": "outlives its client"}]))
        for _ in range(500):  # the first attempt answered 429: the request now waits out Retry-After
            if (await asyncio.to_thread(fake.stats))["requests"] >= 1:
                break
            await asyncio.sleep(0.01)
        fake.configure(rate_429=0)
        await llm.aclose()  # the stage ends while its request waits to retry
        try:
            return await asyncio.wait_for(task, 30)
        finally:
            await llm.aclose()  # the session the retry opened

    comp = asyncio.run(go())
    assert comp.text and comp.usage.attempts == 2
