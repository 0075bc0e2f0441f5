"""How a model string is reached: resolved once, then reused for every request ("direct": one JSON body and one HTTP
round trip; other wire formats through ``litellm.acompletion``), and what its replies cost."""

from __future__ import annotations

from typing import Any

from bench.core.secrets import note_endpoint
from bench.models._litellm import litellm
from bench.models.batch_policy import DEFAULT_DISCOUNT
from bench.models.genparams import limit_named
from bench.models.providers import (DIRECT_PROVIDERS, SELF_HOSTED_PREFIXES, ModelSpec, Route, Transport,
                                    provider_for)

__all__ = ["DIRECT_PROVIDERS", "SELF_HOSTED_PREFIXES", "ModelSpec", "Route", "Transport", "body_params",
           "cache_prices", "cost_usd", "price_per_token", "resolve"]


def resolve(spec: ModelSpec) -> Route:
    """Return the Route for ``spec`` (its provider's); raise PreflightError for a model string nobody knows."""
    note_endpoint(spec.api_base, spec.api_key_env)  # its key variable and api_base credentials: never written
    return provider_for(spec).route(spec)


def body_params(route: Route, params: dict[str, Any], response_format: dict | None,
                memo_key: str) -> dict[str, Any]:
    """Return the provider-ready body fields for these params, memoized under ``memo_key`` (the canonical spelling
    of params and response_format): LiteLLM's translation for a direct route, OpenAI's form for litellm's own."""
    hit = route.body_params.get(memo_key)
    if hit is not None:
        return hit
    params = dict(params)
    passed = params.pop("extra_body", None) or {}  # provider-specific fields, sent as given (bench.models.genparams)
    if not route.provider.translates_params or route.transport == "litellm":
        out = limit_named(route, params)  # max_completion_tokens where LiteLLM says so (a self-hosted route)
        if response_format is not None:
            out["response_format"] = route.provider.wire_response_format(response_format)
    else:
        from litellm.utils import get_optional_params  # noqa: PLC0415 (heavy, only for remote models)

        litellm()
        kw = dict(params)
        if response_format is not None:
            kw["response_format"] = response_format
        opt = get_optional_params(model=route.served_model, custom_llm_provider=route.vendor, **kw)
        extra = opt.pop("extra_body", None) or {}
        opt.pop("stream", None)
        out = {**opt, **extra}
    out.update(passed)
    route.body_params[memo_key] = out
    return out


WRITE_PREMIUM = 1.25  # a cache write's price over the input price when neither params nor LiteLLM say (Anthropic's)


def price_per_token(route: Route, batch: bool | None = None) -> tuple[float, float] | None:
    """Return (input, output) USD per token, or None when unknown: dry is free, a declared ``price`` wins; ``batch``:
    LiteLLM's Batch API price where its map has one, else the direct price less ``batch_discount``."""
    batch = route.spec.batch is not None if batch is None else batch
    if route.provider.free:
        return 0.0, 0.0  # a dry run costs nothing, whatever price the model it stands in for declares
    off = 1.0 - (DEFAULT_DISCOUNT if route.spec.batch_discount is None else route.spec.batch_discount)
    if route.spec.price is not None:
        scale = off if batch else 1.0
        return route.spec.price[0] / 1e6 * scale, route.spec.price[1] / 1e6 * scale
    entry = _map_entry(route)
    if entry is None:
        return None
    price = float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token") or 0.0)
    if not batch:
        return price
    listed = entry.get("input_cost_per_token_batches"), entry.get("output_cost_per_token_batches")
    return (float(listed[0]), float(listed[1] or 0.0)) if listed[0] is not None else (price[0] * off, price[1] * off)


def _map_entry(route: Route) -> dict[str, Any] | None:
    """Return the route's entry in LiteLLM's price map (None: not there, or not a model the map speaks for)."""
    if not route.provider.in_model_map(route):
        return None
    cost = litellm().model_cost
    bare = route.spec.model.split("/", 1)[-1]  # anthropic/claude-haiku-4-5 is listed as claude-haiku-4-5
    for key in (route.spec.model, route.served_model, f"{route.vendor}/{route.served_model}", bare):
        entry = cost.get(key)
        if entry and entry.get("input_cost_per_token") is not None:
            return entry
    return None


def cache_prices(route: Route, batch: bool = False) -> tuple[float, float] | None:
    """Return (cached input, cache write) USD per token, or None when unknown: as declared, else LiteLLM's, else the
    input price and WRITE_PREMIUM × it; under ``batch`` scaled as the batch input price is."""
    key = (batch, "cache")
    if key in route.prices:
        return route.prices[key]
    base, at = price_per_token(route, False), price_per_token(route, batch)
    if base is None or at is None:
        route.prices[key] = None
        return None
    declared = route.spec.price
    if declared is not None:
        read, write = (declared[2:4] if len(declared) > 2 else (None, None))
        read, write = (None if v is None else v / 1e6 for v in (read, write))
    else:
        entry = _map_entry(route) or {}
        read, write = entry.get("cache_read_input_token_cost"), entry.get("cache_creation_input_token_cost")
    scale = at[0] / base[0] if base[0] else 0.0
    out = (float(base[0] if read is None else read) * scale,
           float(base[0] * WRITE_PREMIUM if write is None else write) * scale)
    route.prices[key] = out
    return out


def cost_usd(route: Route, usage: dict[str, Any], batch: bool = False) -> float | None:
    """Return the USD cost of one answer (Batch API price when ``batch``), or None when price or tokens are unknown;
    cached tokens are priced at ``cache_prices``, the saving set as ``usage["cache_saved_usd"]``."""
    prices = route.prices  # looked up once per model and kind of call, not per reply
    if batch not in prices:
        prices[batch] = price_per_token(route, batch)
    price = prices[batch]
    if price is None or usage.get("prompt_tokens") is None or usage.get("completion_tokens") is None:
        return None
    cost = price[0] * usage["prompt_tokens"] + price[1] * usage["completion_tokens"]
    read, write = usage.get("cached_tokens"), usage.get("cache_write_tokens")
    if read or write:
        at = cache_prices(route, batch)
        saved = (read or 0) * (price[0] - at[0]) + (write or 0) * (price[0] - at[1])  # type: ignore[index]
        usage["cache_saved_usd"] = saved
        cost -= saved
    return cost
