"""Generation params checked against what the provider accepts, before anything is sent.

``params: {temprature: 0.2}`` would otherwise reach the provider as is: silently ignored by
some, a 400 for others. Each model's and judge's ``params`` keys are checked against the
OpenAI-style params LiteLLM says the provider supports (``get_supported_openai_params``);
an unknown key is refused with the nearest valid name. Fields a provider accepts beyond
those (vLLM's ``top_k``, ``repetition_penalty``, …) go under ``params.extra_body``, which is
merged into the request body as given (``bench.models.routing.body_params``).

OpenAI-compatible servers reached through an ``api_base`` (``openai/…``, ``hosted_vllm/…``)
are checked against OpenAI's chat params, which is what LiteLLM lists for them, without
importing LiteLLM (seconds per kernel); the embedded llama.cpp model also takes llama.cpp's
sampling params. A dry model (``dry/<name>``) takes any params: it stands in for every provider.
"""

from __future__ import annotations

import difflib
from typing import Any

from bench.models import dry
from bench.models._litellm import litellm

PASS_THROUGH = "extra_body"

# What LiteLLM lists for providers "openai" and "hosted_vllm" (OpenAI's chat-completions params).
OPENAI_CHAT = frozenset({
    "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "max_tokens", "max_completion_tokens",
    "modalities", "prediction", "n", "presence_penalty", "seed", "stop", "temperature", "top_p", "tools",
    "tool_choice", "function_call", "functions", "extra_headers", "parallel_tool_calls", "audio",
    "web_search_options", "service_tier", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
    "store", "response_format", "user", "reasoning_effort", "thinking",
})
# llama.cpp's server samplers, accepted by the embedded model beside OpenAI's params.
LLAMA_CPP = frozenset({"top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n", "mirostat",
                       "mirostat_tau", "mirostat_eta", "grammar", "n_probs", "cache_prompt"})
# Accepted by providers but not by bench, which reads one whole reply per request.
REFUSED = {"stream": "bench reads whole replies; remove it", "stream_options": "bench reads whole replies; remove it",
           "n": "bench reads one reply per request; use `samples: N` for repeats"}
SELF_HOSTED = ("openai/", "hosted_vllm/")


def supported_params(model: str, api_base: str | None) -> frozenset[str] | None:
    """Return the params ``model`` accepts, or None when nobody can say (then nothing is refused)."""
    if dry.is_dry(model):
        return None  # a dry model stands in for any provider: the real one's check runs without --dry-run
    if model.startswith("local/"):
        return OPENAI_CHAT | LLAMA_CPP
    if api_base and model.startswith(SELF_HOSTED):
        return OPENAI_CHAT
    lm = litellm()
    try:
        _name, provider, _key, _base = lm.get_llm_provider(model, api_base=api_base)
        found = lm.get_supported_openai_params(model=model.split("/", 1)[-1], custom_llm_provider=provider)
    except Exception:  # an unknown model string: the preflight names it
        return None
    return frozenset(found) if found else None


def param_problems(entries: list[tuple[str, Any]]) -> list[str]:
    """Return one line per unknown or refused generation param of ``(key path, entry)`` pairs.

    The key path is where the entry sits in the params file (``models[0]``, ``judges[1]``).
    """
    problems = []
    memo: dict[tuple[str, str | None], frozenset[str] | None] = {}
    for where, entry in entries:
        names = [k for k in entry.params if k != PASS_THROUGH]
        if not names:
            continue
        key = (entry.model, entry.api_base)
        if key not in memo:
            memo[key] = supported_params(*key)
        allowed = memo[key]
        for name in names:
            if name in REFUSED:
                problems.append(f"{where}.params.{name}: {REFUSED[name]}")
            elif allowed is not None and name not in allowed:
                problems.append(_unknown(where, entry, name, allowed))
    return problems


def _unknown(where: str, entry: Any, name: str, allowed: frozenset[str]) -> str:
    near = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
    hint = f"did you mean '{near[0]}'? " if near else ""
    return (f"{where}.params.{name}: {entry.model} does not take '{name}' ({entry.id}); {hint}"
            f"a provider-specific field goes under params.{PASS_THROUGH}")
