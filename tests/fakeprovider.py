"""A loopback OpenAI-compatible fake provider, owned by the test suite.

Run it as a script::

    python tests/fakeprovider.py --port 0 [--host 127.0.0.1] [--latency-ms 100] [--config JSON]

It prints one JSON line ``{"port": N}`` when ready and serves until SIGTERM/SIGINT.
Or drive it from Python through :class:`FakeProvider`, which spawns the script as a
subprocess and talks to its admin endpoints::

    with FakeProvider(latency_ms=50, rate_429=0.1) as fake:
        client = SomeClient(base_url=fake.url, api_key="x")
        ...
        fake.configure(fail_first=2)
        print(fake.stats()["statuses"])

Endpoints: ``POST /v1/chat/completions`` (and ``/chat/completions``), ``GET /v1/models``
(and ``/models``), ``POST /_admin/config``, ``GET /_admin/stats``, ``POST /_admin/reset``.
The config keys and their defaults are in :data:`DEFAULT_CONFIG`; the order in which a
chat request is decided is documented on :meth:`FakeServer.chat`.

The server half only needs the standard library and aiohttp; it never imports ``bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import contextvars
import hashlib
import ipaddress
import json
import os
import queue
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections import Counter, deque
from pathlib import Path
from typing import Any, Self

from aiohttp import web

DEFAULT_CONFIG: dict[str, Any] = {
    "latency_ms": 0,            # sleep before answering (the CLI --latency-ms sets the default)
    "latency_jitter_ms": 0,     # plus uniform(0, jitter)
    "rate_429": 0.0,            # random faults, drawn per request in this order of precedence
    "retry_after_s": None,      # Retry-After header value for every 429 (None: no header)
    "rate_500": 0.0,
    "rate_hang": 0.0,           # sleep hang_s, then answer normally (effectively: never)
    "hang_s": 3600.0,
    "rate_malformed": 0.0,      # HTTP 200 whose body is not valid JSON
    "rate_empty": 0.0,          # HTTP 200, content "" and finish_reason "length"
    "rate_reset": 0.0,          # abort the TCP connection (RST) without any HTTP response
    "seed": 0,                  # seed of the random.Random the faults are drawn from
    "fail_first": 0,            # the first N attempts of every distinct request fail ...
    "fail_status": 429,         # ... with this status
    "replies": [],              # [{"match": str, "content": str} | {"match": str, "status": int}]
    "require_key": None,        # if set, "Authorization: Bearer <key>" is required (else 401)
    "echo_auth": False,         # error messages echo the request's Authorization header (a leaky gateway):
                                # "...; received Authorization: Bearer <key>" (a 401 also names the key)
    "corrupt_items": 0.0,       # batch replies: this fraction of graded items gets an off-scale score
    "served_models": None,      # None: GET /models lists nothing and any model is answered; a list: /models
                                # lists these, and a chat request for another model gets a 404
    "list_models": True,        # False: GET /models answers 404 (a server that cannot list its models)
    "batch_fault": None,        # batch replies: "truncate" (JSON cut in half), "partial" (last half of the
                                # grades missing), "wrong_ids" (half the grades under ids never shown)
}
BATCH_FAULTS = (None, "truncate", "partial", "wrong_ids")
REQUEST_AUTH: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_auth", default=None)
FAULT_KINDS = ("429", "500", "hang", "malformed", "empty", "reset")
RECENT_MAX = 200
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
STRING_FORMATS: dict[str, str] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "email": "fake@example.com",
    "uri": "https://example.com/fake",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


# --------------------------------------------------------------------------- helpers

def compact_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces (stable input for hashing)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message_text(messages: Any) -> str:
    """Concatenate the text of all message contents (strings or lists of text parts)."""
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    for message in messages:
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


def error_body(status: int, message: str) -> bytes:
    """An OpenAI-style error body for ``status``."""
    kind, code = ERROR_KINDS.get(status, ("api_error", str(status)))
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --------------------------------------------------------------------------- schema faker

class SchemaFaker:
    """Builds a value that validates against a JSON schema, deterministically from a seed.

    Supports object (properties, required, additionalProperties), string (minLength,
    maxLength, enum, a few formats), integer and number (minimum, maximum, exclusive
    bounds, integer multipleOf), boolean, null, array (items, prefixItems, minItems,
    maxItems, uniqueItems), enum, const, anyOf/oneOf (the first option), allOf (merged)
    and local ``$ref`` (``#/$defs/...``).
    """

    MAX_DEPTH = 16

    def __init__(self, root: dict[str, Any], seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)

    def value(self, schema: Any, depth: int = 0) -> Any:
        """A value valid against ``schema``."""
        if not isinstance(schema, dict) or depth > self.MAX_DEPTH:
            return "fake"
        if "$ref" in schema:
            return self.value(self._resolve(schema["$ref"]), depth + 1)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return self.rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.value(schema[key][0], depth + 1)
        if schema.get("allOf"):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged.update(self._resolve(part["$ref"]) if "$ref" in part else part)
            return self.value(merged, depth + 1)
        maker = getattr(self, f"_{self._type(schema)}", self._string)
        return maker(schema, depth)

    def _resolve(self, ref: str) -> Any:
        """Follow a local JSON pointer such as ``#/$defs/Name``."""
        node: Any = self.root
        for token in ref.lstrip("#").strip("/").split("/"):
            if token:
                node = node[token.replace("~1", "/").replace("~0", "~")]
        return node

    @staticmethod
    def _type(schema: dict[str, Any]) -> str:
        """The (first non-null) type of ``schema``, inferred when absent."""
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind:
            return kind
        if "properties" in schema or "required" in schema:
            return "object"
        return "array" if "items" in schema else "string"

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        """All declared properties, plus any required ones not declared."""
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {name: self.value(sub, depth + 1) for name, sub in props.items()}
        for name in schema.get("required") or []:
            if name not in out:
                out[name] = self.value(extra if isinstance(extra, dict) else {}, depth + 1)
        return out

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        """``minItems``..``maxItems`` items (at least one when allowed, at most minItems+3).

        An array of objects with an enumerated ``id`` (a judge's batch of grades) gets one
        item per id, as a well-behaved judge would answer.
        """
        items_schema = schema.get("items")
        ids = (items_schema.get("properties", {}).get("id", {}).get("enum")
               if isinstance(items_schema, dict) else None)
        if ids:
            return [{**self.value(items_schema, depth + 1), "id": i} for i in ids]
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", low + 3))
        count = self.rng.randint(max(low, min(1, high)), max(low, high))
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        if isinstance(items, list):  # draft-4 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        out: list[Any] = []
        seen: set[str] = set()
        for _ in range(count * 8):
            if len(out) >= count:
                break
            sub = prefix[len(out)] if len(out) < len(prefix) else items
            item = self.value(sub, depth + 1)
            if schema.get("uniqueItems"):
                key = compact_json(item)
                if key in seen:
                    continue
                seen.add(key)
            out.append(item)
        return out

    def _string(self, schema: dict[str, Any], depth: int = 0) -> str:
        """A format example, or ``fake-<hex>`` padded/truncated to the length bounds."""
        text = STRING_FORMATS.get(schema.get("format", ""), f"fake-{self.rng.getrandbits(32):08x}")
        low = int(schema.get("minLength", 0))
        text = text + "x" * max(0, low - len(text))
        if "maxLength" in schema:
            text = text[: int(schema["maxLength"])]
        return text

    def _bounds(self, schema: dict[str, Any], step: float) -> tuple[float, float]:
        """Inclusive (low, high) from minimum/maximum and their exclusive variants."""
        low, high = schema.get("minimum"), schema.get("maximum")
        ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if ex_low is True and low is not None:        # draft-4 boolean form
            low += step
        elif isinstance(ex_low, (int, float)) and not isinstance(ex_low, bool):
            low = ex_low + step if low is None else max(low, ex_low + step)
        if ex_high is True and high is not None:
            high -= step
        elif isinstance(ex_high, (int, float)) and not isinstance(ex_high, bool):
            high = ex_high - step if high is None else min(high, ex_high - step)
        if low is None and high is None:
            low, high = 0, 100
        elif low is None:
            low = high - 100
        elif high is None:
            high = low + 100
        return low, high

    def _integer(self, schema: dict[str, Any], depth: int = 0) -> int:
        """An integer in range (a multiple of ``multipleOf`` when one exists in range)."""
        low, high = self._bounds(schema, 1)
        low, high = int(-(-low // 1)), int(high // 1)  # ceil, floor
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            first, last = -(-low // step), high // step
            if first <= last:
                return self.rng.randint(first, last) * step
        return self.rng.randint(low, max(low, high))

    def _number(self, schema: dict[str, Any], depth: int = 0) -> float:
        """A float strictly inside the range (rounded to 3 places when that stays inside)."""
        low, high = self._bounds(schema, 0)
        value = low + (high - low) * (0.1 + 0.8 * self.rng.random())
        rounded = round(value, 3)
        return rounded if low < rounded < high or low == high else value

    def _boolean(self, schema: dict[str, Any], depth: int = 0) -> bool:
        """True or False."""
        return self.rng.random() < 0.5

    def _null(self, schema: dict[str, Any], depth: int = 0) -> None:
        """None."""
        return None


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


# --------------------------------------------------------------------------- server

class FakeServer:
    """The aiohttp application state: config, derived tables, counters."""

    def __init__(self, default_latency_ms: float = 0, config: dict[str, Any] | None = None) -> None:
        self.defaults = {**DEFAULT_CONFIG, "latency_ms": default_latency_ms}
        self.generation = 0
        self.reset_counters()
        self.set_config(config or {}, reset=True)

    # ---- config and counters

    def set_config(self, update: dict[str, Any], *, reset: bool = False) -> dict[str, Any]:
        """Merge ``update`` over the config (over the defaults if ``reset``); raise ValueError if invalid."""
        unknown = sorted(set(update) - set(DEFAULT_CONFIG))
        if unknown:
            raise ValueError(f"unknown config key(s): {', '.join(unknown)}; known: {', '.join(DEFAULT_CONFIG)}")
        config = {**(self.defaults if reset else self.config), **update}
        validate_config(config)
        self.config = config
        if reset or "seed" in update:
            self.rng = random.Random(config["seed"])
            self.jitter_rng = random.Random(config["seed"])
        if reset or "fail_first" in update:
            self.attempts: dict[str, int] = {}
        self._derive()
        return dict(config)

    def _derive(self) -> None:
        """Precompute what the hot path needs from the config."""
        cfg = self.config
        self.latency_s = cfg["latency_ms"] / 1000
        self.jitter_s = cfg["latency_jitter_ms"] / 1000
        self.auth_header = None if cfg["require_key"] is None else f"Bearer {cfg['require_key']}"
        retry_after = cfg["retry_after_s"]
        self.headers_429 = {} if retry_after is None else {"Retry-After": str(retry_after)}
        table, total = [], 0.0
        for kind in FAULT_KINDS:
            rate = float(cfg[f"rate_{kind}"])
            if rate > 0:
                total += rate
                table.append((total, kind))
        self.fault_table: list[tuple[float, str]] = table

    def reset_counters(self) -> None:
        """Zero every counter; in-flight requests from before no longer count."""
        self.generation += 1
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.statuses: Counter[int] = Counter()
        self.faults: Counter[str] = Counter({kind: 0 for kind in (*FAULT_KINDS, "fail_first")})
        self.by_model: Counter[str] = Counter()
        self.in_flight_by_model: Counter[str] = Counter()
        self.peak_in_flight_by_model: Counter[str] = Counter()
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_MAX)

    def snapshot(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict."""
        return {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "faults": dict(self.faults),
            "by_model": dict(self.by_model),
            "peak_in_flight_by_model": dict(self.peak_in_flight_by_model),
            "recent": list(self.recent),
        }

    # ---- chat

    async def chat(self, request: web.Request) -> web.Response:
        """Answer one chat completion request.

        Order: count it; 400 if the body is not a JSON object; sleep the latency; 401 if
        ``require_key`` does not match; ``fail_first``; the random faults (429, 500, hang,
        malformed, empty, reset); a ``replies`` match (status or content); else the
        schema-valid or ``fake answer <hash>`` reply. In flight is also counted per body
        ``model`` (``peak_in_flight_by_model``).
        """
        self.requests += 1
        generation = self.generation
        self.in_flight += 1
        if self.in_flight > self.peak_in_flight:
            self.peak_in_flight = self.in_flight
        model = None
        try:
            try:
                body = json.loads(await request.read())  # aiohttp keeps the bytes: _answer reads them again
                model = (body.get("model") or "fake-model") if isinstance(body, dict) else None
            except ValueError:
                pass
            if model is not None:
                self.in_flight_by_model[model] += 1
                if self.in_flight_by_model[model] > self.peak_in_flight_by_model[model]:
                    self.peak_in_flight_by_model[model] = self.in_flight_by_model[model]
            return await self._answer(request)
        finally:
            if generation == self.generation:
                self.in_flight -= 1
                if model is not None:
                    self.in_flight_by_model[model] -= 1

    async def _answer(self, request: web.Request) -> web.Response:
        """The body of :meth:`chat`, without the in-flight bookkeeping."""
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self.error(400, "the request body must be a JSON object")
        self.by_model[body.get("model") or "fake-model"] += 1
        auth = request.headers.get("Authorization")
        REQUEST_AUTH.set(auth)  # for `error`, which may echo it (echo_auth); one task per request
        body["_auth"] = auth is not None
        self.recent.append(body)
        authorized = self.auth_header is None or auth == self.auth_header
        fault = self.draw_fault(body) if authorized else None
        await self.sleep()
        if not authorized:
            key = (auth or "").removeprefix("Bearer ") if self.config["echo_auth"] else ""
            return self.error(401, f"Incorrect API key provided{': ' + key if key else ''} (fake provider)")
        served = self.config["served_models"]
        if served is not None and body.get("model") not in served:
            return self.error(404, f"The model `{body.get('model')}` does not exist or you do not have access to "
                                   f"it (fake provider serves: {', '.join(served)})")
        if fault is not None:
            return await self.fault(fault, request, body)
        return self.reply(body)

    def draw_fault(self, body: dict[str, Any]) -> str | None:
        """``fail_first`` (deterministic) first, then one draw against the random fault table."""
        limit = self.config["fail_first"]
        if limit > 0:
            key = request_key(body)
            seen = self.attempts.get(key, 0)
            self.attempts[key] = seen + 1
            if seen < limit:
                return "fail_first"
        if self.fault_table:
            draw = self.rng.random()
            for threshold, kind in self.fault_table:
                if draw < threshold:
                    return kind
        return None

    async def sleep(self) -> None:
        """The configured latency plus jitter (no await at all when both are zero)."""
        delay = self.latency_s
        if self.jitter_s:
            delay += self.jitter_rng.uniform(0, self.jitter_s)
        if delay > 0:
            await asyncio.sleep(delay)

    async def fault(self, kind: str, request: web.Request, body: dict[str, Any]) -> web.Response:
        """Carry out one fault; returns the response (or raises after aborting the connection)."""
        self.faults[kind] += 1
        if kind == "fail_first":
            status = int(self.config["fail_status"])
            return self.error(status, f"fake failure (fail_first={self.config['fail_first']})")
        if kind in ("429", "500"):
            return self.error(int(kind), f"fake injected {kind}")
        if kind == "hang":
            await asyncio.sleep(float(self.config["hang_s"]))
            return self.reply(body)
        if kind == "malformed":
            self.statuses[200] += 1
            return web.Response(body=MALFORMED_BODY, content_type="application/json")
        if kind == "empty":
            return self.reply(body, content="", finish_reason="length")
        abort_connection(request)
        raise asyncio.CancelledError  # nothing may be written on an aborted connection

    def reply(self, body: dict[str, Any], content: str | None = None, finish_reason: str = "stop") -> web.Response:
        """A 200 chat.completion; ``content`` defaults to a replies match or the generated text."""
        prompt = message_text(body.get("messages"))
        if content is None:
            match = self.match_reply(prompt)
            if match is not None and "status" in match:
                return self.error(int(match["status"]), f"fake reply status for match {match['match']!r}")
            content = match["content"] if match is not None else default_content(body, self.config["corrupt_items"],
                                                                                  self.config["batch_fault"])
        self.statuses[200] += 1
        payload = {
            "id": f"chatcmpl-fake-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "fake-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}],
            "usage": usage(prompt, content),
        }
        return web.Response(text=json.dumps(payload), content_type="application/json")

    def match_reply(self, prompt: str) -> dict[str, Any] | None:
        """The first ``replies`` entry whose ``match`` occurs in the prompt text."""
        for entry in self.config["replies"]:
            if entry["match"] in prompt:
                return entry
        return None

    def error(self, status: int, message: str) -> web.Response:
        """An OpenAI-style error response (429s carry Retry-After when configured)."""
        self.statuses[status] += 1
        if self.config["echo_auth"] and REQUEST_AUTH.get() is not None:
            message = f"{message}; received Authorization: {REQUEST_AUTH.get()}"
        headers = self.headers_429 if status == 429 else None
        return web.Response(status=status, body=error_body(status, message),
                            content_type="application/json", headers=headers)

    # ---- other endpoints

    async def models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``: the ``served_models`` (none listed by default: any model is answered)."""
        if not self.config["list_models"]:
            return self.error(404, "this server does not list its models")
        served = self.config["served_models"] or []
        body = {"object": "list", "data": [{"id": m, "object": "model"} for m in served]}
        return web.Response(text=json.dumps(body), content_type="application/json")

    async def admin_config(self, request: web.Request) -> web.Response:
        """``POST /_admin/config``: merge the body over the config (``reset: true`` first restores defaults)."""
        try:
            update = json.loads(await request.read() or b"{}")
            if not isinstance(update, dict):
                raise ValueError("the config body must be a JSON object")
            reset = bool(update.pop("reset", False))
            return web.json_response(self.set_config(update, reset=reset))
        except ValueError as exc:
            return web.Response(status=400, body=error_body(400, str(exc)), content_type="application/json")

    async def admin_stats(self, request: web.Request) -> web.Response:
        """``GET /_admin/stats``."""
        return web.json_response(self.snapshot())

    async def admin_reset(self, request: web.Request) -> web.Response:
        """``POST /_admin/reset``: counters and config back to defaults."""
        self.reset_counters()
        return web.json_response(self.set_config({}, reset=True))


def validate_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when a config value has the wrong shape."""
    for key in ("latency_ms", "latency_jitter_ms", "hang_s", "corrupt_items", *(f"rate_{k}" for k in FAULT_KINDS)):
        if not isinstance(cfg[key], (int, float)) or cfg[key] < 0:
            raise ValueError(f"{key} must be a non-negative number, got {cfg[key]!r}")
    served = cfg["served_models"]
    if served is not None and not (isinstance(served, list) and all(isinstance(m, str) for m in served)):
        raise ValueError(f"served_models must be null or a list of model names, got {served!r}")
    for key in ("fail_first", "fail_status", "seed"):
        if not isinstance(cfg[key], int):
            raise ValueError(f"{key} must be an integer, got {cfg[key]!r}")
    if not isinstance(cfg["echo_auth"], bool):
        raise ValueError(f"echo_auth must be true or false, got {cfg['echo_auth']!r}")
    if cfg["batch_fault"] not in BATCH_FAULTS:
        raise ValueError(f"batch_fault must be one of {BATCH_FAULTS}, got {cfg['batch_fault']!r}")
    replies = cfg["replies"]
    if not isinstance(replies, list) or not all(
        isinstance(r, dict) and isinstance(r.get("match"), str) and ("content" in r or "status" in r)
        for r in replies
    ):
        raise ValueError('replies must be a list of {"match": str, "content": str | "status": int}')


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


def abort_connection(request: web.Request) -> None:
    """Drop the request's TCP connection with an RST (SO_LINGER 0), sending no HTTP response."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def build_app(server: FakeServer) -> web.Application:
    """The aiohttp application routing every endpoint to ``server``."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", server.chat)
    app.router.add_post("/chat/completions", server.chat)
    app.router.add_get("/v1/models", server.models)
    app.router.add_get("/models", server.models)
    app.router.add_post("/_admin/config", server.admin_config)
    app.router.add_get("/_admin/stats", server.admin_stats)
    app.router.add_post("/_admin/reset", server.admin_reset)
    return app


async def serve(host: str, port: int, server: FakeServer, parent_pid: int | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or until the parent process is gone); print the port line first."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the port line: a signal may follow it at once
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(build_app(server), access_log=None, handler_cancellation=True,
                           shutdown_timeout=0.25)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=4096).start()
    sys.stdout.write(json.dumps({"port": runner.addresses[0][1]}) + "\n")
    sys.stdout.flush()
    watchdog = asyncio.create_task(watch_parent(parent_pid, stop)) if parent_pid else None
    try:
        await stop.wait()
    finally:
        if watchdog is not None:
            watchdog.cancel()
        await runner.cleanup()


async def watch_parent(parent_pid: int, stop: asyncio.Event) -> None:
    """Set ``stop`` once this process is orphaned (the parent died without stopping us)."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(0.5)
    stop.set()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line of the script."""
    parser = argparse.ArgumentParser(description="Loopback OpenAI-compatible fake provider.")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="default latency")
    parser.add_argument("--config", default="{}", help="JSON object of config keys")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this parent is gone")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Script entry point."""
    args = parse_args(argv)
    if not is_loopback(args.host):
        print(f"fakeprovider: refusing to bind non-loopback host {args.host!r}", file=sys.stderr)
        return 2
    try:
        server = FakeServer(args.latency_ms, json.loads(args.config))
    except (ValueError, TypeError) as exc:
        print(f"fakeprovider: bad --config: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(args.host, args.port, server, args.parent_pid))
    return 0


# --------------------------------------------------------------------------- handle

_LIVE: weakref.WeakSet[FakeProvider] = weakref.WeakSet()
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
SCRIPT = Path(__file__).resolve()


class FakeProvider:
    """A handle on a fake provider subprocess: start, configure, read stats, stop.

    ``latency_ms`` becomes the server's default latency (it survives :meth:`reset`);
    the other ``config`` keys only set the initial config, which :meth:`reset` drops.
    """

    ADMIN_TIMEOUT_S = 5.0
    START_TIMEOUT_S = 20.0

    def __init__(self, latency_ms: float = 0, **config: Any) -> None:
        self.latency_ms = latency_ms
        self.config = config
        self.process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound TCP port (after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("FakeProvider is not started; call .start() first")
        return self._port

    @property
    def url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        """Spawn the server and wait (up to 20 s) for its port line."""
        if self.process is not None:
            return self
        cmd = [sys.executable, str(SCRIPT), "--port", "0", "--latency-ms", str(self.latency_ms),
               "--config", json.dumps(self.config), "--parent-pid", str(os.getpid())]
        with tempfile.TemporaryFile() as stderr:
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
            _LIVE.add(self)
            try:
                self._port = self._read_port(stderr)
            except BaseException:
                self.stop()
                raise
        return self

    def _read_port(self, stderr: Any) -> int:
        """Read the ``{"port": N}`` line, failing clearly if the process dies or stays silent."""
        assert self.process is not None and self.process.stdout is not None
        lines: queue.Queue[bytes] = queue.Queue()
        stdout = self.process.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=self.START_TIMEOUT_S)
        except queue.Empty:
            raise RuntimeError(f"fake provider printed no port within {self.START_TIMEOUT_S:.0f} s") from None
        try:
            return int(json.loads(line)["port"])
        except (ValueError, KeyError, TypeError):
            self.process.wait(timeout=5)
            stderr.seek(0)
            tail = stderr.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"fake provider failed to start (exit code {self.process.returncode}):\n"
                               f"{tail}") from None

    def stop(self) -> None:
        """SIGTERM the server, wait up to 5 s, then kill it."""
        process, self.process, self._port = self.process, None, None
        _LIVE.discard(self)
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def _admin(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        """One admin call; raises RuntimeError with the server's message on an HTTP error."""
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with _NO_PROXY.open(request, timeout=self.ADMIN_TIMEOUT_S) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"fake provider {path}: HTTP {exc.code}: {exc.read().decode()}") from None

    def configure(self, **cfg: Any) -> dict[str, Any]:
        """Merge config keys over the current config (``reset=True`` first restores defaults); returns it all."""
        return self._admin("POST", "/_admin/config", cfg)

    def stats(self) -> dict[str, Any]:
        """The server's counters (see ``GET /_admin/stats``)."""
        return self._admin("GET", "/_admin/stats")

    def reset(self) -> None:
        """Counters and config back to the defaults (the start-up latency included)."""
        self._admin("POST", "/_admin/reset", {})

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.url if self._port is not None else "not started"
        return f"FakeProvider({where})"


@atexit.register
def _stop_stragglers() -> None:
    """Stop every provider still running when the interpreter exits."""
    for provider in list(_LIVE):
        provider.stop()


if __name__ == "__main__":
    sys.exit(main())
