"""The one LLM seam: every model call of collect and judge goes through ``LLM.complete``.

A ``ModelSpec`` (a LiteLLM model string plus endpoint settings) is resolved once into a route
(``routing``), checked before anything is spent (``preflight``, ``genparams``), and asked through
one client (``client``) under one ``Limits`` (``limits``: concurrency, timeouts, retries) and the
per-model caps of ``ratelimit``, with an on-disk response cache (``cache.open_cache``: a ``ResponseCache``,
a folder of per-process append-only files, safe on a network filesystem).
What it produces is a ``Completion``: the reply's text and its ``Usage`` (tokens, cost, latency, attempts).

Three kinds of model sit behind the same seam: providers (OpenAI-compatible ones by one HTTP POST,
others through LiteLLM), the embedded ``local/<name>`` model (``local``: llama.cpp on loopback) and
the in-process ``dry/<name>`` model of a dry run (``dry``: schema-valid replies, no cost). Each kind is
one ``Provider`` of the registry in ``providers``, which the seam asks how to route, check, count, price
and batch a model and whether it takes images, tools and logprobs.
"""

from bench.models.cache import ResponseCache, open_cache, request_key
from bench.models.client import LLM, Completion, complete, configure
from bench.models.dry import dry_model, is_dry
from bench.models.genparams import param_problems
from bench.models.limits import Limits
from bench.models.preflight import preflight
from bench.models.routing import ModelSpec, Route, resolve

__all__ = [
    "LLM",
    "Completion",
    "Limits",
    "ModelSpec",
    "ResponseCache",
    "Route",
    "complete",
    "configure",
    "dry_model",
    "is_dry",
    "open_cache",
    "param_problems",
    "preflight",
    "request_key",
    "resolve",
]
