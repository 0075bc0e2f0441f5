"""Embeddings through the LLM seam (``LLM.embed``): one text's vector from a LiteLLM embedding model or an
OpenAI-compatible ``/embeddings``, under a completion's caps, retries, budget, journal, cache and usage; a vector
per token (llama.cpp without pooling) is mean-pooled."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

from bench._word_vectors import word_count, word_vector
from bench.core.errors import ProviderError
from bench.core.records import Usage
from bench.core.secrets import redact
from bench.models._completion import KEPT, hit_usage, reused, settle_shared, usage_of, with_lost
from bench.models._json import loads
from bench.models._litellm import litellm
from bench.models._transport import Reply, http_error, litellm_error, open_endpoint, send_direct
from bench.models.routing import ModelSpec, Route

SETTINGS = "\x1fembeddings"  # the settings part of an embedding's request key: never a chat request's


@dataclass(frozen=True)
class Embedding:
    """One text's embedding and what it cost (``usage.cached``: answered by the response cache)."""

    vector: list[float]
    usage: Usage
    key: str


async def embed(llm: Any, spec: ModelSpec, text: str, timeout_s: float | None = None) -> Embedding:
    """Return ``text``'s embedding by ``spec``, cached and shared; raises ProviderError once retries are spent."""
    route = await llm._route(spec)
    key = request_key(llm, route, text)
    if llm.cache is not None and (hit := llm.cache.get(key)) is not None and "embedding" in hit:
        return Embedding(hit["embedding"], hit_usage(hit["usage"], key, llm), key)
    st = llm._state()
    if key in st.flying:
        return await _shared(st.flying, key)
    st.flying[key] = None
    try:
        if llm.journal is not None:
            llm.journal.arm(key)
        body = {"model": route.served_model, "input": [text]}
        _text, usage, raw = await llm._with_retries(st, route, body, timeout_s or llm.limits.timeout_s, True, key)
        usage["calls"], usage["cache_hits"] = usage["attempts"], 0
        vector = raw["embedding"]  # type: ignore[index]
    except BaseException as exc:
        settle_shared(st.flying.pop(key, None), exc)
        raise
    if (shared := st.flying.pop(key, None)) is not None:
        shared.set_result((vector, usage))
    if llm.cache is not None:
        llm.cache.put(key, {"text": "", "embedding": vector, "usage": {k: usage.get(k) for k in KEPT}})
    return Embedding(vector, with_lost(usage_of(usage), key, llm.lost), key)


def request_key(llm: Any, route: Route, text: str) -> str:
    """Return the cache key of ``text``'s embedding on ``route`` (what ``bench estimate`` looks up too)."""
    return llm._keys.key(route, SETTINGS, 0, 1, [{"role": "user", "content": text}])


async def _shared(flying: dict[str, asyncio.Future | None], key: str) -> Embedding:
    """Wait for the identical request in flight and share its vector (its failure raised anew, as shared)."""
    fut = flying[key]
    if fut is None:
        fut = flying[key] = asyncio.get_running_loop().create_future()
    try:
        vector, usage = await asyncio.shield(fut)
    except ProviderError as err:
        again = ProviderError(str(err), kind=err.kind, status=err.status, retryable=err.retryable, attempts=0)
        again.shared = True
        raise again from None
    return Embedding(vector, reused(usage), key)


async def send_embedding(llm: Any, st: Any, route: Route, body: dict[str, Any], timeout_s: float) -> Reply:
    """Send one embeddings request: in process (``dry/``), to the api_base's ``/embeddings``, or through LiteLLM."""
    if route.provider.answers_in_process:
        text = str(body["input"][0])
        return "", {"prompt_tokens": word_count(text), "completion_tokens": 0}, {"embedding": word_vector(text)}
    if route.transport == "direct":
        endpoint = st.endpoints.get(~id(route))  # beside the route's chat endpoint (``id(route)``)
        if endpoint is None:
            endpoint = st.endpoints[~id(route)] = open_endpoint(route, int(llm.limits.max_reply_mb * 2**20),
                                                                "embeddings")
        return await send_direct(endpoint, route, body, timeout_s, llm._reached, parse_embedding)
    try:
        resp = await litellm().aembedding(model=route.spec.model, input=body["input"], timeout=timeout_s,
                                          api_base=route.api_base if route.spec.api_base else None,
                                          api_key=route.api_key() or ("not-needed" if route.spec.api_base else None))
    except Exception as exc:  # LiteLLM maps every provider error onto OpenAI's exception classes
        raise litellm_error(route, exc) from None
    item = resp.data[0]
    return "", {"prompt_tokens": getattr(resp.usage, "prompt_tokens", None), "completion_tokens": 0}, {
        "embedding": pooled(item["embedding"] if isinstance(item, dict) else item.embedding)}


def parse_embedding(route: Route, status: int, payload: bytes, retry_after: str | None) -> Reply:
    """Turn an OpenAI-format ``/embeddings`` reply into ("", usage, {"embedding": vector}) or a ProviderError."""
    if status != 200:
        err = http_error(route, status, payload, retry_after)
        if b"embedding=True" in payload:  # the embedded model's server, started without embeddings
            raise ProviderError(f"{route.spec.model} serves no embeddings: set BENCH_LOCAL_EMBEDDINGS=1 before bench "
                                f"starts the embedded model (it then needs about 1.5 GB), or use another "
                                f"embedding_model", kind=err.kind, status=status, retryable=False) from None
        raise err
    try:
        data = loads(payload)
        vector = pooled(data["data"][0]["embedding"])
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        snippet = redact(payload[:4096].decode("utf-8", "replace"))[:120]
        raise ProviderError(f"{route.spec.model}: malformed embeddings reply ({snippet!r})", kind="malformed",
                            retryable=True) from None
    prompt = (data.get("usage") or {}).get("prompt_tokens")
    return "", {"prompt_tokens": prompt, "completion_tokens": 0}, {"embedding": vector}


def pooled(embedding: Any) -> list[float]:
    """Return one vector: ``embedding`` itself, or the mean of its per-token vectors (ValueError when neither)."""
    if embedding and all(isinstance(row, list) for row in embedding):
        return [sum(column) / len(embedding) for column in zip(*embedding)]
    if not embedding or not all(isinstance(x, (int, float)) for x in embedding):
        raise ValueError("no vector")
    return [float(x) for x in embedding]


def cosine(a: list[float], b: list[float]) -> float:
    """Return the cosine similarity of two vectors (0.0 when one is all zeros; ValueError on unequal lengths)."""
    if len(a) != len(b):
        raise ValueError(f"the vectors have {len(a)} and {len(b)} dimensions")
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 0.0 if norm == 0 else sum(x * y for x, y in zip(a, b)) / norm
