"""The fake provider as a reasoning model, on demand: thinking in ``reasoning_content`` or inline in the content,
billed as output, scaled by ``reasoning_effort``, its text starting ``fake reasoning`` (docs/tests.md)."""

from __future__ import annotations

from typing import Any

from bench.testing.fake_provider.replies import load_encoding, text_tokens
from bench.testing.fake_provider.request_body import request_key

THINKING_DEFAULTS: dict[str, Any] = {
    "reasoning_content": False,  # true or [model, …]: `message.reasoning_content` + usage reasoning_tokens
    "think_tags": False,  # true or [model, …]: the content starts with <think>…</think> (inline, open models)
    "think_markers": ["<think>", "</think>"],  # start and end of inline thinking; start "" writes the end only
    "reasoning_words": 24,  # words of thinking at reasoning_effort medium (or none given)
}
EFFORT_SCALE = {"minimal": 0.25, "low": 0.5, "medium": 1.0, "high": 2.0}
MARK = "fake reasoning"  # how every fake thinking text starts


def _thinks(knob: Any, model: str) -> bool:
    return knob is True or (isinstance(knob, list) and model in knob)


def thinking_text(cfg: dict[str, Any], body: dict[str, Any]) -> str:
    """Return the request's fake thinking: ``fake reasoning <hash>`` and as many words as its effort asks."""
    scale = EFFORT_SCALE.get(str(body.get("reasoning_effort") or "medium"), 1.0)
    n = max(3, round(cfg["reasoning_words"] * scale))
    return " ".join([MARK, request_key(body)[:12], *(["hmm"] * (n - 3))])


def with_thinking(cfg: dict[str, Any], body: dict[str, Any], content: str) -> tuple[str, str | None]:
    """Return (content, reasoning_content) of a reply, its thinking inline (``think_tags``), apart, or neither."""
    model = str(body.get("model") or "fake-model")
    inline, apart = _thinks(cfg["think_tags"], model), _thinks(cfg["reasoning_content"], model)
    if not (inline or apart) or body.get("_thinks") is False:  # a native wire's request may turn thinking off
        return content, None
    text = thinking_text(cfg, body)
    if inline:
        start, end = cfg["think_markers"]
        content = f"{start}{text}{end}\n\n{content}" if start else f"{text}\n{end}\n\n{content}"
    return content, text if apart else None


def assistant(content: str, reasoning: str | None) -> dict[str, Any]:
    """Return the reply's message: its content, and its thinking as ``reasoning_content`` when it has one apart."""
    message = {"role": "assistant", "content": content}
    return {**message, "reasoning_content": reasoning} if reasoning else message


def billed_thinking(used: dict[str, Any], reasoning: str | None, cfg: dict[str, Any]) -> dict[str, Any]:
    """Return a reply's usage with its separate thinking billed as output (completion and reasoning tokens)."""
    if not reasoning:
        return used
    encoding = load_encoding(cfg["tokenizer"])
    n = len(reasoning.split()) if encoding is None else text_tokens(encoding, reasoning)
    return {**used, "completion_tokens": used["completion_tokens"] + n, "total_tokens": used["total_tokens"] + n,
            "completion_tokens_details": {"reasoning_tokens": n}}
