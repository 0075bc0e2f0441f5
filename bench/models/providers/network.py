"""The two providers reached over the network: an OpenAI-compatible server at an ``api_base`` (resolved without
importing LiteLLM), and every model string LiteLLM knows (its provider, key, price and capabilities)."""

from __future__ import annotations

import functools
import os
import typing

from bench.core.errors import PreflightError
from bench.models._litellm import litellm
from bench.models.providers.contract import ModelSpec, Provider, Route

# Providers whose LiteLLM handler is the plain OpenAI chat call, with LiteLLM's default base URL and key variable.
DIRECT_PROVIDERS: dict[str, tuple[str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "hosted_vllm": (None, None),
}
# With an api_base, resolved without importing LiteLLM (which passes OpenAI params through unchanged, as we do).
SELF_HOSTED_PREFIXES = ("openai/", "hosted_vllm/")
OPENAI_BATCHES = ("openai", "hosted_vllm")  # batched at <api_base>/files and /batches, OpenAI's way
# Where an Anthropic or Gemini api_base lists its models (LiteLLM's own suffixes cut first).
LISTINGS = {"anthropic": (("/v1/messages", "/v1"), "/v1/models"), "gemini": ((), "/models")}


@functools.lru_cache(maxsize=1)
def batch_vendors() -> frozenset[str]:
    """Return the providers LiteLLM can create batches for (its ``create_batch`` signature says which)."""
    hints = typing.get_type_hints(litellm().create_batch)
    return frozenset(typing.get_args(hints.get("custom_llm_provider")) or ("openai",))


def _missing_key(spec: ModelSpec, key_env: str) -> list[str]:
    if os.environ.get(key_env):
        return []
    return [f"model {spec.model!r} needs {key_env}: set it in the environment or in .env (see .env.example)"]


class SelfHostedProvider(Provider):
    """``openai/<name>`` or ``hosted_vllm/<name>`` plus an ``api_base``: any OpenAI-compatible server."""

    name = "self_hosted"
    own_tokenizer = "tiktoken"  # only an OpenAI name tiktoken knows says which tokenizer it is

    def matches(self, spec: ModelSpec) -> bool:
        return bool(spec.api_base) and spec.transport != "litellm" and spec.model.startswith(SELF_HOSTED_PREFIXES)

    def route(self, spec: ModelSpec) -> Route:
        vendor, name = spec.model.split("/", 1)
        base = (spec.api_base or "").rstrip("/")
        return Route(spec, "direct", self, vendor, name, base, identity=f"{vendor}@{base}", key_env=spec.api_key_env)

    def check(self, spec: ModelSpec) -> list[str]:
        return _missing_key(spec, spec.api_key_env) if spec.api_key_env else []  # no key: an open server

    def takes_images(self, route: Route) -> bool:
        return True

    def takes_tools(self, route: Route) -> bool:
        return True

    def logprobs(self, route: Route) -> bool:
        return True

    def batch_vendor(self, route: Route) -> str | None:
        return "openai"  # an OpenAI-compatible /files + /batches at its api_base (the preflight asks if it has them)


class LiteLLMProvider(Provider):
    """Any other model string: LiteLLM names its provider, key, params, price and capabilities."""

    name = "litellm"
    counting = "litellm"
    own_tokenizer = "litellm"
    translates_params = True
    params = "litellm"  # LiteLLM's get_supported_openai_params for its provider
    no_images = "LiteLLM's model map does not say it reads images (supports_vision)"

    def matches(self, spec: ModelSpec) -> bool:
        return True  # the last resort: an unknown string is refused by ``route``

    def route(self, spec: ModelSpec) -> Route:
        try:
            name, vendor, _dyn_key, base = litellm().get_llm_provider(spec.model, api_base=spec.api_base)
        except Exception as exc:  # LiteLLM raises BadRequestError for unknown providers
            raise PreflightError([f"unknown model string {spec.model!r}: LiteLLM cannot tell its provider "
                                  f"({str(exc).splitlines()[0][:160]}); write it as provider/model, "
                                  f"e.g. openai/gpt-4o-mini or hosted_vllm/<name> with api_base"]) from None
        direct = spec.transport == "direct" or (spec.transport == "auto" and vendor in DIRECT_PROVIDERS)
        default_base, default_env = DIRECT_PROVIDERS.get(vendor, (None, None))
        api_base = spec.api_base or base or default_base
        key_env = spec.api_key_env or (None if spec.api_base else default_env)
        if direct and not api_base:
            raise PreflightError([f"model {spec.model!r} uses the direct transport but has no api_base; "
                                  f"set api_base (e.g. http://127.0.0.1:8000/v1)"])
        identity = f"{vendor}@{spec.api_base}" if spec.api_base else vendor
        return Route(spec, "direct" if direct else "litellm", self, vendor, name if direct else spec.model,
                     api_base.rstrip("/") if api_base else None, identity=identity, key_env=key_env)

    def check(self, spec: ModelSpec) -> list[str]:
        try:
            route = self.route(spec)
        except PreflightError as err:
            return err.problems
        if route.key_env:
            return _missing_key(spec, route.key_env)
        if route.transport == "direct" or spec.api_base:
            return []  # an OpenAI-compatible server of its own: no key needed
        missing = litellm().validate_environment(spec.model).get("missing_keys") or []
        return [f"model {spec.model!r} needs {' or '.join(missing)}: set it in the environment or in .env "
                f"(see .env.example)"] if missing else []

    def takes_images(self, route: Route) -> bool:
        return self._asks("supports_vision", route)

    def takes_tools(self, route: Route) -> bool:
        return self._asks("supports_function_calling", route)

    def logprobs(self, route: Route) -> bool:
        try:
            found = litellm().get_supported_openai_params(model=route.spec.model.split("/", 1)[-1],
                                                          custom_llm_provider=route.vendor)
        except Exception:  # a model LiteLLM's map does not list: nothing is promised
            return False
        return "logprobs" in (found or ())

    def listing(self, spec: ModelSpec) -> str:
        vendor = spec.model.split("/", 1)[0]
        if vendor not in LISTINGS:
            return super().listing(spec)
        cut, path = LISTINGS[vendor]
        base = (spec.api_base or "").rstrip("/")
        return next((base.removesuffix(c) for c in cut if base.endswith(c)), base) + path

    def in_model_map(self, route: Route) -> bool:
        return not route.spec.api_base  # a model name at an api_base says nothing certain about its weights

    def batch_vendor(self, route: Route) -> str | None:
        if route.vendor in OPENAI_BATCHES:
            return "openai"
        return route.vendor if route.vendor in batch_vendors() else None

    @staticmethod
    def _asks(what: str, route: Route) -> bool:
        """Return LiteLLM's ``supports_*`` answer for the route's model (False where its map is silent)."""
        try:
            return bool(getattr(litellm(), what)(model=route.spec.model))
        except Exception:  # LiteLLM raises for a model its map does not list
            return False
