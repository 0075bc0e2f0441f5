"""The fake provider's native wires, spoken by hand (no LiteLLM): what the sweep through LiteLLM does not reach, each
wire's errors and keys, cache writes under ``cache_control``, thoughts hidden without ``includeThoughts``."""

from __future__ import annotations

import json

from tests.testing.test_fake_provider import post

CLAUDE = "/v1/messages"
GEMINI = "/v1beta/models/gemini-2.5-flash:generateContent"
LONG = " ".join(f"w{i}" for i in range(2100))  # two 1,024-word blocks


def claude(text: str, **extra) -> dict:
    return {"model": "claude-haiku-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": text}], **extra}


def gemini(text: str, **config) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], "generationConfig": config}


def test_each_wire_answers_its_errors_in_its_own_form_with_retry_after(fake):
    fake.configure(fail_first=1, fail_status=429, retry_after_s=2)
    status, headers, raw = post(fake, claude("hi"), path=CLAUDE)
    assert (status, headers.get("Retry-After"), json.loads(raw)) == (429, "2", {"type": "error", "error": {
        "type": "rate_limit_error", "message": "fake failure (fail_first=1)"}})
    fake.configure(fail_first=0, rate_500=1.0)
    status, headers, raw = post(fake, claude("hi"), path=CLAUDE)
    assert (status, headers.get("Retry-After"), json.loads(raw)["error"]["type"]) == (529, "2", "overloaded_error")
    status, _, raw = post(fake, gemini("hi"), path=GEMINI)
    assert (status, json.loads(raw)["error"]["status"]) == (503, "UNAVAILABLE")
    fake.configure(rate_500=0.0, require_key="sk-wire-key-0123456")
    assert post(fake, claude("hi"), path=CLAUDE)[0] == 401
    assert post(fake, claude("hi"), {"x-api-key": "sk-wire-key-0123456"}, path=CLAUDE)[0] == 200
    assert post(fake, gemini("hi"), {"x-goog-api-key": "sk-wire-key-0123456"}, path=GEMINI)[0] == 200


def test_a_cache_breakpoint_reports_the_blocks_written_then_read(fake):
    marked = claude("q", system=[{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}])
    first, second = (json.loads(post(fake, marked, path=CLAUDE)[2])["usage"] for _ in range(2))
    assert (first["cache_creation_input_tokens"], first["cache_read_input_tokens"]) == (2048, 0)
    assert (second["cache_creation_input_tokens"], second["cache_read_input_tokens"]) == (0, 2048)
    assert first["input_tokens"] == second["input_tokens"] == 2101 - 2048  # 2,100 words and "q", less the cache's
    other = json.loads(post(fake, {**marked, "model": "claude-opus-4-5"}, path=CLAUDE)[2])["usage"]
    assert other["cache_read_input_tokens"] == 0  # each model has a cache of its own
    assert fake.stats()["billed"]["cached_tokens"] == 2048


def test_gemini_thinks_unless_its_budget_is_zero_and_shows_thoughts_only_when_asked(fake):
    fake.configure(reasoning_content=["gemini-2.5-flash"])
    hidden = json.loads(post(fake, gemini("a"), path=GEMINI)[2])
    shown = json.loads(post(fake, gemini("a", thinkingConfig={"includeThoughts": True}), path=GEMINI)[2])
    off = json.loads(post(fake, gemini("a", thinkingConfig={"thinkingBudget": 0}), path=GEMINI)[2])
    assert [p.get("thought", False) for p in hidden["candidates"][0]["content"]["parts"]] == [False]
    assert [p.get("thought", False) for p in shown["candidates"][0]["content"]["parts"]] == [True, False]
    assert hidden["usageMetadata"]["thoughtsTokenCount"] == shown["usageMetadata"]["thoughtsTokenCount"] > 0
    assert "thoughtsTokenCount" not in off["usageMetadata"]
