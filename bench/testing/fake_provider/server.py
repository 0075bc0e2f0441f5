"""The fake provider's state (config, counters) and its chat answers: :meth:`FakeServer.chat` gives the order in
which a request is decided; :meth:`FakeServer.answer` answers a chat request and a batch line alike."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import random
import socket
import struct
import time
from collections import Counter, deque
from itertools import accumulate
from typing import Any

from aiohttp import web

from bench.testing.fake_provider.batches import BatchStore
from bench.testing.fake_provider.config import DEFAULT_CONFIG, FAULT_KINDS, validate_config
from bench.testing.fake_provider.replies import (MALFORMED_BODY, default_content, error_body, error_payload,
                                                 load_encoding, usage)
from bench.testing.fake_provider.prefix_cache import PrefixCache, billed_usd, native_wire
from bench.testing.fake_provider.images import image_digests, image_problem, without_image_data
from bench.testing.fake_provider.request_body import message_text, request_key, response_schema
from bench.testing.fake_provider.thinking import assistant, billed_thinking, with_thinking
from bench.testing.fake_provider.timeline import ModelLoad
from bench.testing.fake_provider.token_probs import fake_logprobs
from bench.testing.fake_provider.tool_calls import call_reply, scripted_call, tools_refusal, turn_echo

REQUEST_AUTH: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_auth", default=None)
REQUEST_WIRE: contextvars.ContextVar[Any] = contextvars.ContextVar("request_wire", default=None)  # *_wire module
RECENT_MAX = 200


class FakeServer:
    """The aiohttp application state: config, derived tables, counters."""

    def __init__(self, default_latency_ms: float = 0, config: dict[str, Any] | None = None) -> None:
        self.defaults = {**DEFAULT_CONFIG, "latency_ms": default_latency_ms}
        self.generation = 0
        self.config: dict[str, Any] = dict(self.defaults)
        self.batches = BatchStore(lambda: self.config, self.answer)
        self.reset_counters()
        self.set_config(config or {}, reset=True)

    def set_config(self, update: dict[str, Any], *, reset: bool = False) -> dict[str, Any]:
        """Merge ``update`` over the config (over the defaults if ``reset``); raise ValueError if invalid."""
        unknown = sorted(set(update) - set(DEFAULT_CONFIG))
        if unknown:
            raise ValueError(f"unknown config key(s): {', '.join(unknown)}; known: {', '.join(DEFAULT_CONFIG)}")
        config = {**(self.defaults if reset else self.config), **update}
        validate_config(config)
        load_encoding(config["tokenizer"])  # a tokenizer that cannot load is refused now, not on the first reply
        self.config = config
        if reset or "seed" in update:
            self.rng = random.Random(config["seed"])
            self.jitter_rng = random.Random(config["seed"])
            self.batches.reseed(config["seed"])
        if reset or "fail_first" in update:
            self.attempts: dict[str, int] = {}
        if reset or "empty_first" in update:
            self.empties: dict[str, int] = {}
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
        kinds = [kind for kind in FAULT_KINDS if float(cfg[f"rate_{kind}"]) > 0]
        self.fault_table = list(zip(accumulate(float(cfg[f"rate_{kind}"]) for kind in kinds), kinds))

    def reset_counters(self) -> None:
        """Zero every counter and drop every file and batch; in-flight requests from before no longer count."""
        self.generation += 1
        self.batches.clear()
        self.requests = 0
        self.embeddings = 0  # of ``requests``, those to /v1/embeddings
        self.in_flight = 0
        self.peak_in_flight = 0
        self.statuses: Counter[int] = Counter()
        self.faults: Counter[str] = Counter({kind: 0 for kind in (*FAULT_KINDS, "fail_first")})
        self.by_model: Counter[str] = Counter()
        self.load = ModelLoad()  # in flight per model, its peak, each request's span (GET /_admin/timeline)
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_MAX)
        self.arrivals: dict[str, int] = {}  # request key -> answers so far (``noise``: a draw per arrival)
        self.billed: dict[str, float] = {"replies": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0,
                                         "usd": 0.0}
        self.images: Counter[str] = Counter()  # sha256 of each well-formed image's bytes received (images.py)
        self.prefixes = PrefixCache()  # the prompt prefixes seen (``prefix_cache``)

    def snapshot(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict (the Batch API's under ``batches``: see ``BatchStore.snapshot``)."""
        return {
            "requests": self.requests,
            "embeddings": self.embeddings,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "faults": dict(self.faults),
            "by_model": dict(self.by_model),
            "peak_in_flight_by_model": dict(self.load.peak),
            "recent": list(self.recent),
            "images": dict(self.images),  # sha256 of an image's bytes (an http(s) one: url:<URL>) → times received
            "billed": dict(self.billed),  # every 200 chat reply's usage (sent or not: omit_usage), USD at bill_per_mtok
            "batches": self.batches.snapshot(),
        }

    async def chat(self, request: web.Request, wire: Any = None) -> web.Response:
        """Answer one chat request (or a native ``wire``'s, read as a chat body). Order: count it; 400 for a body
        not a JSON object; the latency; 401 unless ``require_key`` matches; ``fail_first``; faults; :meth:`answer`."""
        self.requests += 1
        generation = self.generation
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        model = body = None
        REQUEST_WIRE.set(wire)  # errors are written in its format (one task per request)
        try:
            try:
                body = json.loads(await request.read())
                if isinstance(body, dict) and wire is not None:
                    body = {**wire.to_chat(body, request.match_info.get("model")), "_wire": wire.NAME}
                model = (body.get("model") or "fake-model") if isinstance(body, dict) else None
            except ValueError:
                pass
            if model is not None:
                began = self.load.begin(model)
            return await self._answer(request, body)
        finally:
            if generation == self.generation:
                self.in_flight -= 1
                if model is not None:
                    self.load.end(model, began)

    async def _answer(self, request: web.Request, body: Any) -> web.Response:
        """The body of :meth:`chat`, without the in-flight bookkeeping."""
        if not isinstance(body, dict):
            return self.error(400, "the request body must be a JSON object")
        self.by_model[body.get("model") or "fake-model"] += 1
        wire = REQUEST_WIRE.get()
        auth = request.headers.get("Authorization") if wire is None else wire.auth(request.headers)
        REQUEST_AUTH.set(auth)  # for `error`, which may echo it (echo_auth); one task per request
        body["_auth"] = auth is not None
        self.recent.append(without_image_data(body))  # data URLs shortened to their size and hash
        if image_problem(body.get("messages")) is None:  # a malformed one is refused by `answer` (400)
            self.images.update(image_digests(body.get("messages")))
        authorized = self.auth_header is None or auth == self.auth_header
        fault = self.draw_fault(body) if authorized else None
        try:
            await self.sleep()
        except asyncio.CancelledError:  # the client hung up (handler_cancellation): bill_hung_up bills its reply
            if authorized and fault is None and self.config["bill_hung_up"] and (cut := self.answer(body))[0] == 200:
                self.cached(body, cut[1]["usage"])
                self.bill(cut[1]["usage"])
            raise
        if not authorized:
            return self.unauthorized(auth)
        if fault is not None and self.model_refusal(body) is None:
            return await self.fault(fault, request, body)
        return self.respond(*self.answer(body), body)

    def unauthorized(self, auth: str | None, *, count: bool = True) -> web.Response:
        """The 401 for a request whose Authorization does not match ``require_key``."""
        key = (auth or "").removeprefix("Bearer ") if self.config["echo_auth"] else ""
        return self.error(401, f"Incorrect API key provided{': ' + key if key else ''} (fake provider)", count=count)

    def draw_fault(self, body: dict[str, Any]) -> str | None:
        """``fail_first`` (deterministic) first, then one draw against the random fault table."""
        for kind, seen, limit in (("fail_first", self.attempts, self.config["fail_first"]),
                                  ("empty", self.empties, self.config["empty_first"])):
            if limit > 0:
                key = request_key(body)
                seen[key] = seen.get(key, 0) + 1
                if seen[key] <= limit:
                    return kind
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
            wire = REQUEST_WIRE.get()
            return self.error(int(kind) if wire is None else wire.FAULTS[kind], f"fake injected {kind}")
        if kind == "hang":
            await asyncio.sleep(float(self.config["hang_s"]))
            return self.respond(*self.answer(body), body)
        if kind == "malformed":
            self.statuses[200] += 1
            return web.Response(body=MALFORMED_BODY, content_type="application/json")
        if kind == "empty":
            status, payload = self.answer(body, content="", finish_reason="length")
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            if status == 200 and self.config["empty_bills_limit"] and isinstance(limit, int):
                payload["usage"]["completion_tokens"] = limit  # it ran to its limit, and the limit is billed
                payload["usage"]["total_tokens"] = payload["usage"]["prompt_tokens"] + limit
            return self.respond(status, payload, body)
        abort_connection(request)
        raise asyncio.CancelledError  # nothing may be written on an aborted connection

    def answer(self, body: dict[str, Any], completion_id: str | None = None, content: str | None = None,
               finish_reason: str = "stop") -> tuple[int, dict[str, Any]]:
        """Return (HTTP status, JSON payload) for a chat body (a request's or a batch line's); counts nothing. 404 for a
        model not served, 400 for a malformed image or unsupported ``tools``; else a scripted tool call, a ``replies``
        match, else the schema-valid or default content (``content`` skips all four)."""
        refusal = self.model_refusal(body) or tools_refusal(body, self.config)
        if refusal is not None:
            return refusal
        if body.get("_invalid"):  # a native wire's request its provider refuses (anthropic_wire: unsigned thinking)
            return 400, error_payload(400, body["_invalid"])
        if (malformed := image_problem(body.get("messages"))) is not None:  # images.py: OpenAI's 400
            return 400, error_payload(400, malformed)
        messages, thought = body.get("messages"), None  # thought: reasoning_content on demand (thinking.py)
        if content is None and (call := scripted_call(body, self.config, message_text(messages))) is not None:
            reply = call_reply(body, call, completion_id or f"chatcmpl-fake-{self.requests}", self.config)
            if thought := with_thinking(self.config, body, "")[1]:  # a reasoning model thinks before it calls, too
                reply["choices"][0]["message"]["reasoning_content"] = thought
                reply["usage"] = billed_thinking(reply["usage"], thought, self.config)
            return 200, reply
        if content is None:
            match = self.match_reply(message_text(messages), str(body.get("model")))
            if match is not None and "status" in match:
                status = int(match["status"])
                return status, error_payload(status, f"fake reply status for match {match['match']!r}")
            content = match["content"] if match is not None else default_content(body, self.config,
                                                                                  self.arrival(body)) + turn_echo(body)
            if self.config["over_limit_tokens"]:  # a provider that ignores max_tokens
                content = " ".join(["word"] * self.config["over_limit_tokens"])
            content, thought = with_thinking(self.config, body, content)
        choice = {"index": 0, "message": assistant(content, thought), "finish_reason": finish_reason}
        if body.get("logprobs") and self.config["logprobs_supported"]:
            choice["logprobs"] = fake_logprobs(content, response_schema(body.get("response_format")),
                                               int(request_key(body)[:8], 16), self.config["logprob_alt"])
        return 200, {
            "id": completion_id or f"chatcmpl-fake-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "fake-model",
            "choices": [choice],
            "usage": self.prefixes.used(billed_thinking(usage(messages, content, self.config["tokenizer"]), thought,
                                                        self.config), messages, self.config),  # prefix_cache.py
        }

    def arrival(self, body: dict[str, Any]) -> int:
        """Return how often this exact request was answered before (always 0 without ``noise``: one reply)."""
        if not self.config["noise"]:
            return 0
        key = request_key(body)
        self.arrivals[key] = self.arrivals.get(key, -1) + 1
        return self.arrivals[key]

    def model_refusal(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The 404 for a model ``served_models`` does not list (None when it is served)."""
        served = self.config["served_models"]
        if served is None or body.get("model") in served:
            return None
        return 404, error_payload(404, f"The model `{body.get('model')}` does not exist or you do not have access "
                                       f"to it (fake provider serves: {', '.join(served)})")

    def respond(self, status: int, payload: dict[str, Any], body: dict[str, Any]) -> web.Response:
        """A chat response for :meth:`answer`'s result to ``body`` (in its wire's format), counted in ``statuses``."""
        if status != 200:
            return self.error(status, payload["error"]["message"])
        self.statuses[200] += 1
        wire = REQUEST_WIRE.get()
        cache = self.cached(body, payload["usage"])
        self.bill(payload["usage"])
        if wire is not None:
            payload = wire.reply(body, payload, *cache)
        if self.config["omit_usage"]:
            payload = {k: v for k, v in payload.items() if k not in ("usage", "usageMetadata")}
        return web.Response(text=json.dumps(payload), content_type="application/json")

    def cached(self, body: dict[str, Any], used: dict[str, Any]) -> tuple[int, int]:
        """Return the prompt tokens a native wire's request read from and wrote to the cache; (0, 0) for chat."""
        if body.get("_wire") is None:
            return 0, 0
        return native_wire(self.prefixes, body, used, self.config["tokenizer"])

    def bill(self, used: dict[str, Any]) -> None:
        """Count one reply on the bill (stats ``billed``): its tokens, and USD at ``bill_per_mtok`` when set."""
        self.billed["replies"] += 1
        self.billed["prompt_tokens"] += used["prompt_tokens"]
        self.billed["cached_tokens"] += used.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        self.billed["completion_tokens"] += used["completion_tokens"]
        self.billed["usd"] += billed_usd(used, self.config["bill_per_mtok"])

    def match_reply(self, prompt: str, model: str | None = None) -> dict[str, Any] | None:
        """The first ``replies`` entry whose ``match`` occurs in the prompt text (and whose ``model``, if any, asks)."""
        return next((e for e in self.config["replies"] if e["match"] in prompt and e.get("model") in (None, model)),
                    None)

    def error(self, status: int, message: str, *, count: bool = True, code: str | None = None) -> web.Response:
        """An OpenAI-style error response (429s carry Retry-After when configured), counted in ``statuses``."""
        if count:
            self.statuses[status] += 1
        if self.config["echo_auth"] and REQUEST_AUTH.get() is not None:
            message = f"{message}; received Authorization: {REQUEST_AUTH.get()}"
        headers = self.headers_429 if status in (429, 529) else None
        wire = REQUEST_WIRE.get()
        payload = error_body(status, message, code) if wire is None else json.dumps(wire.error_body(status, message))
        return web.Response(status=status, body=payload, content_type="application/json", headers=headers)

    def batch_gate(self, request: web.Request) -> web.Response | None:
        """Before every files/batches route: 404 without ``batches_supported``, 401 on a wrong key (uncounted)."""
        if not self.config["batches_supported"]:
            return self.error(404, f"Not Found: {request.method} {request.path} (this server has no Batch API)",
                              count=False, code="not_found")
        auth = request.headers.get("Authorization")
        REQUEST_AUTH.set(auth)
        if self.auth_header is not None and auth != self.auth_header:
            return self.unauthorized(auth, count=False)
        return None


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
