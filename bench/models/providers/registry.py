"""The providers, in order of precedence: the first whose ``matches`` accepts a spec answers for it."""

from __future__ import annotations

from bench.core.plugins import plugin_providers
from bench.models.providers.contract import ModelSpec, Provider
from bench.models.providers.inprocess import DryProvider, LocalProvider
from bench.models.providers.network import LiteLLMProvider, SelfHostedProvider

# bench's own dry/ and local/; a self-hosted server at an api_base; LiteLLM takes (or refuses) every other string
REGISTRY: tuple[Provider, ...] = (DryProvider(), LocalProvider(), SelfHostedProvider(), LiteLLMProvider())


def providers() -> tuple[Provider, ...]:
    """Return every provider in order of precedence: those plugins register (``bench.providers``), then bench's."""
    return (*plugin_providers(), *REGISTRY)


def provider_for(spec: ModelSpec) -> Provider:
    """Return the provider that answers for ``spec`` (the LiteLLM one when no other claims it)."""
    return next(p for p in providers() if p.matches(spec))


def takes_images(spec: ModelSpec) -> bool:
    """Return whether ``spec``'s model reads image parts, as its provider says (raises if it cannot be routed)."""
    provider = provider_for(spec)
    return provider.takes_images(provider.route(spec))


def provider_named(name: str) -> Provider:
    """Return the registered provider called ``name`` (KeyError naming the known ones otherwise)."""
    for provider in providers():
        if provider.name == name:
            return provider
    raise KeyError(f"no provider {name!r}; known: {', '.join(p.name for p in providers())}")
