"""Requests in the form llama.cpp's server understands: its structured-output spelling and its chat turns."""

from __future__ import annotations

from typing import Any


def llama_response_format(rf: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return ``rf`` as llama_cpp.server constrains output: ``{"type": "json_object", "schema": S}``."""
    if not rf or rf.get("type") != "json_schema":
        return rf
    schema = (rf.get("json_schema") or {}).get("schema")
    return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}


def llama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``messages`` with system messages folded into the first user one (llama's gemma format drops them)."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system").strip()
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    for message in rest:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            message["content"] = f"{system}\n\n{message['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]
