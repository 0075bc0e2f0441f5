"""Prompt caching as a provider does it, the simple way: a prompt whose first 1,024-token blocks were sent before
reads them from the cache. The tokens are the ``tokenizer``'s (words by default) of the prompt's text."""

from __future__ import annotations

import hashlib
from typing import Any

from bench.testing.fake_provider.replies import load_encoding
from bench.testing.fake_provider.request_body import message_text

BLOCK = 1024  # the smallest cached prefix (Anthropic's and OpenAI's minimum), and the step it grows by


class PrefixCache:
    """The prompt prefixes each model was sent since the last reset, in blocks of ``BLOCK`` tokens."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def read(self, body: dict[str, Any], tokenizer: str, prompt_tokens: int) -> tuple[int, int]:
        """Return (tokens read from the cache, tokens newly written) for this request's prompt, and remember it."""
        text = message_text(body.get("messages"))
        encoding = load_encoding(tokenizer)
        tokens = text.split() if encoding is None else encoding.encode(text, disallowed_special=())
        read = written = 0
        digest = hashlib.sha256(str(body.get("model")).encode())  # each model has a cache of its own
        for end in range(BLOCK, len(tokens) + 1, BLOCK):
            digest.update(repr(tokens[end - BLOCK:end]).encode())
            key = digest.copy().hexdigest()
            if key in self.seen and written == 0:
                read = end
            elif key not in self.seen:
                self.seen.add(key)
                written += BLOCK
        return min(read, prompt_tokens), min(written, max(0, prompt_tokens - read))
