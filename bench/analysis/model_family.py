"""A model's family from its LiteLLM model string: what the bias audit compares to find a judge preferring its own kind.

The rule, simple on purpose: take the last path segment (``openai/gpt-4o-mini`` → ``gpt-4o-mini``; a provider or
router prefix such as ``openrouter/anthropic/`` says where a model is served, not what it is), lowercased,
without an OpenAI fine-tune's ``ft:`` and without an Ollama-style ``:tag`` (``ft:gpt-4o-mini:org::id`` is a gpt);
split it into runs of letters; skip leading vendor and region words (``meta``, ``google``, ``anthropic``, …, and
Bedrock's cross-region ``us.``/``eu.``/``apac.``: ``Meta-Llama-3.1-8B`` is a llama, ``anthropic.claude-3`` and
``us.anthropic.claude-3-5-sonnet`` on Bedrock a claude); the first run
left is the family, through a few aliases (OpenAI's ``o1``/``o3``/``chatgpt`` are ``gpt``; ``mixtral``,
``codestral`` and ``ministral`` are ``mistral``; ``codellama`` is ``llama``). So ``openai/gpt-4o-mini`` and
``openai/o3-mini`` are ``gpt``, ``anthropic/claude-3-5-haiku`` is ``claude``, ``gemini/gemini-1.5-pro`` is
``gemini``, ``ollama/qwen2.5:7b`` is ``qwen``. A name the rule cannot read (an Azure deployment called
``prod-1``) gets its first word: two such judges compare only if they share it.
"""

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
