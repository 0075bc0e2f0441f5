"""The bodies the fake provider composes: a reply's content (plain or schema-valid), its usage (words, or tiktoken
tokens from LiteLLM's bundled encoding files: no network), errors."""

from __future__ import annotations

import importlib.util
import json
import os
import random
from pathlib import Path
from typing import Any

from bench._schema_instance import SchemaInstance
from bench.testing.fake_provider.alignment import ALIGNMENT_DEFAULTS, misread
from bench.testing.fake_provider.biases import BIAS_DEFAULTS, biased, padded
from bench.testing.fake_provider.obedient import injected_grade, obey
from bench.testing.fake_provider.quality import QUALITY_DEFAULTS, answer_text, shape
from bench.testing.fake_provider.request_body import compact_json, message_text, request_key, response_schema

MALFORMED_BODY = b'{"id": "chatcmpl-fake", "object": "chat.completion", "choices": ['
ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "bad_request"), 401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"), 404: ("invalid_request_error", "model_not_found"),
    409: ("invalid_request_error", "conflict"), 429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "server_error"), 503: ("server_error", "service_unavailable")}
ENCODING_NAMES: dict[str, str | None] = {"words": None, "cl100k": "cl100k_base", "o200k": "o200k_base"}  # tokenizers
CHUNK_CHARS = 1024  # litellm.token_counter encodes long text in chunks of this many characters: so does this
_ENCODINGS: dict[str, Any] = {}
SHAPE_DEFAULTS = {**QUALITY_DEFAULTS, **BIAS_DEFAULTS, **ALIGNMENT_DEFAULTS, "obey_injections": False,
                  "corrupt_items": 0.0, "packed_fault": None}


def error_payload(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error object for ``status`` (``code`` overrides the status's usual code)."""
    kind, usual = ERROR_KINDS.get(status, ("api_error", str(status)))
    return {"error": {"message": message, "type": kind, "param": None, "code": code or usual}}


def error_body(status: int, message: str, code: str | None = None) -> bytes:
    """:func:`error_payload` as response bytes."""
    return json.dumps(error_payload(status, message, code)).encode()


def schema_reply(schema: dict[str, Any], body: dict[str, Any], fallback: str, cfg: dict[str, Any] | None = None,
                 arrival: int = 0) -> str:
    """The JSON text of a value valid against ``schema``, seeded by the request's hash: a judge's grades follow
    the quality of the answers shown (``quality.shape``), moved by its scripted biases, then the
    ``obey_injections``, ``corrupt_items`` and ``packed_fault`` knobs apply."""
    cfg = {**SHAPE_DEFAULTS, **(cfg or {})}
    if schema.get("_json_object"):
        return json.dumps({"answer": fallback})
    seed = int(request_key(body)[:16], 16)
    value = SchemaInstance(schema, random.Random(seed), fake_text).of(schema)
    text = message_text(body.get("messages"))
    value = biased(shape(value, body, text, cfg, arrival), body, text, cfg, arrival)  # biases.py: scripted biases
    value = misread(value, body, text, cfg)  # alignment.py: a misread anchor, unless the prompt shows it
    if cfg["obey_injections"]:
        value = obey(value, injected_grade(body.get("messages")), schema)
    corrupt, packed_fault = cfg["corrupt_items"], cfg["packed_fault"]
    if corrupt and isinstance(value, dict) and isinstance(value.get("grades"), list):
        rng = random.Random(seed)
        for grade in value["grades"]:
            scores = grade.get("scores") if isinstance(grade, dict) else None
            if isinstance(scores, dict) and scores and rng.random() < corrupt:
                scores[next(iter(scores))] = 99
    if packed_fault and isinstance(value, dict) and isinstance(value.get("grades"), list):
        grades = value["grades"]
        half = len(grades) // 2 or 1
        if packed_fault == "truncate":
            text = json.dumps(value)
            return text[: len(text) // 2]
        if packed_fault == "partial":
            value["grades"] = grades[:-half] if len(grades) > 1 else []
        if packed_fault == "wrong_ids":
            for n, grade in enumerate(grades[:half]):
                grade["id"] = f"zz-never-shown-{n}"
    return json.dumps(value)


def default_content(body: dict[str, Any], cfg: dict[str, Any] | None = None, arrival: int = 0) -> str:
    """Schema-valid JSON when a schema is requested, else the model's own (padded) ``fake answer <tag><hash>``."""
    model = str(body.get("model") or "fake-model")
    text = padded(answer_text(model, compact_json(body.get("messages")), arrival), model, cfg)
    schema = response_schema(body.get("response_format"))
    return text if schema is None else schema_reply(schema, body, text, cfg, arrival)


def fake_text(rng: random.Random, max_chars: int | None) -> str:
    """The fake's free-form string in a structured reply: ``fake-<hex>`` (cut to a string's ``maxLength``)."""
    return f"fake-{rng.getrandbits(32):08x}"


def usage(messages: Any, content: str, tokenizer: str = "words") -> dict[str, int]:
    """The usage of a reply: word counts (each at least 1), or OpenAI chat token counts (see the module)."""
    encoding = load_encoding(tokenizer)
    if encoding is None:
        prompt_tokens = max(1, len(message_text(messages).split()))
        completion_tokens = max(1, len(content.split()))
    else:
        prompt_tokens = chat_tokens(encoding, messages)
        completion_tokens = text_tokens(encoding, content)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def chat_tokens(encoding: Any, messages: Any) -> int:
    """OpenAI's count of a chat prompt: 3 per message, its text values, 1 per name, 3 priming the reply."""
    total = 3
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        total += 3
        for key, value in message.items():
            if isinstance(value, str):
                total += text_tokens(encoding, value) + (1 if key == "name" else 0)
            elif key == "content" and isinstance(value, list):
                total += sum(text_tokens(encoding, str(part.get("text", ""))) for part in value
                             if isinstance(part, dict) and part.get("type") == "text")
    return total


def text_tokens(encoding: Any, text: str) -> int:
    """Tokens of ``text``, encoded in CHUNK_CHARS pieces like litellm.token_counter (special tokens as text)."""
    return sum(len(encoding.encode(text[start:start + CHUNK_CHARS], disallowed_special=()))
               for start in range(0, len(text), CHUNK_CHARS))


def load_encoding(tokenizer: str) -> Any:
    """The tiktoken encoding of a ``tokenizer`` config value (None for "words"); ValueError if it cannot load."""
    name = ENCODING_NAMES[tokenizer]
    if name is None or name in _ENCODINGS:
        return None if name is None else _ENCODINGS[name]
    bundled = litellm_tokenizers()
    if bundled is not None:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    try:
        import tiktoken  # noqa: PLC0415 (optional and slow to load: only a token-counting tokenizer needs it)

        _ENCODINGS[name] = tiktoken.get_encoding(name)
    except Exception as exc:  # noqa: BLE001 (ImportError, or a download attempt failing offline)
        raise ValueError(f"tokenizer {tokenizer!r} needs tiktoken and its {name} file (LiteLLM bundles it; "
                         f"TIKTOKEN_CACHE_DIR={os.environ.get('TIKTOKEN_CACHE_DIR')}): {exc}") from None
    return _ENCODINGS[name]


def litellm_tokenizers() -> Path | None:
    """LiteLLM's bundled tiktoken cache folder, found without importing litellm (None if absent)."""
    spec = importlib.util.find_spec("litellm")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(root) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None
