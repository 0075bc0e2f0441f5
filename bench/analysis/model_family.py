"""A model's family from its LiteLLM model string (``openai/gpt-4o-mini`` is ``gpt``): what the bias audit
compares to find a judge preferring its own kind (docs/judges.md)."""

from __future__ import annotations

import re

VENDOR_WORDS = frozenset({"meta", "google", "anthropic", "openai", "mistralai", "microsoft", "amazon", "cohere",
                          "nvidia", "ibm", "alibaba", "accounts", "fireworks", "models", "hf",
                          "us", "eu", "apac", "global"})  # the last four: Bedrock's cross-region profiles
ALIASES = {"o": "gpt", "chatgpt": "gpt", "mixtral": "mistral", "codestral": "mistral", "ministral": "mistral",
           "codellama": "llama"}
_WORD = re.compile(r"[a-z]+")


def model_family(model: str | None) -> str | None:
    """Return the family of a LiteLLM model string (see the module's rule); None for no model or no letters."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1].lower().removeprefix("ft:").split(":", 1)[0]
    words = _WORD.findall(name)
    while len(words) > 1 and words[0] in VENDOR_WORDS:
        words.pop(0)
    return ALIASES.get(words[0], words[0]) if words else None
