"""The bodies the fake provider composes: a reply's content (plain or schema-valid), its usage, errors.

A chat reply's content is a ``replies`` match, else JSON valid against the requested schema
(seeded by the request's hash, with the batch faults of the config applied), else
``fake answer <sha256(messages)[:8]>``; usage counts words as tokens.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from bench.testing.fake_provider.request_body import compact_json, request_key, response_schema
from bench.testing.fake_provider.schema_faker import SchemaFaker

MALFORMED_BODY = b'{"id": "chatcmpl-fake", "object": "chat.completion", "choices": ['
ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "bad_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "server_error"),
    503: ("server_error", "service_unavailable"),
}


def error_body(status: int, message: str) -> bytes:
    """An OpenAI-style error body for ``status``."""
    kind, code = ERROR_KINDS.get(status, ("api_error", str(status)))
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()



def schema_reply(schema: dict[str, Any], body: dict[str, Any], fallback: str, corrupt: float = 0.0,
                 batch_fault: str | None = None) -> str:
    """The JSON text of a value valid against ``schema``, seeded by the request's hash.

    ``corrupt``: the fraction of graded batch items whose first score is put off its scale;
    ``batch_fault``: see DEFAULT_CONFIG.
    """
    if schema.get("_json_object"):
        return json.dumps({"answer": fallback})
    seed = int(request_key(body)[:16], 16)
    value = SchemaFaker(schema, seed).value(schema)
    if corrupt and isinstance(value, dict) and isinstance(value.get("grades"), list):
        rng = random.Random(seed)
        for grade in value["grades"]:
            scores = grade.get("scores") if isinstance(grade, dict) else None
            if isinstance(scores, dict) and scores and rng.random() < corrupt:
                scores[next(iter(scores))] = 99
    if batch_fault and isinstance(value, dict) and isinstance(value.get("grades"), list):
        grades = value["grades"]
        half = len(grades) // 2 or 1
        if batch_fault == "truncate":
            text = json.dumps(value)
            return text[: len(text) // 2]
        if batch_fault == "partial":
            value["grades"] = grades[:-half] if len(grades) > 1 else []
        if batch_fault == "wrong_ids":
            for n, grade in enumerate(grades[:half]):
                grade["id"] = f"zz-never-shown-{n}"
    return json.dumps(value)


def default_content(body: dict[str, Any], corrupt: float = 0.0, batch_fault: str | None = None) -> str:
    """Schema-valid JSON when a schema is requested, else ``fake answer <sha256(messages)[:8]>``."""
    digest = hashlib.sha256(compact_json(body.get("messages")).encode()).hexdigest()
    text = f"fake answer {digest[:8]}"
    schema = response_schema(body.get("response_format"))
    return text if schema is None else schema_reply(schema, body, text, corrupt, batch_fault)


def usage(prompt: str, content: str) -> dict[str, int]:
    """Word counts standing in for token counts (each at least 1)."""
    prompt_tokens = max(1, len(prompt.split()))
    completion_tokens = max(1, len(content.split()))
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
