"""The one LLM seam: every model call of collect and judge goes through ``LLM.complete``.

What it guarantees, per process: at most ``max_concurrency`` requests in flight (one cap
for everything, plus an optional requests-per-minute cap per model); bounded retries
with exponential backoff and jitter on 429, 5xx, timeouts, dropped connections,
malformed bodies and empty replies, honouring Retry-After; nothing retried that cannot
succeed (400, auth, not found); a per-request timeout; an on-disk response cache keyed
by content; usage, latency and cost (None when unknown) on every answer.

OpenAI-compatible endpoints (OpenAI, OpenRouter, vLLM, llama.cpp, Ollama's /v1, the
embedded model) take the "direct" transport: LiteLLM resolves the route and translates
params once, then each request is one aiohttp POST. Other providers go through
``litellm.acompletion``. See README "The LLM seam" for the measured effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from bench.models.local import manager as local
from bench.models.cache import ResponseCache, request_key
from bench.core.errors import LocalModelError, ProviderError
from bench.models.ratelimit import Limiter, estimate_tokens, limiter_for, limits_of
from bench.core.records import Usage, canonical_json
from bench.models.routing import ModelSpec, Route, body_params, price_per_token, resolve
from bench.core.secrets import load_env, redact

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}


@dataclass(frozen=True)
class Completion:
    """One model answer: its text and what it cost."""

    text: str
    usage: Usage
    raw: dict[str, Any] | None = None  # the parsed provider body (direct transport), for audits
    key: str | None = None  # the request's cache key (``LLM.keep`` stores a checked reply under it)


@dataclass
class Limits:
    """Knobs of the seam. Defaults suit a hosted API; tests shrink the backoff."""

    max_concurrency: int = 16  # requests in flight for the whole process
    timeout_s: float = 60.0  # per attempt
    retries: int = 4  # extra attempts after the first, for retryable failures only
    backoff_s: float = 0.5  # first backoff; doubles per attempt, with jitter
    backoff_max_s: float = 30.0
    retry_budget_s: float = 300.0  # never keep retrying one request longer than this
    rate_window_s: float = 60.0  # the window of a model's `rpm` cap


@dataclass
class _LoopState:
    """Per-event-loop objects (asyncio primitives and sessions cannot cross loops)."""

    sem: asyncio.Semaphore
    sessions: dict[int, Any] = field(default_factory=dict)  # aiohttp.ClientSession per route
    limiter: Limiter | None = None  # per-model caps (bench.models.ratelimit), made on the first capped request
    in_flight: int = 0
    peak: int = 0


class LLM:
    """A client with one concurrency cap, one retry policy and one response cache."""

    journal: Any = None  # a bench.core.journal.Journal (set by bench.pipeline.make_llm): requests on the wire, per process

    def __init__(self, limits: Limits | None = None, cache: ResponseCache | str | None = None):
        load_env()
        self.limits = limits or Limits()
        self.cache = ResponseCache(cache) if isinstance(cache, str) or hasattr(cache, "__fspath__") else cache
        self._routes: dict[ModelSpec, Route] = {}
        self._loops: dict[int, tuple[asyncio.AbstractEventLoop, _LoopState]] = {}
        self._reached: set[str] = set()  # api_bases that answered at least once in this process
        self.calls = 0  # requests actually sent (attempts), for tests and progress
        self._timeouts: dict[float, Any] = {}  # aiohttp.ClientTimeout per value
        self._flying: dict[tuple[int, str], asyncio.Future] = {}  # (loop, request key) → the request on the wire

    # -- public -------------------------------------------------------------------------
    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], *,
                       params: dict[str, Any] | None = None, response_format: dict | None = None,
                       timeout_s: float | None = None, sample: int = 0, attempt: int = 1,
                       allow_empty: bool = False, cache_reply: bool = True) -> Completion:
        """Return the model's answer to ``messages``, from the cache when possible.

        ``params`` override the spec's generation params; ``sample`` separates repeats of
        the same request and ``attempt`` > 1 a resume's fresh try of an item that failed
        (both key the cache, never the wire). ``cache_reply=False`` leaves the reply out of
        the cache until the caller has checked it and calls ``keep``: a judge reply that
        cannot be parsed is never answered from the cache again. An identical request
        already in flight is not sent twice: this call waits for it and shares its reply.
        Raises ProviderError once retries are spent or for a failure that cannot succeed.
        """
        route = self._routes.get(spec)
        if route is None or route.api_base is None:
            route = await self._route(spec)
        merged = {**spec.params, **params} if params else spec.params
        settings = _settings(route, merged, params, response_format)  # also the param memo key
        key = request_key(route.identity, spec.model, settings, _sample_key(sample, attempt), canonical_json(messages))
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return Completion(hit["text"], _reused(hit["usage"]), None, key)
        flying = self._flying.get((id(asyncio.get_running_loop()), key))
        if flying is not None:  # the same request is on the wire: share its reply (or its failure)
            return await _join(flying, key)
        wire_messages = local.llama_messages(messages) if route.is_local else messages
        body = {"model": route.served_model, "messages": wire_messages,
                **body_params(route, merged, response_format, settings)}
        with self._in_flight(key) as done:
            if self.journal is not None:  # bench.core.journal: the key is journaled once the request is sent
                self.journal.arm(key)
            text, usage, raw = await self._with_retries(route, body, timeout_s or self.limits.timeout_s, allow_empty)
            text = storable(text)
            usage.update(calls=usage["attempts"], cache_hits=0)
            done.set_result((text, usage))
        comp = Completion(text, Usage.model_construct(**usage), raw, key)
        if cache_reply:
            self.keep(comp)
        return comp

    def keep(self, comp: Completion) -> None:
        """Store a checked reply in the response cache (``complete(..., cache_reply=False)`` left it out)."""
        if self.cache is not None and comp.key is not None and not comp.usage.cached:
            self.cache.put_later(comp.key, {"text": comp.text, "usage": comp.usage.model_dump(
                include={"prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "attempts", "finish_reason"})})

    @contextlib.contextmanager
    def _in_flight(self, key: str):
        """Register a request as in flight for the calls that ask the same meanwhile; yield its future."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # a failure nobody shared is not "unretrieved"
        self._flying[(id(loop), key)] = fut
        try:
            yield fut
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc) if isinstance(exc, Exception) else fut.cancel()
            raise
        finally:
            self._flying.pop((id(loop), key), None)

    def request_key(self, spec: ModelSpec, messages: list[dict[str, Any]], *, params: dict | None = None,
                    response_format: dict | None = None, sample: int = 0, attempt: int = 1) -> str:
        """Return the cache key ``complete`` would use for this request (no server is started, nothing sent)."""
        route = self._resolved(spec)
        merged = {**spec.params, **params} if params else spec.params
        settings = _settings(route, merged, params, response_format)
        return request_key(route.identity, spec.model, settings, _sample_key(sample, attempt), canonical_json(messages))

    def peak_in_flight(self) -> int:
        """Return the most requests this client had in flight at once on the current loop."""
        return self._state().peak

    async def aclose(self) -> None:
        """Commit pending cache entries and close the HTTP session of the current event loop."""
        if self.cache is not None:
            self.cache.flush()
        st = self._loops.pop(id(asyncio.get_running_loop()), (None, None))[1]
        for session in (list(st.sessions.values()) if st is not None else ()):  # a copy: a late task may add one
            await session.close()

    # -- routing and per-loop state -----------------------------------------------------
    def _resolved(self, spec: ModelSpec) -> Route:
        route = self._routes.get(spec)
        if route is None:
            route = resolve(spec)
            self._routes[spec] = route
        return route

    async def _route(self, spec: ModelSpec) -> Route:
        route = self._resolved(spec)
        if route.is_local and route.api_base is None:
            try:
                ep = await asyncio.to_thread(local.ensure, spec.model)
            except LocalModelError as err:  # recorded like any provider failure, redone on resume
                raise ProviderError(str(err), kind="local_model", retryable=False) from None
            route.api_base, route.served_model = ep.api_base, ep.served_model
        return route

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        entry = self._loops.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = (loop, _LoopState(asyncio.Semaphore(self.limits.max_concurrency)))
            self._loops[id(loop)] = entry
        return entry[1]

    # -- retries ------------------------------------------------------------------------
    async def _with_retries(self, route: Route, body: dict, timeout_s: float,
                            allow_empty: bool) -> tuple[str, dict[str, Any], dict | None]:
        lim = self.limits
        start = time.monotonic()
        for attempt in range(lim.retries + 1):
            try:
                text, usage, raw = await self._attempt(route, body, timeout_s)
                if not text and not allow_empty:
                    raise ProviderError(f"{route.spec.model} returned empty content "
                                        f"(finish_reason={usage['finish_reason']})", kind="empty", retryable=True)
                usage["attempts"] = attempt + 1
                return text, usage, raw
            except ProviderError as err:
                err.attempts = attempt + 1
                if not err.retryable or attempt == lim.retries:
                    raise
                delay = min(lim.backoff_max_s, lim.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)
                if err.retry_after is not None:
                    delay = max(delay, err.retry_after)
                if time.monotonic() - start + delay > lim.retry_budget_s:
                    raise ProviderError(f"{err} (gave up: retry budget of {lim.retry_budget_s:.0f} s spent)",
                                        kind=err.kind, status=err.status, retryable=True,
                                        attempts=attempt + 1) from err
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _attempt(self, route: Route, body: dict, timeout_s: float) -> tuple[str, dict[str, Any], dict | None]:
        st = self._state()
        spec = route.spec
        if not (spec.max_concurrency or spec.rpm or spec.tpm):
            return await self._send_capped(st, route, body, timeout_s)
        key, caps = limits_of(spec)  # type: ignore[misc]
        limiter = st.limiter
        if limiter is None:  # in-process counters, or the sweep's lease server (BENCH_LIMITS_ADDRESS)
            limiter = st.limiter = limiter_for(self.limits.rate_window_s)
        # the model's own caps first, so waiting never holds a global slot
        lease = await limiter.acquire(key, caps, estimate_tokens(body) if caps.tpm else 0)
        tokens = None
        try:
            text, usage, raw = await self._send_capped(st, route, body, timeout_s)
            if usage.get("prompt_tokens") is not None and usage.get("completion_tokens") is not None:
                tokens = usage["prompt_tokens"] + usage["completion_tokens"]  # the estimate, corrected
            return text, usage, raw
        finally:
            limiter.release(lease, tokens)

    async def _send_capped(self, st: _LoopState, route: Route, body: dict,
                           timeout_s: float) -> tuple[str, dict[str, Any], dict | None]:
        async with st.sem:
            st.in_flight += 1
            st.peak = max(st.peak, st.in_flight)
            self.calls += 1
            if self.journal is not None:  # on the wire now: a kill from here on may repay it
                self.journal.sent()
            t0 = time.perf_counter()
            try:
                if route.transport == "direct":
                    text, usage, raw = await self._send_direct(st, route, body, timeout_s)
                else:
                    text, usage, raw = await _send_litellm(route, body, timeout_s)
            finally:
                st.in_flight -= 1
        usage["latency_s"] = round(time.perf_counter() - t0, 4)
        usage["cost_usd"] = _cost(route, usage)
        usage["cached"] = False
        return text, usage, raw

    # -- transports ---------------------------------------------------------------------
    async def _send_direct(self, st: _LoopState, route: Route, body: dict, timeout_s: float):
        import aiohttp  # noqa: PLC0415 (kept out of `import bench`)

        session = st.sessions.get(id(route))
        if session is None:  # per route: its headers (the key, read once, kept in memory only) and timeout
            # live on the session, since merging headers and arming timers per request costs throughput
            session = st.sessions[id(route)] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                timeout=aiohttp.ClientTimeout(total=self.limits.timeout_s),
                headers={"Content-Type": "application/json",
                         "Authorization": f"Bearer {route.api_key() or 'not-needed'}"})
        extra = {}
        if timeout_s != self.limits.timeout_s:  # e.g. a judge batch, whose timeout scales with its size
            extra["timeout"] = self._timeouts.get(timeout_s) or self._timeouts.setdefault(
                timeout_s, aiohttp.ClientTimeout(total=timeout_s))
        try:
            async with session.post(f"{route.api_base}/chat/completions", data=json.dumps(body).encode(),
                                    **extra) as resp:
                payload = await resp.read()
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        except asyncio.TimeoutError:
            raise ProviderError(f"{route.spec.model} at {route.api_base}: no answer within {timeout_s:g} s",
                                kind="timeout", retryable=True) from None
        except aiohttp.ClientConnectorError as exc:
            reached = route.api_base in self._reached  # a server that answered before may be restarting
            raise ProviderError(f"cannot connect to {route.api_base} for {route.spec.model}: {exc.os_error}; "
                                f"is the server running and the api_base right?", kind="connection",
                                retryable=reached) from None
        except aiohttp.ClientError as exc:
            raise ProviderError(f"{route.spec.model} at {route.api_base}: connection dropped "
                                f"({type(exc).__name__}: {exc})", kind="connection", retryable=True) from None
        self._reached.add(route.api_base)
        return _parse_openai(route, status, payload, retry_after)


def _sample_key(sample: int, attempt: int) -> str | int:
    """Return the repeat part of a request's identity (the first attempt keeps the spelling of old caches)."""
    return sample if attempt <= 1 else f"{sample}#attempt{attempt}"


def _reused(stored: dict[str, Any]) -> Usage:
    """Return the usage of a reply answered without a request (the original call's tokens and cost)."""
    return Usage.model_construct(**{**stored, "cached": True, "calls": 0, "cache_hits": 1})


async def _join(flying: asyncio.Future, key: str) -> Completion:
    """Wait for an identical request already in flight and share its reply; no request of our own."""
    try:
        text, usage = await asyncio.shield(flying)
    except ProviderError as err:
        shared = ProviderError(str(err), kind=err.kind, status=err.status, retryable=err.retryable, attempts=0)
        shared.shared = True
        raise shared from None
    return Completion(text, _reused(usage), None, key)


def storable(text: str) -> str:
    """Return ``text`` as valid Unicode: a lone surrogate (a provider's invalid UTF-8, escaped in its
    JSON) becomes visible ``\\udcxx`` text instead of making every later write of the record fail."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _settings(route: Route, merged: dict, params: dict | None, response_format: dict | None) -> str:
    """Return the canonical spelling of (params, response_format), memoized for the spec's own params."""
    if params or response_format is not None:
        return canonical_json(merged) + "\x1f" + canonical_json(response_format)
    if route.base_settings is None:
        route.base_settings = canonical_json(merged) + "\x1f" + canonical_json(None)
    return route.base_settings


def _parse_openai(route: Route, status: int, payload: bytes, retry_after: str | None):
    """Turn an OpenAI-format HTTP reply into (text, usage dict, body) or a ProviderError."""
    if status != 200:
        raise _http_error(route, status, payload, retry_after)
    try:
        data = json.loads(payload)
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        snippet = redact(payload[:4096].decode("utf-8", "replace"))[:120]  # redacted before the cut: no half key
        raise ProviderError(f"{route.spec.model}: malformed reply body ({snippet!r})",
                            kind="malformed", retryable=True) from None
    u = data.get("usage") or {}
    usage = {"prompt_tokens": u.get("prompt_tokens"), "completion_tokens": u.get("completion_tokens"),
             "finish_reason": choice.get("finish_reason")}
    return text, usage, data


def _http_error(route: Route, status: int, payload: bytes, retry_after: str | None) -> ProviderError:
    """Classify a non-200 reply: retryable (429, 5xx, …) or final (400, 401, 403, 404, …)."""
    try:
        detail = redact(str(json.loads(payload)["error"]["message"]))  # a gateway may echo the Authorization header
    except (ValueError, KeyError, TypeError):
        detail = redact(payload[:4096].decode("utf-8", "replace"))[:200]  # redacted before the cut: no half key
    kinds = {400: "bad_request", 401: "auth", 403: "auth", 404: "not_found", 429: "rate_limit"}
    kind = kinds.get(status, "server" if status >= 500 else "http")
    hint = {"auth": "; check the key variable", "not_found": "; check the model name and api_base"}.get(kind, "")
    return ProviderError(f"{route.spec.model} at {route.api_base}: HTTP {status}: {detail}{hint}",
                         kind=kind, status=status, retryable=status in RETRYABLE_STATUS,
                         retry_after=_parse_retry_after(retry_after))


def _parse_retry_after(value: str | None) -> float | None:
    """Return Retry-After in seconds (numeric or HTTP-date form), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None


def _cost(route: Route, usage: dict[str, Any]) -> float | None:
    """Return the USD cost of one answer, or None when the price or the token counts are unknown."""
    price = price_per_token(route)
    if price is None or usage.get("prompt_tokens") is None or usage.get("completion_tokens") is None:
        return None
    return price[0] * usage["prompt_tokens"] + price[1] * usage["completion_tokens"]


async def _send_litellm(route: Route, body: dict, timeout_s: float):
    """Send one request through ``litellm.acompletion`` (non-OpenAI wire formats)."""
    from bench.models._litellm import litellm  # noqa: PLC0415

    lm = litellm()
    kwargs = {k: v for k, v in body.items() if k not in ("model", "messages")}
    try:
        resp = await lm.acompletion(model=route.spec.model, messages=body["messages"], api_base=route.api_base
                                    if route.spec.api_base else None, api_key=route.api_key() or ("not-needed" if route.spec.api_base else None),
                                    timeout=timeout_s, num_retries=0, **kwargs)
    except Exception as exc:  # LiteLLM maps every provider error onto OpenAI's exception classes
        raise _litellm_error(route, exc) from None
    choice = resp.choices[0]
    u = getattr(resp, "usage", None)
    usage = {"prompt_tokens": getattr(u, "prompt_tokens", None),
             "completion_tokens": getattr(u, "completion_tokens", None),
             "finish_reason": getattr(choice, "finish_reason", None)}
    return choice.message.content or "", usage, None


def _litellm_error(route: Route, exc: Exception) -> ProviderError:
    """Classify a LiteLLM exception by its HTTP status (timeouts and connection errors retry)."""
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    text = redact(str(exc))  # LiteLLM copies the provider's error body, which may echo the key
    msg = f"{route.spec.model}: {name}: {text.splitlines()[0][:300] if text else ''}"
    if "Timeout" in name:
        return ProviderError(msg, kind="timeout", status=status, retryable=True)
    if "APIConnectionError" in name and status in (None, 500):
        return ProviderError(msg, kind="connection", status=status, retryable=True)
    kinds = {400: "bad_request", 401: "auth", 403: "auth", 404: "not_found", 429: "rate_limit"}
    kind = kinds.get(status or 0, "server" if (status or 0) >= 500 else "http")
    return ProviderError(msg, kind=kind, status=status, retryable=status in RETRYABLE_STATUS,
                         retry_after=_parse_retry_after(headers.get("retry-after") if headers else None))


# -- the process-wide default client ------------------------------------------------------
_default: LLM | None = None


def configure(limits: Limits | None = None, cache: ResponseCache | str | None = None, **limit_kw: Any) -> LLM:
    """Replace the process-wide client (one cap for the whole process) and return it."""
    global _default
    _default = LLM(limits or Limits(**limit_kw), cache=cache)
    return _default


def client() -> LLM:
    """Return the process-wide client, creating one with default limits and no cache."""
    return _default if _default is not None else configure()


async def complete(spec: ModelSpec, messages: list[dict[str, Any]], **kw: Any) -> Completion:
    """Answer ``messages`` with the process-wide client (see ``LLM.complete``)."""
    return await client().complete(spec, messages, **kw)
