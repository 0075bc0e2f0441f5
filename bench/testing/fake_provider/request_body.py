"""What the fake provider reads from a chat request: its text, its identity hash, the schema it asks for and its
scales (``enum_of``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any


def compact_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces (stable input for hashing)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message_text(messages: Any) -> str:
    """Concatenate the text of all message contents (strings or lists of text parts)."""
    parts: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "\n".join(parts)


def request_key(body: dict[str, Any]) -> str:
    """Hash identifying a distinct request: its messages, model and response_format."""
    key = compact_json([body.get("messages"), body.get("model"), body.get("response_format")])
    return hashlib.sha256(key.encode()).hexdigest()


def response_schema(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema a request asks for: OpenAI ``json_schema`` or llama.cpp ``json_object`` form."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if isinstance(spec, dict):
            schema = spec.get("schema", spec)
            return schema if isinstance(schema, dict) else {}
        return {}
    if kind == "json_object":
        schema = response_format.get("schema")
        return schema if isinstance(schema, dict) else {"_json_object": True}
    return None


def enum_of(schema: Any, key: str) -> list[Any] | None:
    """Return the ``enum`` of property ``key`` anywhere in ``schema`` (None if it has none)."""
    for node in schema_nodes(schema):
        props = node.get("properties")
        enum = props[key].get("enum") if isinstance(props, dict) and isinstance(props.get(key), dict) else None
        if isinstance(enum, list) and enum:
            return enum
    return None


def schema_nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Yield every object of ``schema``, depth first."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
