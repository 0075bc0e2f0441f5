"""Per-model caps: a model's ``max_concurrency``, ``rpm`` and ``tpm``, held for one process or a whole sweep
(counted per endpoint by ``bench.models._counters``; a sweep's lease server and clients: ``bench.models._leases``)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import weakref
from typing import Any, Protocol

from bench.models._counters import Caps, LocalLimiter
from bench.models._leases import TOKEN_ENV, LeaseServer, RemoteLimiter
from bench.models._messages import message_text, output_limit, prompt_messages

__all__ = ["CHARS_PER_TOKEN", "DEFAULT_COMPLETION_TOKENS", "SWEEP_KEY", "TOKEN_ENV", "URGENCY", "Caps", "LeaseServer",
           "Limiter", "LocalLimiter", "RemoteLimiter", "endpoint_key", "estimate_tokens", "limiter_for", "limits_of"]

# how long the caller's work still needs at its cap (items left per worker): a full shared cap gives its next slot to
# the most urgent waiter, so the model that bounds the sweep never waits behind one finishing early (0: no claim)
URGENCY: contextvars.ContextVar[float] = contextvars.ContextVar("bench_urgency", default=0.0)
SWEEP_KEY = "(sweep)"  # the lease server's counter of every request of the sweep
DEFAULT_COMPLETION_TOKENS = 1024  # the completion part of a tpm estimate when a request sets no max_tokens
CHARS_PER_TOKEN = 4


class Limiter(Protocol):
    """The per-model caps of some scope (an event loop, a sweep, a cluster)."""

    async def acquire(self, key: str, caps: Caps, estimate: int = 0, rank: float = 0.0) -> Any:
        """Wait until a request to ``key`` fits ``caps`` (charging ``estimate``, most ``rank`` first); a lease."""

    def release(self, lease: Any, tokens: int | None = None) -> None:
        """End a lease at once (never waits); ``tokens`` replaces its estimate when the reply said how many."""

    async def acquire_pair(self, key: str, caps: Caps, estimate: int, shared_key: str, shared_caps: Caps,
                           rank: float = 0.0) -> Any:
        """Take a lease on endpoint ``key`` and then one on the shared cap ``shared_key`` (most ``rank`` first)."""

    def release_pair(self, lease: Any, tokens: int | None = None) -> None:
        """End both leases of ``acquire_pair``; the endpoint's next request is in line for the shared slot first."""


def endpoint_key(spec: Any) -> str:
    """Return the key a model's counters live under: its model string and api_base."""
    return f"{spec.model} @ {(spec.api_base or '').rstrip('/')}"


@functools.lru_cache(maxsize=4096)
def limits_of(spec: Any) -> tuple[str, Caps] | None:
    """Return (endpoint key, caps) of a ModelSpec, or None when it declares no cap (memoized per spec)."""
    if not (spec.max_concurrency or spec.rpm or spec.tpm):
        return None
    return endpoint_key(spec), Caps(spec.max_concurrency, spec.rpm, spec.tpm)


def estimate_tokens(body: dict[str, Any]) -> int:
    """Return the tokens a request is charged before its reply: prompt characters / 4 plus its output limit."""
    chars = sum(len(message_text(m)) for m in prompt_messages(body))
    out = 0 if "input" in body else output_limit(body)  # an embedding has no output
    return -(-chars // CHARS_PER_TOKEN) + max(0, DEFAULT_COMPLETION_TOKENS if out is None else out)


_remote: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RemoteLimiter] = weakref.WeakKeyDictionary()


def limiter_for(window_s: float = 60.0, address: str | None = None) -> Limiter:
    """Return the running loop's limiter: the sweep's lease server at ``address`` (shared), else in-process counters."""
    if not address:
        return LocalLimiter(window_s)
    loop = asyncio.get_running_loop()
    limiter = _remote.get(loop)
    if limiter is None:
        limiter = _remote[loop] = RemoteLimiter(address)
    return limiter
