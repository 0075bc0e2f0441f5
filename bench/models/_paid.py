"""What a reply was paid, made whole before anything counts it: usage estimated when the provider sent none (marked
``estimated``, never zero), an overrun of ``max_tokens`` flagged, its price, and every paid attempt kept."""

from __future__ import annotations

from typing import Any

from bench.core.errors import Halted, ProviderError
from bench.models._messages import output_limit, prompt_messages
from bench.models.routing import Route, cost_usd
from bench.models.reasoning import hides_thinking
from bench.models.tokens import bound_counter, output_ceiling

_ITEMIZED = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens", "cache_write_tokens",
             "cost_usd", "cache_saved_usd", "finish_reason", "over_limit", "estimated")


def reconcile(route: Route, body: dict[str, Any], text: str, usage: dict[str, Any], batch: bool = False) -> None:
    """Complete ``usage`` in place: estimate missing tokens, flag an over-limit output, set ``cost_usd``."""
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if prompt is None or completion is None or (not prompt and not completion and text):
        counter = bound_counter(route)  # a reply with no usage (or all zeros for a text) was still billed
        usage["prompt_tokens"] = counter.messages(prompt_messages(body)) if not prompt else prompt
        usage["completion_tokens"] = completion or counter.text(text) + counter.text(usage.get("reasoning") or "")
        thinks = "input" not in body and hides_thinking(route, body)  # an embeddings request never thinks
        if not completion and thinks:  # its unseen thinking may have taken the whole limit
            usage["completion_tokens"] = max(usage["completion_tokens"], output_ceiling(route, body))
        usage["estimated"] = True
    limit = output_limit(body)
    if limit is not None and not usage.get("estimated") and usage["completion_tokens"] > max(0, limit):
        usage["over_limit"] = True  # the provider's own count (a bound counted here may pass it by itself)
    usage["cost_usd"] = cost_usd(route, usage, batch)


def itemized(usage: dict[str, Any], attempt: int) -> dict[str, Any]:
    """Return one paid attempt as ``Usage.paid_attempts`` lists it: its number, tokens, cost and flags."""
    return {"attempt": attempt, **{k: usage.get(k) for k in _ITEMIZED if usage.get(k) not in (None, False)},
            **({"cost_usd": None} if usage.get("cost_usd") is None else {})}


def with_paid(usage: dict[str, Any], paid: list[dict[str, Any]], attempt: int) -> dict[str, Any]:
    """Return the usage of a call answered at ``attempt`` after the unused paid replies ``paid``, summed."""
    if not paid:
        return usage
    every = [*paid, itemized(usage, attempt)]
    costs = [a.get("cost_usd") for a in every]
    return {**usage, "prompt_tokens": sum(a.get("prompt_tokens") or 0 for a in every),
            "completion_tokens": sum(a.get("completion_tokens") or 0 for a in every),
            **{k: summed_known(every, k) for k in ("reasoning_tokens", "cached_tokens", "cache_write_tokens",
                                                   "cache_saved_usd")},
            "cost_usd": None if any(c is None for c in costs) else sum(costs),
            "over_limit": any(a.get("over_limit") for a in every), "estimated": any(a.get("estimated") for a in every),
            "paid_attempts": every}


def summed_known(attempts: list[dict[str, Any]], name: str) -> int | None:
    """Return the sum of ``name`` over the paid attempts that report it; None when none does (not said is not 0)."""
    known = [a[name] for a in attempts if a.get(name) is not None]
    return sum(known) if known else None


class PaidAttempts:
    """The replies one call was billed for and could not use (empty ones retried), in order."""

    __slots__ = ("model", "items")  # one per call: no __dict__ to make

    def __init__(self, model: str) -> None:
        self.model = model
        self.items: list[dict[str, Any]] = []

    def add(self, usage: dict[str, Any], attempt: int) -> None:
        """Keep a reply that was billed but not used (``attempt``: its number in the call)."""
        self.items.append(itemized(usage, attempt))

    def total(self, usage: dict[str, Any], attempt: int) -> dict[str, Any]:
        """Return the usage of the reply that answered at ``attempt``, summed with the unused paid ones."""
        return with_paid(usage, self.items, attempt)

    def refused(self, stop: Halted) -> Exception:
        """Return what a call raises when the budget refused its retry: ``stop``, or a failure with its paid replies."""
        if not self.items:
            return stop
        err = ProviderError(f"{self.model} returned empty content {len(self.items)} time(s) (each billed), and the "
                            f"retry was not sent: {stop}", kind="empty", retryable=True, attempts=len(self.items))
        err.paid = self.items
        return err


def lines_cost(paid: list[dict[str, Any]] | None) -> float:
    """Return what the provider batch lines among ``paid`` (``paid_attempts`` entries) cost."""
    return sum(p.get("cost_usd") or 0.0 for p in paid or () if p.get("batch_line"))
