"""How a model string is reached: resolved once per (model, params), then reused for every request.

LiteLLM stays the authority on model strings, providers, keys and provider-specific
parameter translation; what this module adds is memoization, so the per-request cost of
an OpenAI-compatible call is one JSON body and one HTTP round trip (the "direct"
transport). Providers whose wire format is not OpenAI's go through
``litellm.acompletion`` (the "litellm" transport); ``dry/<name>`` is answered in-process
(the "dry" transport, ``bench.models.dry``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.core.errors import PreflightError
from bench.core.secrets import add_secret, note_endpoint
from bench.models import dry, local
from bench.models._litellm import litellm
from bench.models.batches.policy import DEFAULT_DISCOUNT, BatchPolicy

Transport = Literal["auto", "direct", "litellm"]

# Providers whose LiteLLM handler is the plain OpenAI chat-completions call, with the default
# base URL and key variable LiteLLM itself uses for them. Anything else goes through LiteLLM
# unless a model sets `transport: direct` (any OpenAI-compatible server with an api_base).
DIRECT_PROVIDERS: dict[str, tuple[str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "hosted_vllm": (None, None),
}
# A self-hosted OpenAI-compatible server named by these prefixes plus an explicit api_base is
# resolved without importing LiteLLM (seconds per process): LiteLLM's own translation for
# such a server passes the standard OpenAI params through unchanged, which is what we do.
SELF_HOSTED_PREFIXES = ("openai/", "hosted_vllm/")


@dataclass(frozen=True)
class ModelSpec:
    """Where and how to call one model: a LiteLLM model string plus endpoint settings.

    ``params`` are default generation params (temperature, max_tokens, seed, …);
    ``price`` is (USD per million input tokens, USD per million output tokens) for
    endpoints LiteLLM cannot price (self-hosted servers); ``rpm`` caps requests per minute and
    ``tpm`` tokens per minute (see bench.models.ratelimit: caps hold across a sweep's executions).
    """

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    transport: Transport = "auto"
    rpm: int | None = None
    tpm: int | None = None  # tokens (prompt + completion) per minute, estimated before a call, corrected after
    price: tuple[float, float] | None = None
    max_concurrency: int | None = None  # this model's own cap on requests in flight (server slots, provider limits)
    batch: BatchPolicy | None = None  # send through the provider's Batch API (bench.models.batches)
    batch_discount: float | None = None  # with ``price``: the fraction a batch call takes off (default 0.5)

    def __post_init__(self) -> None:  # hashed once: specs key the route table on every request
        object.__setattr__(self, "_hash", hash((self.model, self.api_base, self.api_key_env,
                                                json.dumps(self.params, sort_keys=True, default=str),
                                                self.transport, self.rpm, self.tpm, self.price,
                                                self.max_concurrency, self.batch, self.batch_discount)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]


@dataclass
class Route:
    """A resolved model: which transport, where, with which ready-made body params."""

    spec: ModelSpec
    transport: Literal["direct", "litellm", "dry"]
    provider: str
    served_model: str  # the "model" field sent on the wire (direct) or to LiteLLM
    api_base: str | None
    identity: str  # what the cache key uses for the endpoint (never a key, never a port of ours)
    key_env: str | None
    is_local: bool = False
    self_hosted: bool = False  # params pass through as given (no LiteLLM translation needed)
    body_params: dict[str, dict[str, Any]] = field(default_factory=dict)  # memo: params JSON → body
    base_settings: str | None = None  # canonical (params, no schema) of the spec itself, built on first use

    def api_key(self) -> str | None:
        """Return the key from the environment at call time (never stored anywhere)."""
        if self.key_env:
            key = os.environ.get(self.key_env)
            add_secret(key)  # a key bench sends is redacted from everything it writes, at once
            return key
        return None


def resolve(spec: ModelSpec) -> Route:
    """Return the Route for ``spec``; raise PreflightError for a model string nobody knows."""
    note_endpoint(spec.api_base, spec.api_key_env)  # its key variable and api_base credentials: never written
    if dry.is_dry(spec.model):  # answered in-process: no endpoint, no key
        return Route(spec, "dry", "dry", spec.model.removeprefix(dry.DRY_PREFIX), None, identity="dry", key_env=None)
    if local.is_local(spec.model):
        # The weights' identity (name, size, package version), never the port: the cache survives restarts.
        return Route(spec, "direct", "local", spec.model.removeprefix(local.LOCAL_PREFIX), None,
                     identity=local.identity(spec.model), key_env=None, is_local=True)
    if spec.api_base and spec.transport != "litellm" and spec.model.startswith(SELF_HOSTED_PREFIXES):
        provider, name = spec.model.split("/", 1)
        base = spec.api_base.rstrip("/")
        return Route(spec, "direct", provider, name, base, identity=f"{provider}@{base}",
                     key_env=spec.api_key_env, self_hosted=True)
    lm = litellm()
    try:
        name, provider, _dyn_key, base = lm.get_llm_provider(spec.model, api_base=spec.api_base)
    except Exception as exc:  # LiteLLM raises BadRequestError for unknown providers
        raise PreflightError([f"unknown model string {spec.model!r}: LiteLLM cannot tell its provider "
                              f"({str(exc).splitlines()[0][:160]}); write it as provider/model, "
                              f"e.g. openai/gpt-4o-mini or hosted_vllm/<name> with api_base"]) from None
    direct = spec.transport == "direct" or (spec.transport == "auto" and provider in DIRECT_PROVIDERS)
    default_base, default_env = DIRECT_PROVIDERS.get(provider, (None, None))
    api_base = spec.api_base or base or default_base
    key_env = spec.api_key_env or (None if spec.api_base else default_env)
    if direct and not api_base:
        raise PreflightError([f"model {spec.model!r} uses the direct transport but has no api_base; "
                              f"set api_base (e.g. http://127.0.0.1:8000/v1)"])
    identity = f"{provider}@{spec.api_base}" if spec.api_base else provider
    return Route(spec, "direct" if direct else "litellm", provider, name if direct else spec.model,
                 api_base.rstrip("/") if api_base else None, identity=identity, key_env=key_env)


def body_params(route: Route, params: dict[str, Any], response_format: dict | None,
                memo_key: str) -> dict[str, Any]:
    """Return the provider-ready body fields for these params (LiteLLM's translation, memoized).

    ``memo_key`` is a canonical spelling of (params, response_format), computed once by the caller.
    """
    hit = route.body_params.get(memo_key)
    if hit is not None:
        return hit
    params = dict(params)
    passed = params.pop("extra_body", None) or {}  # provider-specific fields, sent as given (bench.models.genparams)
    if route.is_local or route.self_hosted or route.transport == "dry":
        out = dict(params)
        if response_format is not None:
            out["response_format"] = (local.llama_response_format(response_format) if route.is_local
                                      else response_format)
    else:
        from litellm.utils import get_optional_params  # noqa: PLC0415 (heavy, only for remote models)

        litellm()
        kw = dict(params)
        if response_format is not None:
            kw["response_format"] = response_format
        opt = get_optional_params(model=route.served_model, custom_llm_provider=route.provider, **kw)
        extra = opt.pop("extra_body", None) or {}
        opt.pop("stream", None)
        out = {**opt, **extra}
    out.update(passed)
    route.body_params[memo_key] = out
    return out


def price_per_token(route: Route, batch: bool | None = None) -> tuple[float, float] | None:
    """Return (input, output) USD per token, or None when the price is unknown.

    A dry model is free; otherwise a declared ``price`` wins. A self-hosted endpoint (explicit api_base) is unknown unless
    declared, because a model name there says nothing about what it costs. ``batch`` (default: whether the model
    is batched) asks for the Batch API price: LiteLLM's ``*_cost_per_token_batches`` where its map has them, else
    the direct price less the declared ``batch_discount`` (default 0.5, what every Batch API listed in README takes off).
    """
    batch = route.spec.batch is not None if batch is None else batch
    if route.transport == "dry":
        return 0.0, 0.0  # a dry run costs nothing, whatever price the model it stands in for declares
    off = 1.0 - (DEFAULT_DISCOUNT if route.spec.batch_discount is None else route.spec.batch_discount)
    if route.spec.price is not None:
        scale = off if batch else 1.0
        return route.spec.price[0] / 1e6 * scale, route.spec.price[1] / 1e6 * scale
    if route.is_local or route.spec.api_base:
        return None
    cost = litellm().model_cost
    bare = route.spec.model.split("/", 1)[-1]  # anthropic/claude-haiku-4-5 is listed as claude-haiku-4-5
    for key in (route.spec.model, route.served_model, f"{route.provider}/{route.served_model}", bare):
        entry = cost.get(key)
        if entry and entry.get("input_cost_per_token") is not None:
            price = float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token") or 0.0)
            if not batch:
                return price
            listed = entry.get("input_cost_per_token_batches"), entry.get("output_cost_per_token_batches")
            return (float(listed[0]), float(listed[1] or 0.0)) if listed[0] is not None else (
                price[0] * off, price[1] * off)
    return None


def cost_usd(route: Route, usage: dict[str, Any], batch: bool = False) -> float | None:
    """Return the USD cost of one answer (at the Batch API price when ``batch``), or None when the price or the
    token counts are unknown."""
    price = price_per_token(route, batch)
    if price is None or usage.get("prompt_tokens") is None or usage.get("completion_tokens") is None:
        return None
    return price[0] * usage["prompt_tokens"] + price[1] * usage["completion_tokens"]
