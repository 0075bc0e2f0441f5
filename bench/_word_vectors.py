"""Deterministic stand-in embeddings (the fake provider's ``/v1/embeddings`` and ``dry/`` models): a hashed bag of
words, so texts sharing words point the same way (cosine near 1) and unrelated texts are near orthogonal."""

from __future__ import annotations

import hashlib
import re

DIMENSIONS = 256
_WORD = re.compile(r"\w+")


def word_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """Return ``text``'s vector: each lower-cased word adds ±1 at the place its hash picks."""
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vector[h % dimensions] += 1.0 if (h >> 40) & 1 else -1.0
    return vector


def word_count(text: str) -> int:
    """Return the tokens a stand-in bills for ``text``: its words, at least 1."""
    return max(1, len(_WORD.findall(text)))
