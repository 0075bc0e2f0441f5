"""A prompt cache as OpenAI runs one (``prefix_cache: true``): a prompt whose first 1,024 tokens or more were sent
before reports that prefix, in whole 128-token blocks, as ``usage.prompt_tokens_details.cached_tokens`` (billed at
``bill_per_mtok.cached_input``). A prompt is its messages' roles and texts, counted with the ``tokenizer``."""

from __future__ import annotations

import hashlib
from typing import Any

from bench.testing.fake_provider.replies import CHUNK_CHARS, load_encoding

MIN_TOKENS, BLOCK = 1024, 128


class PrefixCache:
    """The prefixes seen so far, as hashes of their first n tokens for every n = 1,024 + k·128."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()

    def used(self, used: dict[str, Any], messages: Any, cfg: dict[str, Any]) -> dict[str, Any]:
        """Return a reply's ``usage`` with the cached prefix in ``prompt_tokens_details`` (with ``prefix_cache``)."""
        if cfg["prefix_cache"] and (hit := self.cached(messages, cfg["tokenizer"], used["prompt_tokens"])):
            used["prompt_tokens_details"] = {"cached_tokens": hit}
        return used

    def cached(self, messages: Any, tokenizer: str, prompt_tokens: int, model: str = "") -> int:
        """Return how many leading tokens of this prompt were cached, and remember its prefixes (``model``'s own)."""
        stream = _stream(messages, tokenizer)
        digest, hit, done = hashlib.sha256(model.encode()), 0, 0
        for end in range(MIN_TOKENS, min(len(stream), prompt_tokens) + 1, BLOCK):
            digest.update(repr(stream[done:end]).encode())
            done, key = end, digest.copy().digest()
            if key in self.seen:
                hit = end
            self.seen.add(key)
        return hit


def _stream(messages: Any, tokenizer: str) -> list[Any]:
    """Return the prompt as one list of tokens: per message, its role, then its text parts' tokens."""
    encoding = load_encoding(tokenizer)
    out: list[Any] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            p["text"] for p in content or () if isinstance(p, dict) and isinstance(p.get("text"), str)]
        out.append(f"<{message.get('role')}>")
        for text in texts:
            out.extend(text.split() if encoding is None else (t for i in range(0, len(text), CHUNK_CHARS)
                                                               for t in encoding.encode(text[i:i + CHUNK_CHARS],
                                                                                        disallowed_special=())))
    return out


def native_wire(cache: PrefixCache, body: dict[str, Any], used: dict[str, Any], tokenizer: str) -> tuple[int, int]:
    """Return the prompt tokens a native wire's request read from its model's prompt cache (also put in ``used``;
    cached with ``prefix_cache`` off too) and wrote to it (only where it marks ``cache_control``)."""
    read = (used.get("prompt_tokens_details") or {}).get("cached_tokens")
    if read is None:
        read = cache.cached(body.get("messages"), tokenizer, used["prompt_tokens"], str(body.get("model")))
        used["prompt_tokens_details"] = {"cached_tokens": read}
    prompt = used["prompt_tokens"]
    written = max(0, prompt // BLOCK * BLOCK - read) if body.get("_cache_control") and prompt >= MIN_TOKENS else 0
    used["prompt_tokens_details"]["cache_write_tokens"] = written  # billed at the write price (``billed_usd``)
    return read, written


def billed_usd(used: dict[str, Any], price: dict[str, float] | None) -> float:
    """Return what ``usage`` bills at ``bill_per_mtok`` (cached at ``cached_input``, writes at ``cache_write``)."""
    if not price:
        return 0.0
    details = used.get("prompt_tokens_details") or {}
    cached, written = details.get("cached_tokens", 0), details.get("cache_write_tokens", 0)
    return ((used["prompt_tokens"] - cached - written) * price["input"]
            + cached * price.get("cached_input", price["input"])
            + written * price.get("cache_write", 1.25 * price["input"])
            + used["completion_tokens"] * price["output"]) / 1e6
