"""The one LLM seam: every model call of collect and judge goes through ``LLM.complete``, under the process's caps,
retries, timeout and response cache, with usage, latency and cost on every answer (docs/llm-seam.md)."""

from __future__ import annotations

import asyncio
import random
import time
import types
from dataclasses import dataclass, field
from typing import Any

from bench.core.errors import Halted, LocalModelError, ProviderError, Stopping
from bench.core.images import inline_images
from bench.core.secrets import load_env
from bench.models import dry
from bench.models._completion import (Completion, cache_entry, completion, hit_usage, join, settle_shared, thought,
                                      usage_of, with_lost)
from bench.models._direct import Endpoint
from bench.models._no_answer import no_answer
from bench.models._paid import PaidAttempts, lines_cost, reconcile
from bench.models._request_keys import KeyMaker, settings_of
from bench.models._transport import (Reply, open_endpoint, send_direct, send_litellm, storable,
                                     token_logprobs)
from bench.models.batches.ledger import Ledger
from bench.models.batch_policy import BATCH_POOL
from bench.models.batches.queue import Batcher
from bench.models.batches.batch_api import close_clients, line_body
from bench.models.budget import Budget, Held, reservation
from bench.models.embeddings import Embedding, embed, send_embedding
from bench.models.cache import ResponseCache
from bench.models.limits import Limits
from bench.models.ratelimit import (SWEEP_KEY, URGENCY, Caps, Limiter, LocalLimiter, estimate_tokens, limiter_for,
                                    limits_of)
from bench.models.routing import ModelSpec, Route, body_params, resolve
from bench.models.tools_support import calls_text, with_tools


@dataclass
class _LoopState:
    """Per-event-loop objects (asyncio primitives and connections cannot cross loops)."""

    cap: asyncio.Semaphore  # the process cap (asyncio's own: since Python 3.11.1 nobody overtakes a waiter)
    endpoints: dict[int, Endpoint] = field(default_factory=dict)  # a direct route's session (bench.models._direct)
    limiter: Limiter | None = None  # per-model caps (bench.models.ratelimit), made on the first capped request
    batchers: dict[int, Batcher] = field(default_factory=dict)  # a batched route's queue (bench.models.batches)
    in_flight: int = 0
    peak: int = 0
    shared: int | None = None  # the sweep's global cap held by its lease server (LLM.sweep_cap), read once per loop
    flying: dict[str, asyncio.Future | None] = field(default_factory=dict)  # key → in flight (a future once shared)


class LLM:
    """A client with one concurrency cap, one retry policy and one response cache."""

    journal: Any = None  # a bench.core.journal.Journal (set by bench.stage_runs.make_llm): requests in flight, per process
    batch_dir: Any = None  # <run folder>/batches (set by bench.stage_runs.make_llm): the ledger of provider batches
    image_folder: Any = None  # <run folder>/images (set by bench.stage_runs.make_llm): the images requests carry

    def __init__(self, limits: Limits | None = None, cache: ResponseCache | str | None = None):
        load_env()
        self.limits = limits or Limits()
        self.cache = ResponseCache(cache) if isinstance(cache, str) or hasattr(cache, "__fspath__") else cache
        self._routes: dict[ModelSpec, Route] = {}
        self._loops: dict[int, tuple[asyncio.AbstractEventLoop, _LoopState]] = {}
        self._reached: set[str] = set()  # api_bases that answered at least once in this process
        self.calls = 0  # requests actually sent (attempts), for tests and progress
        self._keys = KeyMaker()  # request keys, from a hasher per model and settings (bench.models._request_keys)
        self.ledger: Ledger | None = None  # the batch ledger, read on the first batched request
        self.budget: Budget | None = None  # limits.budget_usd (set by bench.stage_runs.make_llm): bench.models.budget
        self.lease_server: str | None = None  # the sweep's lease server (set by make_llm): caps held sweep-wide there
        self.sweep_cap: int | None = None  # limits.max_concurrency held there across executions side by side
        self.unclaimed: set[str] = set()  # replies a killed process paid and cached (bench.core.journal.unclaimed_keys)
        self.lost: dict[str, list[float | None]] = {}  # requests kills left in flight (bench.core.spend.open_lost)
        self.stopping = False  # set by a first Ctrl-C (bench.stage_runs.StageStop): no request is sent any more

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], *, tools: list[dict] | None = None,
                       tool_choice: Any = None, params: dict[str, Any] | None = None,
                       response_format: dict | None = None, timeout_s: float | None = None, sample: int = 0,
                       attempt: int = 1, allow_empty: bool = False, cache_reply: bool = True,
                       label: str | None = None) -> Completion:
        """Return the model's answer to ``messages``, from the cache when possible; an identical request in flight
        is shared. ``params`` override the spec's; ``sample`` and ``attempt`` > 1 key the cache, never the request;
        ``cache_reply=False`` caches nothing until ``keep``; a ``batch`` model goes through its Batch API (``label``
        names the item). Raises ProviderError once retries are spent or for a failure that cannot succeed."""
        st = self._state()
        if st.cap.locked():  # it would wait for a slot: the requests being sent go in flight before this one's
            await _next_turn()  # key, lookup and body (docs/llm-seam.md)
        route = self._routes.get(spec)
        if route is None or route.api_base is None:
            route = await self._route(spec)
        merged = {**spec.params, **params} if params else spec.params
        settings = settings_of(route, merged, params, response_format, tools, tool_choice)  # also the param memo key
        key = self._keys.key(route, settings, sample, attempt, messages)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return completion(hit["text"], hit_usage(hit["usage"], key, self), None, key,
                              hit.get("logprobs"), hit.get("reasoning"), hit.get("tool_calls"),
                              hit.get("thinking_blocks"))
        flying = st.flying
        if key in flying:  # the same request is in flight: share its reply (or its failure)
            return await join(flying, key)
        wire_messages = route.provider.wire_messages(inline_images(messages, self.image_folder))  # stored → data URL
        body = {"model": route.served_model, "messages": wire_messages,
                **body_params(route, merged, response_format, settings)}
        tooled = tools or tool_choice is not None
        if tooled:  # in OpenAI's form: LiteLLM translates them once, when it sends them
            body, merged = with_tools(body, tools, tool_choice), with_tools(merged, tools, tool_choice)
        flying[key] = None  # an identical call meanwhile puts a future here, and waits for it
        try:
            if route.spec.batch is not None:
                line = line_body(route, body, merged, response_format)  # OpenAI's form, for LiteLLM to translate
                text, usage, raw = await self._via_batch(route, body, key, label, allow_empty, line)
            else:
                if self.journal is not None:  # bench.core.journal: the key is journaled once the request is sent
                    self.journal.arm(key)
                text, usage, raw = await self._with_retries(st, route, body, timeout_s or self.limits.timeout_s,
                                                            allow_empty, key)
            text, lps, reasoning = storable(text), token_logprobs(raw), thought(usage)  # bench.models.reasoning
            calls = usage.pop("tool_calls", None) if tooled else None
            blocks = usage.pop("thinking_blocks", None)
            usage["calls"], usage["cache_hits"] = usage["attempts"], 0
        except BaseException as exc:
            settle_shared(flying.pop(key, None), exc)
            raise
        if (shared := flying.pop(key, None)) is not None:  # identical calls waited for it
            shared.set_result((text, usage, lps, reasoning, calls, blocks))
        comp = completion(text, with_lost(usage_of(usage), key, self.lost), raw, key, lps, reasoning, calls, blocks)
        if cache_reply and self.cache is not None:  # ``keep``, without asking what a fresh reply is
            self.cache.put(key, cache_entry(comp))  # in its file before the caller sees the reply
        return comp

    async def embed(self, spec: ModelSpec, text: str, *, timeout_s: float | None = None) -> Embedding:
        """Return ``text``'s embedding by ``spec``, cached, capped, budgeted and priced like a completion."""
        return await embed(self, spec, text, timeout_s)

    def keep(self, comp: Completion) -> None:
        """Store a checked reply in the response cache (``complete(..., cache_reply=False)`` left it out)."""
        if self.cache is not None and comp.key is not None and not comp.usage.cached:
            self.cache.put(comp.key, cache_entry(comp))

    def request_key(self, spec: ModelSpec, messages: list[dict[str, Any]], *, tools: list[dict] | None = None,
                    tool_choice: Any = None, params: dict | None = None, response_format: dict | None = None,
                    sample: int = 0, attempt: int = 1) -> str:
        """Return the cache key ``complete`` would use for this request (no server is started, nothing sent)."""
        route = self._resolved(spec)
        merged = {**spec.params, **params} if params else spec.params
        settings = settings_of(route, merged, params, response_format, tools, tool_choice)
        return self._keys.key(route, settings, sample, attempt, messages)

    async def reserve(self, route: Route, body: dict[str, Any], *, batch: bool) -> Held | None:
        """Reserve a paid request's worst case before sending it (bench.models.budget; raises BudgetReached)."""
        return None if self.budget is None else await self.budget.reserve(route, body, batch=batch)

    def settle(self, held: Held | None, paid: dict[str, Any] | float | None) -> None:
        """End a reservation with the reply's usage or cost (0.0: nothing was paid; None: unknown, as reserved)."""
        if held is not None and self.budget is not None:
            self.budget.settle(held, paid)

    def pool(self, items: int, specs: Any = ()) -> int:
        """Return how many items a stage works on at once: twice the cap, or every item if a spec is batched."""
        batched = any(spec.batch is not None for spec in specs)
        return max(1, min(items, BATCH_POOL if batched else 2 * self.limits.max_concurrency))

    def peak_in_flight(self) -> int:
        """Return the most requests this client had in flight at once on the current loop."""
        return self._state().peak

    async def aclose(self) -> None:
        """Write the cache replies kept in memory, and close the HTTP connections of the current event loop."""
        if self.cache is not None:
            self.cache.flush()
        st = self._loops.pop(id(asyncio.get_running_loop()), (None, None))[1]
        for endpoint in (list(st.endpoints.values()) if st is not None else ()):  # a copy: a late task may add one
            await endpoint.close()
        if st is not None and st.batchers:  # LiteLLM's files/batches clients are cached per loop: close them with it
            await close_clients()

    async def _via_batch(self, route: Route, body: dict, key: str, label: str | None, allow_empty: bool,
                         line: dict) -> Reply:
        """Answer one request of a batched model through its endpoint's batch queue (bench.models.batches)."""
        if self.stopping:
            raise Stopping("interrupted (Ctrl-C): no new request is sent")
        self.calls += 1
        held = await self.reserve(route, body, batch=True)  # limits.budget_usd, before it joins a batch
        try:
            text, usage, raw = await self._batcher(route).ask(key, body, label, allow_empty, line)
        except BaseException as err:  # paid lines it carries (a conflict, an unusable reply) count; a 4xx does not
            self.settle(held, lines_cost(getattr(err, "paid", None)))
            raise  # below: a direct retry settled its own request; only the batch lines it paid first are left
        self.settle(held, (usage["cost_usd"] or 0.0) if usage.get("batch_id") else lines_cost(usage.get("paid_attempts")))
        return text, usage, raw

    def _batcher(self, route: Route) -> Batcher:
        """Return the batch queue of ``route`` on this loop (bench.models.batches.queue)."""
        st = self._state()
        batcher = st.batchers.get(id(route))
        if batcher is None:
            if self.ledger is None:
                self.ledger = Ledger(self.batch_dir)

            async def direct(r: Route, body: dict, key: str, allow_empty: bool) -> Reply:  # retry: direct
                return await self._with_retries(st, r, body, self.limits.timeout_s, allow_empty, key)

            batcher = st.batchers[id(route)] = Batcher(route, self.ledger, retries=self.limits.retries,
                                                       direct=direct, backoff_s=self.limits.backoff_s)
        return batcher

    def _resolved(self, spec: ModelSpec) -> Route:
        route = self._routes.get(spec)
        if route is None:
            route = resolve(spec)
            self._routes[spec] = route
        return route

    async def _route(self, spec: ModelSpec) -> Route:
        route = self._resolved(spec)
        if route.provider.launches and route.api_base is None:
            try:
                await asyncio.to_thread(route.provider.launch, route)
            except LocalModelError as err:  # recorded like any provider failure, redone on resume
                raise ProviderError(str(err), kind="local_model", retryable=False) from None
        return route

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        entry = self._loops.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = (loop, _LoopState(asyncio.Semaphore(self.limits.max_concurrency),
                                      shared=self.sweep_cap if self.lease_server else None))
            self._loops[id(loop)] = entry
        return entry[1]

    async def _with_retries(self, st: _LoopState, route: Route, body: dict, timeout_s: float, allow_empty: bool,
                            key: str) -> Reply:
        """Send ``body`` until a usable reply, under the model's and the sweep's caps if any, else the process cap."""
        lim = self.limits
        start = time.monotonic()
        paid = None  # the billed replies not used (empty): a PaidAttempts (bench.models._paid), made at the first
        capped = limits_of(route.spec)
        direct = capped is None and st.shared is None
        for attempt in range(lim.retries + 1):
            try:
                reply = await (self._send_capped(st, route, body, timeout_s, key) if direct else
                               self._send_leased(st, route, body, timeout_s, key, capped))
                text, usage, raw = reply
                if not text and not allow_empty and "tool_calls" not in usage:  # billed; retried unless it thought
                    if paid is None:
                        paid = PaidAttempts(route.spec.model)
                    paid.add(usage, attempt + 1)
                    raise no_answer(route.spec.model, usage)
                if paid is not None:
                    reply = text, paid.total(usage, attempt + 1), raw
                reply[1]["attempts"] = attempt + 1
                return reply
            except Halted as stop:  # the budget refused a retry: fail with what was paid, never unrecorded
                raise (stop if paid is None else paid.refused(stop)) from None
            except ProviderError as err:
                err.attempts, err.paid = attempt + 1, [] if paid is None else paid.items
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
                st = self._state()  # as the first attempt found it, unless the client was closed meanwhile (aclose):
                direct = capped is None and st.shared is None  # then fresh connections, not the closed ones
        raise AssertionError("unreachable")

    async def _send_leased(self, st: _LoopState, route: Route, body: dict, timeout_s: float, key: str,
                           capped: tuple[str, Caps] | None) -> Reply:
        shared = st.shared  # a cluster sweep's global cap, held by its lease server across every worker
        limiter = st.limiter
        if limiter is None:  # in-process counters, or the sweep's lease server
            limiter = st.limiter = limiter_for(self.limits.rate_window_s, self.lease_server)
        leases: list[tuple[Any, Any]] = []  # (how to end it, the lease)
        tokens = None
        try:  # the model's own caps first, so waiting never holds a shared slot; the shared cap most urgent first
            if capped is not None:
                endpoint, caps = capped
                estimate = estimate_tokens(body) if caps.tpm else 0
                if shared is None and isinstance(limiter, LocalLimiter):
                    shared = self.limits.max_concurrency  # the process cap, held in the same queue (st.cap: FIFO)
                if shared is not None:  # one call for both (one round trip to a lease server)
                    pair = await limiter.acquire_pair(endpoint, caps, estimate, SWEEP_KEY if st.shared else
                                                      PROCESS_KEY, Caps(max_concurrency=shared), rank=URGENCY.get())
                    leases.append((limiter.release_pair, pair))
                else:  # another process's lease server without a sweep cap: the process cap stays st.cap's
                    leases.append((limiter.release, await limiter.acquire(endpoint, caps, estimate)))
            elif shared is not None:  # the sweep's cap alone (a model without caps of its own)
                leases.append((limiter.release, await limiter.acquire(SWEEP_KEY, Caps(max_concurrency=shared),
                                                                      rank=URGENCY.get())))
            text, usage, raw = await self._send_capped(st, route, body, timeout_s, key)
            if usage.get("prompt_tokens") is not None and usage.get("completion_tokens") is not None:
                tokens = usage["prompt_tokens"] + usage["completion_tokens"]  # the estimate, corrected
            return text, usage, raw
        finally:
            for i, (end, lease) in enumerate(leases):
                end(lease, tokens if i == 0 and capped is not None else None)

    async def _send_capped(self, st: _LoopState, route: Route, body: dict, timeout_s: float, key: str) -> Reply:
        await st.cap.acquire()
        try:
            if self.stopping:  # a Ctrl-C while this request waited for its slot: it is not sent (Halted: no record)
                raise Stopping("interrupted (Ctrl-C): no new request is sent")
            budget = self.budget  # reserved under the cap: only what is about to be sent
            held = None if budget is None else await budget.reserve(route, body, batch=False)
            st.in_flight += 1
            if st.in_flight > st.peak:
                st.peak = st.in_flight
            self.calls += 1
            if self.journal is not None and self.journal.pending():  # in flight now: a kill may repay it
                self.journal.sent(held.usd if held is not None else reservation(route, body))
            t0 = time.perf_counter()
            try:
                if "input" in body:  # an embeddings request (bench.models.embeddings)
                    reply = await send_embedding(self, st, route, body, timeout_s)
                elif route.transport == "direct":
                    reply = await send_direct(self._endpoint(st, route), route, body, timeout_s, self._reached)
                elif route.provider.answers_in_process:
                    reply = dry.answer(body, seed=key)  # in-process: the request key seeds the reply
                else:
                    reply = await send_litellm(route, body, timeout_s)
            except BaseException:
                self.settle(held, 0.0)  # a failed request is not billed (its record counts nothing)
                raise
            finally:
                st.in_flight -= 1
        finally:
            st.cap.release()
        text, usage, _raw = reply  # completed in place: the reply goes back as it came
        usage["latency_s"] = round(time.perf_counter() - t0, 4)
        reconcile(route, body, text or calls_text(usage), usage)  # no usage: estimated, never zero; priced
        usage["cached"] = False
        if held is not None:
            self.settle(held, usage)
        return reply

    def _endpoint(self, st: _LoopState, route: Route) -> Endpoint:
        """Return the HTTP endpoint of ``route`` on this loop (one per route: its session and its connections)."""
        endpoint = st.endpoints.get(id(route))
        if endpoint is None:
            endpoint = st.endpoints[id(route)] = open_endpoint(route, int(self.limits.max_reply_mb * 2**20))
        return endpoint


@types.coroutine
def _next_turn():  # type: ignore[no-untyped-def]
    """Let the event loop run what is ready first (``asyncio.sleep(0)``'s bare yield, without its coroutine)."""
    yield


PROCESS_KEY = "(process)"  # the process cap's gate in own counters: capped requests wait there, most urgent first


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
