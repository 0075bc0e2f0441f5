"""What the seam asks of a kind of model: the ModelSpec a researcher writes, the Route it resolves to, and the
``Provider`` that answers for it (code outside asks ``route.provider`` instead of branching on the kind of model)."""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from bench.core.secrets import add_secret
from bench.models.batch_policy import BatchPolicy

Transport = Literal["auto", "direct", "litellm"]  # what a ModelSpec may ask for (params ``transport:``)
Transport = Literal["direct", "litellm", "dry"]  # how a route's requests travel: one HTTP POST, LiteLLM, in-process
Counting = Literal["litellm", "bundled"]  # litellm.token_counter, or the encoding files LiteLLM bundles
OwnTokenizer = Literal["none", "tiktoken", "litellm"]  # where the model's own tokenizer may be known from
KnownParams = Literal["any", "openai", "llama_cpp", "litellm"]  # which generation params it accepts (genparams)


@dataclass(frozen=True)
class ModelSpec:
    """Where and how to call one model: a LiteLLM model string plus endpoint settings (``price``: USD per Mtok)."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    transport: Transport = "auto"
    rpm: int | None = None
    tpm: int | None = None  # tokens (prompt + completion) per minute, estimated before a call, corrected after
    price: tuple[float, float, float | None, float | None] | None = None  # input, output, cached input, cache write
    max_concurrency: int | None = None  # this model's own cap on requests in flight (server slots, provider limits)
    batch: BatchPolicy | None = None  # send through the provider's Batch API (bench.models.batches)
    batch_discount: float | None = None  # with ``price``: the fraction a batch call takes off (default 0.5)
    think_end: str | None = None  # the marker ending a reply's inline thinking (bench.models.reasoning)

    def __post_init__(self) -> None:  # hashed once: specs key the route table on every request
        object.__setattr__(self, "_hash", hash((self.model, self.api_base, self.api_key_env,
                                                json.dumps(self.params, sort_keys=True, default=str),
                                                self.transport, self.rpm, self.tpm, self.price,
                                                self.max_concurrency, self.batch, self.batch_discount,
                                                self.think_end)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]


@dataclass
class Route:
    """A resolved model: its provider, how its requests travel, where, with which ready-made body params."""

    spec: ModelSpec
    transport: Transport
    provider: Provider
    vendor: str  # LiteLLM's name of the provider ("openai", "anthropic", …; "dry", "local" for ours)
    served_model: str  # the "model" field sent in flight (direct) or to LiteLLM
    api_base: str | None
    identity: str  # what the cache key uses for the endpoint (never a key, never a port of ours)
    key_env: str | None
    body_params: dict[str, dict[str, Any]] = field(default_factory=dict)  # memo: params JSON → body
    base_settings: str | None = None  # canonical (params, no schema) of the spec itself, built on first use
    prices: dict[Any, Any] = field(default_factory=dict)  # memo: batch? → price_per_token, (batch?, "cache") → cache_prices

    def api_key(self) -> str | None:
        """Return the key from the environment at call time (never stored anywhere)."""
        if self.key_env:
            key = os.environ.get(self.key_env)
            add_secret(key)  # a key bench sends is redacted from everything it writes, at once
            return key
        return None


class Provider(ABC):
    """One kind of model, as the seam sees it: class attributes say what it is and takes, methods answer for it."""

    name: ClassVar[str]  # "dry", "local", "self_hosted", "litellm": what the registry calls it
    label: ClassVar[str | None] = None  # how a message names a model of this kind (None: by its vendor)
    counting: ClassVar[Counting] = "bundled"  # which counter estimates its prompts (bench.models.tokens)
    own_tokenizer: ClassVar[OwnTokenizer] = "none"  # where a budget's bound may find the model's own tokenizer
    translates_params: ClassVar[bool] = False  # params go through LiteLLM's per-provider translation
    params: ClassVar[KnownParams] = "openai"  # the generation params it takes (bench.models.genparams)
    free: ClassVar[bool] = False  # costs nothing, whatever price a spec declares
    answers_in_process: ClassVar[bool] = False  # no HTTP at all (bench.models.dry)
    launches: ClassVar[bool] = False  # a server of ours is started on first use (``launch``)
    probes_api_base: ClassVar[bool] = True  # the preflight asks a spec's api_base whether it answers
    named_in_listing: ClassVar[bool] = True  # the model's name must be among those its api_base lists
    no_images: ClassVar[str] = "its provider says it reads no images"  # why ``takes_images`` says no, in a refusal

    @abstractmethod
    def matches(self, spec: ModelSpec) -> bool:
        """Return whether this provider answers for ``spec`` (the registry asks in order of precedence)."""

    @abstractmethod
    def route(self, spec: ModelSpec) -> Route:
        """Return the Route of ``spec``; raise PreflightError when it cannot be reached at all."""

    @abstractmethod
    def takes_images(self, route: Route) -> bool:
        """Return whether the model reads image parts of a message."""

    @abstractmethod
    def takes_tools(self, route: Route) -> bool:
        """Return whether the model accepts ``tools`` (function calling)."""

    @abstractmethod
    def logprobs(self, route: Route) -> bool:
        """Return whether the model can return token log-probabilities."""

    @abstractmethod
    def check(self, spec: ModelSpec) -> list[str]:
        """Return what stops ``spec`` from being called (unknown string, missing key, ...), one line each."""

    def in_model_map(self, route: Route) -> bool:
        """Return whether LiteLLM's model map speaks for this route (its prices, its output limits)."""
        return False

    def batch_vendor(self, route: Route) -> str | None:
        """Return the LiteLLM provider that batches this route's requests, or None without a Batch API."""
        return None

    def listing(self, spec: ModelSpec) -> str:
        """Return the URL where ``spec``'s api_base lists its models (the preflight's probe): OpenAI's ``/models``."""
        return f"{(spec.api_base or '').rstrip('/')}/models"

    def wire_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return the messages as this kind of server reads them (as given unless it needs a rewrite)."""
        return messages

    def wire_response_format(self, response_format: dict) -> dict:
        """Return the ``response_format`` field as this kind of server reads it."""
        return response_format

    def launch(self, route: Route) -> None:
        """Start what answers ``route`` and point it there (only for ``launches`` providers; blocking)."""
        raise NotImplementedError(f"{self.name} models are not launched")

    def __repr__(self) -> str:
        return f"<provider {self.name}>"
