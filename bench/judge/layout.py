"""How a judge request's messages are laid out: the fixed part first, for the provider's prompt cache
(docs/budget.md). ``ITEM_FIRST`` turns it around, the layout ``benchmarks/judge_cost.py`` compares with."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from bench.judge._prompts import system_message
from bench.models.routing import ModelSpec, resolve
from bench.models.tokens import counter_for

ITEM_FIRST = False  # the item before the fixed part: a cache-hostile layout that only benchmarks/judge_cost.py sets
CACHE_MIN_TOKENS = 1024  # the shortest prefix a provider caches (OpenAI, Anthropic's Sonnet and Opus)


def judge_messages(judge: Any, user: str) -> list[dict[str, Any]]:
    """Return a judge request's messages: the system message first, for the prompt cache (Claude: ``cache_control``)."""
    system = system_message(judge.rubric)
    if ITEM_FIRST:
        return [{"role": "user", "content": user}, {"role": "system", "content": system}]
    spec = judge.entry.spec()
    if "claude" in spec.model.lower() and _cacheable(spec, system):
        marked = {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
        return [{"role": "system", "content": [marked]}, {"role": "user", "content": user}]
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@lru_cache(maxsize=64)
def _cacheable(spec: ModelSpec, system: str) -> bool:
    """Return whether a fixed part is long enough for the provider to cache (counted once per judge and rubric)."""
    return counter_for(resolve(spec)).text(system) >= CACHE_MIN_TOKENS
