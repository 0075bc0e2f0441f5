"""A model's answer as the seam returns it (``Completion``) and its usage: from the transport, a cache entry or an
identical request in flight; a paid one claims the attempts kills left in flight (``with_lost``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from bench.core.errors import Halted, ProviderError
from bench.core.records import Usage
from bench.core.spend import LOST
from bench.models._paid import itemized, summed_known
from bench.models._transport import storable


@dataclass(frozen=True)
class Completion:
    """One model answer: its text and what it cost. Read-only."""

    text: str
    usage: Usage
    raw: dict[str, Any] | None = None  # the provider body (direct transport; via LiteLLM: its logprobs only)
    key: str | None = None  # the request's cache key (``LLM.keep`` stores a checked reply under it)
    logprobs: list | None = None  # [[token, [[alternative, logprob], …]], …] when asked for (kept in the cache)
    reasoning: str | None = None  # the reply's thinking, apart from ``text`` (bench.models.reasoning; cached)
    tool_calls: list[dict] | None = None  # [{"id", "type": "function", "function": {"name", "arguments"}}] (cached)
    thinking_blocks: list[dict] | None = None  # the signed thinking before tool calls, which Claude wants back (cached)


_FIELDS = frozenset(Usage.model_fields)
# what the cache keeps of a reply's usage, in Usage's order (``cache_entry`` spells them out; a test holds the two)
KEPT = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens", "cache_write_tokens", "cost_usd",
        "cache_saved_usd", "latency_s", "attempts", "finish_reason", "batch_id", "over_limit", "estimated")


_DEFAULTS = {name: f.get_default(call_default_factory=True) for name, f in Usage.model_fields.items()}
_new, _set = object.__new__, object.__setattr__


def usage_of(values: dict[str, Any]) -> Usage:
    """Return ``Usage.model_construct(**values)`` (same fields set, unknown keys dropped), without its field walk."""
    if not values.keys() <= _FIELDS:
        return Usage.model_construct(**values)
    made = _new(Usage)
    _set(made, "__dict__", {**_DEFAULTS, **values})
    _set(made, "__pydantic_fields_set__", set(values))
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


def completion(text: str, usage: Usage, raw: dict[str, Any] | None, key: str | None, logprobs: list | None,
               reasoning: str | None, tool_calls: list[dict] | None, blocks: list[dict] | None = None) -> Completion:
    """Return ``Completion(text, usage, raw, key, logprobs, reasoning, tool_calls, blocks)``, its ``__dict__`` set."""
    made = _new(Completion)
    _set(made, "__dict__", {"text": text, "usage": usage, "raw": raw, "key": key, "logprobs": logprobs,
                            "reasoning": reasoning, "tool_calls": tool_calls, "thinking_blocks": blocks})
    return made


def reused(stored: dict[str, Any]) -> Usage:
    """Return the usage of a reply answered without a request (the original call's tokens and cost)."""
    return usage_of({**stored, "cached": True, "calls": 0, "cache_hits": 1})


def hit_usage(stored: dict[str, Any], key: str, llm: Any) -> Usage:
    """Return a cache hit's usage: free, unless a killed process paid it unclaimed (then counted once)."""
    if key not in llm.unclaimed:
        return reused(stored)
    llm.unclaimed.discard(key)
    if llm.budget is not None:
        llm.budget.count(stored.get("cost_usd"))
    return with_lost(claimed(stored), key, llm.lost)


def with_lost(usage: Usage, key: str, lost: dict[str, list[float | None]]) -> Usage:
    """Return a paid reply's ``usage`` with the attempts of the same request kills left in flight (``lost``,
    taken out), each in ``paid_attempts`` marked ``estimated`` at this reply's cost capped by its reservation."""
    attempts = lost.pop(key, None) if lost else None
    if not attempts:
        return usage
    u = usage.__dict__
    own = u["paid_attempts"] or [itemized(u, u["attempts"])]
    last = own[-1]  # the reply that answered
    cost = last.get("cost_usd")
    each = [{"attempt": 0, LOST: key, "prompt_tokens": last.get("prompt_tokens"),
             "completion_tokens": last.get("completion_tokens"), "estimated": True,
             "cost_usd": r if cost is None else cost if r is None else min(r, cost)} for r in attempts]
    costs = [u["cost_usd"], *(a["cost_usd"] for a in each)]
    plus = lambda name: (u[name] or 0) + sum(a[name] or 0 for a in each)  # noqa: E731
    return usage_of({**u, "prompt_tokens": plus("prompt_tokens"), "completion_tokens": plus("completion_tokens"),
                     "cost_usd": None if None in costs else round(sum(costs), 12), "cached": False,
                     "paid_attempts": [*each, *own]})


def _own(u: dict[str, Any]) -> dict[str, Any]:
    """Return a usage's values without the attempts ``with_lost`` added: what the reply itself cost (cached)."""
    if not u["paid_attempts"] or not any(LOST in a for a in u["paid_attempts"]):
        return u
    own = [a for a in u["paid_attempts"] if LOST not in a]
    costs = [a.get("cost_usd") for a in own]
    return {**u, "prompt_tokens": summed_known(own, "prompt_tokens"),
            "completion_tokens": summed_known(own, "completion_tokens"),
            "cost_usd": None if None in costs else sum(costs)}


def claimed(stored: dict[str, Any]) -> Usage:
    """Return the usage of a cached reply a killed process paid and no record counted, as if asked now."""
    return usage_of({**stored, "cached": False, "calls": int(stored.get("attempts") or 1), "cache_hits": 0})


def cache_entry(comp: Completion) -> dict[str, Any]:
    """Return what the response cache stores of a reply: its text, the ``KEPT`` usage, and what else it holds."""
    u = _own(comp.usage.__dict__)  # the plain values model_dump(include=KEPT) returns, spelled out: no loop per reply
    entry = {"text": comp.text, "usage": {
        "prompt_tokens": u["prompt_tokens"], "completion_tokens": u["completion_tokens"],
        "reasoning_tokens": u["reasoning_tokens"], "cached_tokens": u["cached_tokens"],
        "cache_write_tokens": u["cache_write_tokens"], "cost_usd": u["cost_usd"],
        "cache_saved_usd": u["cache_saved_usd"], "latency_s": u["latency_s"],
        "attempts": u["attempts"], "finish_reason": u["finish_reason"], "batch_id": u["batch_id"],
        "over_limit": u["over_limit"], "estimated": u["estimated"]}}
    if comp.logprobs:
        entry["logprobs"] = comp.logprobs
    if comp.reasoning:
        entry["reasoning"] = comp.reasoning
    if comp.tool_calls:
        entry["tool_calls"] = comp.tool_calls
    if comp.thinking_blocks:
        entry["thinking_blocks"] = comp.thinking_blocks
    return entry


def thought(usage: dict[str, Any]) -> str | None:
    """Take the reply's reasoning text off the transport's usage dict and return it (a Usage holds no text)."""
    text = usage.pop("reasoning", None)
    return storable(text) if text else None


def settle_shared(fut: asyncio.Future | None, exc: BaseException) -> None:
    """End an in-flight request's future with its failure for identical calls waiting (marked retrieved)."""
    if fut is None or fut.done():
        return
    if isinstance(exc, Exception):
        fut.set_exception(exc)
        fut.exception()
    else:
        fut.cancel()


async def join(flying: dict[str, asyncio.Future | None], key: str) -> Completion:
    """Wait for an identical request already in flight and share its reply; a failure is raised anew to each."""
    fut = flying[key]
    if fut is None:
        fut = flying[key] = asyncio.get_running_loop().create_future()
    try:
        text, usage, lps, reasoning, calls, blocks = await asyncio.shield(fut)
    except ProviderError as err:
        shared = ProviderError(str(err), kind=err.kind, status=err.status, retryable=err.retryable, attempts=0)
        shared.shared = True
        raise shared from None
    except Halted as err:  # each waiter its own: a stop carries what its task finished (judge._asking.finished_before),
        raise type(err)(*err.args) from None  # and one stop shared by two tasks wrote those records twice
    return completion(text, reused(usage), None, key, lps, reasoning, calls, blocks)
