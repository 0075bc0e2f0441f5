"""Anthropic's Messages API (``POST /v1/messages``) on the fake provider: a request is read as the chat body the fake
answers, the reply written back as Anthropic's content blocks, usage and errors. JSON comes from a forced tool or
``output_format``; thinking only when the request enables it."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

NAME = "anthropic"
ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}
FAULTS = {"429": 429, "500": 529}  # an injected 500 is Anthropic's overload (529 overloaded_error)
STOPS = {"tool_calls": "tool_use", "length": "max_tokens"}


def auth(headers: Any) -> str | None:
    """Return the request's key as the fake compares it (``Bearer <key>``): Anthropic sends ``x-api-key``."""
    key = headers.get("x-api-key")
    return f"Bearer {key}" if key else headers.get("Authorization")


def error_body(status: int, message: str) -> dict[str, Any]:
    """Return Anthropic's error object for ``status``."""
    return {"type": "error", "error": {"type": ERRORS.get(status, "api_error"), "message": message}}


def to_chat(raw: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """Return the chat body the fake answers for an Anthropic request."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": _text(raw["system"])}] if raw.get("system") else []
    for message in raw.get("messages") or []:
        messages.extend(_turn(message) if isinstance(message, dict) else [message])
    body: dict[str, Any] = {"model": raw.get("model"), "messages": messages, "max_tokens": raw.get("max_tokens")}
    choice = raw.get("tool_choice") if isinstance(raw.get("tool_choice"), dict) else {}
    tools = [t for t in raw.get("tools") or [] if isinstance(t, dict)]
    forced = next((t for t in tools if choice.get("type") == "tool" and t.get("name") == choice.get("name")), None)
    if forced is not None:  # JSON through a forced tool: its input schema is the reply's schema
        body["_forced_tool"] = forced["name"]
        body["response_format"] = {"type": "json_schema", "json_schema": {"schema": forced.get("input_schema")}}
    fmt = raw.get("output_format") or (raw.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {"schema": fmt.get("schema")}}
    if calls := [t for t in tools if t is not forced]:
        body["tools"] = [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description"),
                                                           "parameters": t.get("input_schema")}} for t in calls]
    thinking = raw.get("thinking") if isinstance(raw.get("thinking"), dict) else {}
    if thinking.get("type") in ("enabled", "adaptive"):
        budget = thinking.get("budget_tokens") or 2048
        body["reasoning_effort"] = "low" if budget <= 1024 else "medium" if budget <= 2048 else "high"
        body["_invalid"] = _unsigned(raw.get("messages") or [])
    else:
        body["_thinks"] = False  # Claude thinks only when asked
    if '"cache_control"' in json.dumps([raw.get("system"), raw.get("messages"), raw.get("tools")]):
        body["_cache_control"] = True  # a cache breakpoint marked anywhere
    return body


def _turn(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Return one Anthropic message as chat messages: tool results first (role ``tool``), then its own parts."""
    content, role = message.get("content"), message.get("role")
    if not isinstance(content, list):
        return [{"role": role, "content": content}]
    parts, calls, results = [], [], []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            source = block.get("source") or {}
            url = (f"data:{source.get('media_type')};base64,{source.get('data')}" if source.get("type") == "base64"
                   else source.get("url"))
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif kind == "tool_use":
            calls.append({"id": block.get("id"), "type": "function", "function": {
                "name": block.get("name"), "arguments": json.dumps(block.get("input"))}})
        elif kind == "tool_result":
            results.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                            "content": _text(block.get("content"))})
        elif kind not in ("thinking", "redacted_thinking"):  # earlier thinking, sent back: not part of the prompt
            parts.append({"type": kind})  # unknown: the fake's image check refuses it (400)
    turn = {"role": role, "content": parts or None, **({"tool_calls": calls} if calls else {})}
    return results + ([turn] if parts or calls else [])


def _text(content: Any) -> str:
    """Return a system prompt's or tool result's text (a string, or text blocks)."""
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def _unsigned(messages: list[Any]) -> str | None:
    """Return Anthropic's refusal of a thinking request whose last tool-calling turn lacks its signed thinking."""
    turns = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    blocks = turns[-1].get("content") if turns else None
    if not isinstance(blocks, list) or not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks):
        return None
    first = blocks[0] if isinstance(blocks[0], dict) else {}
    if first.get("type") == "thinking" and first.get("signature") == _signature(str(first.get("thinking"))):
        return None
    return ("messages: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a "
            "final `assistant` message must start with a thinking block, its signature as received (fake provider)")


def _signature(thought: str) -> str:
    return base64.b64encode(hashlib.sha256(thought.encode()).digest()).decode()


def reply(body: dict[str, Any], payload: dict[str, Any], read: int, written: int) -> dict[str, Any]:
    """Return the Anthropic message for the chat reply ``payload`` (``read``/``written``: prompt cache tokens)."""
    choice = payload["choices"][0]
    message, blocks = choice["message"], []
    if thought := message.get("reasoning_content"):
        blocks.append({"type": "thinking", "thinking": thought, "signature": _signature(thought)})
    content, forced = message.get("content"), body.get("_forced_tool")
    value = _json(content) if forced and content else None
    if isinstance(value, dict):
        tool_id = "toolu_" + hashlib.sha256(content.encode()).hexdigest()[:20]
        blocks.append({"type": "tool_use", "id": tool_id, "name": forced, "input": value})
    elif content:
        blocks.append({"type": "text", "text": content})
    for call in message.get("tool_calls") or []:
        name, args = call["function"]["name"], call["function"]["arguments"]
        value = _json(args)
        blocks.append({"type": "tool_use", "id": call["id"].replace("call_", "toolu_"), "name": name,
                       "input": value if isinstance(value, dict) else {"arguments": args}})
    used = payload["usage"]
    calling = any(b["type"] == "tool_use" for b in blocks)
    stop = "tool_use" if calling else STOPS.get(choice["finish_reason"], "end_turn")
    return {"id": f"msg_{payload['id']}", "type": "message", "role": "assistant", "model": payload["model"],
            "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": used["prompt_tokens"] - read - written,
                      "output_tokens": used["completion_tokens"],
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": written}}


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None
