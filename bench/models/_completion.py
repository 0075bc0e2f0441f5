"""A model's answer as the seam returns it (``Completion``), and its usage, made for every reply: from the wire's
usage dict, from a cache entry, or shared with an identical request that was in flight.

Per reply this is the seam's own bookkeeping, so it is kept cheap: a ``Usage`` is a copy of a blank one with
the reply's values (3 µs, where ``Usage.model_construct`` takes 8), and the cache entry reads the values
directly instead of walking the model with ``model_dump``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from bench.core.errors import ProviderError
from bench.core.records import Usage


@dataclass(frozen=True)
class Completion:
    """One model answer: its text and what it cost."""

    text: str
    usage: Usage
    raw: dict[str, Any] | None = None  # the provider body (direct transport; via LiteLLM: its logprobs only)
    key: str | None = None  # the request's cache key (``LLM.keep`` stores a checked reply under it)
    logprobs: list | None = None  # [[token, [[alternative, logprob], …]], …] when asked for (kept in the cache)


_BLANK, _FIELDS = Usage.model_construct(), frozenset(Usage.model_fields)
# what the cache keeps of a reply's usage, in Usage's order (counts and paid attempts belong to one call)
KEPT = ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "attempts", "finish_reason", "batch_id",
        "over_limit", "estimated")


def usage_of(values: dict[str, Any]) -> Usage:
    """Return ``Usage.model_construct(**values)`` (the same fields set, unknown keys dropped), made faster."""
    return _BLANK.model_copy(update=values) if values.keys() <= _FIELDS else Usage.model_construct(**values)


def reused(stored: dict[str, Any]) -> Usage:
    """Return the usage of a reply answered without a request (the original call's tokens and cost)."""
    return usage_of({**stored, "cached": True, "calls": 0, "cache_hits": 1})


def cache_entry(comp: Completion) -> dict[str, Any]:
    """Return what the response cache stores of a reply: its text, the ``KEPT`` usage and its logprobs if any."""
    usage = comp.usage.__dict__  # the plain values model_dump(include=KEPT) returns
    return {"text": comp.text, "usage": {k: usage[k] for k in KEPT},
            **({"logprobs": comp.logprobs} if comp.logprobs else {})}


def settle_shared(fut: asyncio.Future, exc: BaseException) -> None:
    """End an in-flight request's future with its failure (a cancellation cancels it), for the identical calls
    waiting on it; marked retrieved, so a failure nobody shared is not logged as "never retrieved"."""
    if fut.done():
        return
    if isinstance(exc, Exception):
        fut.set_exception(exc)
        fut.exception()
    else:
        fut.cancel()


async def join(flying: asyncio.Future, key: str) -> Completion:
    """Wait for an identical request already in flight and share its reply; no request of our own."""
    try:
        text, usage, lps = await asyncio.shield(flying)
    except ProviderError as err:
        shared = ProviderError(str(err), kind=err.kind, status=err.status, retryable=err.retryable, attempts=0)
        shared.shared = True
        raise shared from None
    return Completion(text, reused(usage), None, key, lps)
