"""The provider registry: each kind of model (dry, embedded, self-hosted OpenAI-compatible, LiteLLM) as one
``Provider`` that the seam asks how to route, check, count, price and batch a model, and what it takes."""

from bench.models.providers.contract import ModelSpec, Provider, Route, Transport
from bench.models.providers.network import DIRECT_PROVIDERS, SELF_HOSTED_PREFIXES, batch_vendors
from bench.models.providers.registry import REGISTRY, provider_for, provider_named, takes_images

__all__ = ["DIRECT_PROVIDERS", "REGISTRY", "SELF_HOSTED_PREFIXES", "ModelSpec", "Provider", "Route", "Transport",
           "batch_vendors", "provider_for", "provider_named", "takes_images"]
