"""The fake provider as a tool-using model: scripted tool calls (their arguments billed as output), and a default
answer to a multi-turn request echoing its last user turn and tool results, so a test sees the history was sent."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from bench.testing.fake_provider.replies import usage
from bench.testing.fake_provider.request_body import response_schema

TOOL_DEFAULTS: dict[str, Any] = {
    "tool_calls": [],           # [{"match", "model", "name", "arguments", "until"}]: scripted calls (docs/tests.md)
    "tools_supported": True,    # False: a request with `tools` gets a 400 (a server without function calling)
}


def tools_refusal(body: dict[str, Any], cfg: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """Return the 400 of a request with ``tools`` when ``tools_supported`` is false (None otherwise)."""
    if cfg["tools_supported"] or not body.get("tools"):
        return None
    return 400, {"error": {"message": "tools are not supported by this server (fake provider)",
                           "type": "invalid_request_error", "param": "tools", "code": "bad_request"}}


def scripted_call(body: dict[str, Any], cfg: dict[str, Any], prompt: str) -> dict[str, Any] | None:
    """Return the tool call the first matching ``tool_calls`` script makes for this request (``prompt``), or None."""
    if not body.get("tools") or not cfg["tool_calls"]:
        return None
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    results = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    for script in cfg["tool_calls"]:
        if script["match"] not in prompt or script.get("model") not in (None, body.get("model")):
            continue
        if results >= script.get("until", 1):
            continue  # this script is done: a later one may match (call X, then Y), else a normal answer
        args = script.get("arguments", {})
        text = args if isinstance(args, str) else json.dumps(args)
        tag = hashlib.sha256(f"{script['name']}\x1f{text}\x1f{results}".encode()).hexdigest()[:12]
        return {"id": f"call_{tag}", "type": "function", "function": {"name": script["name"], "arguments": text}}
    return None


def call_reply(body: dict[str, Any], call: dict[str, Any], completion_id: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """Return the reply payload that makes ``call``, its arguments billed as the output tokens (at least 1)."""
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": usage(body.get("messages"), call["function"]["arguments"], cfg["tokenizer"])}


def turn_echo(body: dict[str, Any]) -> str:
    """Return what a default answer ends with to show its history ("" for one turn, or a schema asked for)."""
    if response_schema(body.get("response_format")) is not None:
        return ""
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    tools = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if len(users) <= 1 and not tools:
        return ""
    last = _text(users[-1]) if users else ""
    echo = f" [turn {len(users)}: {last[:40]}]"
    return echo + (f" [tools: {'; '.join(_text(m) for m in tools)}]" if tools else "")


def _text(message: dict[str, Any]) -> str:
    """Return a message's text: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
