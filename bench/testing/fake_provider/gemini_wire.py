"""Gemini's ``generateContent`` on the fake provider: a request is read as the chat body the fake answers, the reply
written back as Gemini's parts, ``usageMetadata`` and errors. A thinking model thinks unless its budget is 0 and shows
its thought parts only when ``includeThoughts`` asks (billed either way)."""

from __future__ import annotations

import json
from typing import Any

NAME = "gemini"
ERRORS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
          429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}
FAULTS = {"429": 429, "500": 503}  # an injected 500 is Gemini's overload (503 UNAVAILABLE)


def auth(headers: Any) -> str | None:
    """Return the request's key as the fake compares it (``Bearer <key>``): Gemini sends ``x-goog-api-key``."""
    key = headers.get("x-goog-api-key")
    return f"Bearer {key}" if key else headers.get("Authorization")


def error_body(status: int, message: str) -> dict[str, Any]:
    """Return Gemini's error object for ``status``."""
    return {"error": {"code": status, "message": message, "status": ERRORS.get(status, "INTERNAL")}}


def _get(obj: Any, *names: str) -> Any:
    """Return the first of ``names`` in ``obj`` (Gemini takes camelCase and snake_case alike)."""
    return next((obj[n] for n in names if isinstance(obj, dict) and obj.get(n) is not None), None)


def to_chat(raw: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """Return the chat body the fake answers for a Gemini request to ``model``."""
    system = _get(raw, "systemInstruction", "system_instruction")
    texts = [str(p.get("text", "")) for p in _get(system, "parts") or [] if isinstance(p, dict)]
    messages = [{"role": "system", "content": "\n".join(texts)}] if system else []
    for content in raw.get("contents") or []:
        messages.extend(_turn(content))
    config = _get(raw, "generationConfig", "generation_config") or {}
    body: dict[str, Any] = {"model": model, "messages": messages,
                            "max_tokens": _get(config, "maxOutputTokens", "max_output_tokens")}
    schema = _get(config, "responseJsonSchema", "response_json_schema", "responseSchema", "response_schema")
    if schema is not None or _get(config, "responseMimeType", "response_mime_type") == "application/json":
        body["response_format"] = ({"type": "json_schema", "json_schema": {"schema": _lower(schema)}}
                                   if schema is not None else {"type": "json_object"})
    tools = [d for t in raw.get("tools") or [] for d in _get(t, "functionDeclarations", "function_declarations") or []]
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": d.get("name"), "description": d.get("description"),
                                                           "parameters": _lower(d.get("parameters"))}} for d in tools]
    thinking = _get(config, "thinkingConfig", "thinking_config") or {}
    budget = _get(thinking, "thinkingBudget", "thinking_budget")
    if budget == 0:
        body["_thinks"] = False
    elif budget is not None:
        body["reasoning_effort"] = "low" if budget <= 1024 else "medium" if budget <= 2048 else "high"
    body["_show_thoughts"] = bool(_get(thinking, "includeThoughts", "include_thoughts"))
    return body


def _turn(content: dict[str, Any]) -> list[dict[str, Any]]:
    """Return one Gemini content as chat messages: function responses first (role ``tool``), then its own parts."""
    role = "assistant" if content.get("role") == "model" else "user"
    parts, calls, results = [], [], []
    for part in content.get("parts") or []:
        if (call := _get(part, "functionCall", "function_call")) is not None:
            calls.append({"id": f"call_{call.get('name')}_{len(calls)}", "type": "function", "function": {
                "name": call.get("name"), "arguments": json.dumps(call.get("args") or {})}})
        elif (answer := _get(part, "functionResponse", "function_response")) is not None:
            response = answer.get("response")
            text = response.get("content", response) if isinstance(response, dict) else response
            results.append({"role": "tool", "tool_call_id": f"call_{answer.get('name')}",
                            "content": text if isinstance(text, str) else json.dumps(text)})
        elif (data := _get(part, "inlineData", "inline_data")) is not None:
            url = f"data:{_get(data, 'mimeType', 'mime_type')};base64,{data.get('data')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(part.get("text"), str) and not part.get("thought"):
            parts.append({"type": "text", "text": part["text"]})
        elif not part.get("thought"):
            parts.append({"type": next(iter(part), "empty")})  # unknown: the fake's image check refuses it (400)
    turn = {"role": role, "content": parts or None, **({"tool_calls": calls} if calls else {})}
    return results + ([turn] if parts or calls else [])


def _lower(schema: Any) -> Any:
    """Return a Gemini (OpenAPI) schema as JSON Schema: its ``type`` names in lower case (``OBJECT`` → ``object``)."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lower(v)) for k, v in schema.items()}
    return [_lower(v) for v in schema] if isinstance(schema, list) else schema


def reply(body: dict[str, Any], payload: dict[str, Any], read: int, written: int) -> dict[str, Any]:
    """Return the Gemini response for the fake's chat reply ``payload`` to ``body`` (``read``: cached prompt tokens)."""
    choice = payload["choices"][0]
    message, parts = choice["message"], []
    thought = message.get("reasoning_content")
    if thought and body.get("_show_thoughts"):
        parts.append({"text": thought, "thought": True})
    if message.get("content"):
        parts.append({"text": message["content"]})
    for call in message.get("tool_calls") or []:
        try:
            args = json.loads(call["function"]["arguments"])
        except ValueError:
            args = {"arguments": call["function"]["arguments"]}
        parts.append({"functionCall": {"name": call["function"]["name"], "args": args}})
    used = payload["usage"]
    thoughts = (used.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    meta = {"promptTokenCount": used["prompt_tokens"], "candidatesTokenCount": used["completion_tokens"] - thoughts,
            "totalTokenCount": used["prompt_tokens"] + used["completion_tokens"]}
    meta.update({k: v for k, v in (("thoughtsTokenCount", thoughts), ("cachedContentTokenCount", read)) if v})
    finish = "MAX_TOKENS" if choice["finish_reason"] == "length" else "STOP"
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
            "usageMetadata": meta, "modelVersion": payload["model"], "responseId": payload["id"]}
