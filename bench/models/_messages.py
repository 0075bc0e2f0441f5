"""What a request says, read one way for every reader: a message's text, its prompt and its output limit."""

from __future__ import annotations

from typing import Any

OUTPUT_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "maxOutputTokens", "num_predict")


def message_text(message: Any) -> str:
    """Return a chat message's text: its string content, or the text parts of a multi-part content joined."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return " ".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def output_limit(body: dict[str, Any]) -> int | None:
    """Return the request's output-token limit, under whichever name its provider spells it, or None."""
    for name in OUTPUT_LIMITS:  # a plain loop: every reply asks (a generator costs twice as much)
        value = body.get(name)
        if isinstance(value, int):
            return value
    return None


def prompt_messages(body: dict[str, Any]) -> list[Any]:
    """Return a request's prompt as messages (an embeddings request's ``input`` texts as user messages)."""
    if "input" in body:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return [{"role": "user", "content": str(t)} for t in texts]
    return body.get("messages") or []
