"""A request's cache key: sha256 over its identity parts. All but the messages are the same for one model and
settings, so a ``KeyMaker`` hashes them once and each request feeds only its messages (docs/llm-seam.md)."""

from __future__ import annotations

import hashlib
from typing import Any

from bench.core.records import canonical_json
from bench.models._json import messages_bytes
from bench.models.providers import Route


def identity(route: Route) -> str:
    """Return the endpoint part of a request's identity: the route's, with the spec's ``think_end`` if any."""
    end = route.spec.think_end
    return route.identity if end is None else f"{route.identity}\x1fthink_end={end}"


def sample_key(sample: int, attempt: int) -> str | int:
    """Return the repeat part of a request's identity (the first attempt keeps the spelling of old caches)."""
    return sample if attempt <= 1 else f"{sample}#attempt{attempt}"


def settings_of(route: Route, merged: dict, params: dict | None, response_format: dict | None,
                tools: list[dict] | None = None, tool_choice: Any = None) -> str:
    """Return the canonical spelling of (params, response_format), memoized for the spec's own params, and of
    (tools, tool_choice) after them when there are any (a request without tools keeps the key of old caches)."""
    if tools or tool_choice is not None:
        return "\x1f".join((canonical_json(merged), canonical_json(response_format), canonical_json(tools or None),
                             canonical_json(tool_choice)))
    if params or response_format is not None:
        return canonical_json(merged) + "\x1f" + canonical_json(response_format)
    if route.base_settings is None:
        route.base_settings = canonical_json(merged) + "\x1f" + canonical_json(None)
    return route.base_settings


class KeyMaker:
    """Request keys of one client: a hasher per (route, settings, repeat), fed those parts once."""

    def __init__(self) -> None:
        self._prefixes: dict[int, dict[str, Any]] = {}  # id(route) → settings (and repeat) → fed hasher

    def key(self, route: Route, settings: str, sample: int, attempt: int, messages: list[dict[str, Any]]) -> str:
        """Return ``cache.request_key(identity(route), model, settings, sample_key(sample, attempt),
        canonical_json(messages))``, the same hex digest, from the route's fed hasher."""
        repeat = sample_key(sample, attempt)
        memo = settings if repeat == 0 else f"{settings}\x1e{repeat}"
        made = self._prefixes.setdefault(id(route), {})  # routes live as long as the client: their ids stay theirs
        fed = made.get(memo)
        if fed is None:
            head = "\x1e".join((identity(route), route.spec.model, settings, str(repeat), ""))
            fed = made[memo] = hashlib.sha256(head.encode("utf-8", "surrogatepass"))
        hasher = fed.copy()
        hasher.update(messages_bytes(messages))
        return hasher.hexdigest()
