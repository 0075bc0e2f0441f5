"""JSON for request bodies and the response cache: orjson when installed (the ``perf`` extra), else the standard
library, one meaning either way (what orjson refuses goes to ``json``; keys keep ``canonical_json``'s spelling)."""

from __future__ import annotations

import json
from typing import Any

from bench.core.records import canonical_json

try:  # the `perf` extra
    import orjson
except ImportError:  # pragma: no cover - exercised where the extra is missing
    orjson = None  # type: ignore[assignment]

_CACHE_JSON = json.JSONEncoder(ensure_ascii=False)  # json.dumps(value, ensure_ascii=False), made once


def body_bytes(body: dict[str, Any]) -> bytes:
    """Return a request body as the bytes to POST (UTF-8 JSON; integer keys as strings, as ``json`` writes them)."""
    if orjson is not None:
        try:
            return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # a lone surrogate, an int past 64 bits, a type orjson does not know: json decides
            pass
    return json.dumps(body).encode()


def loads(data: bytes | str) -> Any:
    """Return the value of a JSON document; raise ValueError for what is not JSON (as ``json.loads``)."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except ValueError:  # NaN, Infinity, a lone surrogate escape: json reads them, or raises its own error
            pass
    return json.loads(data)


def dumps_str(text: str) -> str:
    """Return a string as a JSON string literal (with its quotes)."""
    if orjson is not None:
        try:
            return orjson.dumps(text).decode()
        except TypeError:  # a lone surrogate
            pass
    return json.dumps(text, ensure_ascii=False)


def cache_text(value: dict[str, Any]) -> str:
    """Return a reply as the cache stores it (``json`` writes logprobs: orjson would turn ``-Infinity`` to null)."""
    if orjson is not None and "logprobs" not in value:
        try:
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            pass
    return _CACHE_JSON.encode(value)


def messages_bytes(messages: list[dict[str, Any]]) -> bytes:
    """Return ``canonical_json(messages)`` as UTF-8 bytes (by orjson when every message is a dict of strings)."""
    if orjson is not None:
        for message in messages:
            if type(message) is not dict:
                return _canonical_bytes(messages)
            for value in message.values():
                if type(value) is not str:
                    return _canonical_bytes(messages)
        try:
            return orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # a key that is not a string, a lone surrogate
            pass
    return _canonical_bytes(messages)


def _canonical_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8", "surrogatepass")
