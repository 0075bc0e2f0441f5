"""Generation params checked before anything is sent: each key against LiteLLM's list for the provider (with the
nearest valid name), each known value for its type; provider-specific fields go under ``params.extra_body``."""

from __future__ import annotations

import difflib
import re
from typing import Any

from bench.models._litellm import litellm
from bench.models.providers import ModelSpec, Route, provider_for

PASS_THROUGH = "extra_body"

# What LiteLLM lists for providers "openai" and "hosted_vllm" (OpenAI's chat-completions params).
OPENAI_CHAT = frozenset({"frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "max_tokens",
                         "max_completion_tokens", "modalities", "prediction", "n", "presence_penalty", "seed", "stop",
                         "temperature", "top_p", "tools", "tool_choice", "function_call", "functions", "extra_headers",
                         "parallel_tool_calls", "audio", "web_search_options", "service_tier", "safety_identifier",
                         "prompt_cache_key", "prompt_cache_retention", "store", "response_format", "user",
                         "reasoning_effort", "thinking"})
# llama.cpp's server samplers, accepted by the embedded model beside OpenAI's params.
LLAMA_CPP = frozenset({"top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n", "mirostat",
                       "mirostat_tau", "mirostat_eta", "grammar", "n_probs", "cache_prompt"})
# Accepted by providers but not by bench, which reads one whole reply per request.
REFUSED = {"stream": "bench reads whole replies; remove it", "stream_options": "bench reads whole replies; remove it",
           "n": "bench reads one reply per request; use `samples: N` for repeats"}

# What each known param's value must be, as the APIs take it (names not listed are not type-checked).
_NUMBER, _WHOLE, _TEXT, _FLAG, _LIST, _OBJECT = "a number", "a whole number", "a string", "true or false", \
    "a list", "a mapping"
PARAM_TYPES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("temperature", "top_p", "frequency_penalty", "presence_penalty", "min_p", "typical_p",
                     "repeat_penalty", "repetition_penalty", "mirostat_tau", "mirostat_eta"), (_NUMBER,)),
    **dict.fromkeys(("max_tokens", "max_completion_tokens", "seed", "top_k", "top_logprobs", "n",
                     "repeat_last_n", "mirostat", "n_probs"), (_WHOLE,)),
    **dict.fromkeys(("reasoning_effort", "verbosity", "service_tier", "user", "safety_identifier",
                     "prompt_cache_key", "prompt_cache_retention", "grammar"), (_TEXT,)),
    **dict.fromkeys(("logprobs", "store", "parallel_tool_calls", "cache_prompt", "stream"), (_FLAG,)),
    **dict.fromkeys(("tools", "functions", "modalities"), (_LIST,)),
    **dict.fromkeys(("response_format", "thinking", "logit_bias", "extra_headers", "prediction", "audio",
                     "web_search_options", "metadata", "stream_options", PASS_THROUGH), (_OBJECT,)),
    "stop": (_TEXT, _LIST),  # one stop sequence or several
    "tool_choice": (_TEXT, _OBJECT),  # "auto" / "none" / "required", or the tool to call
    "function_call": (_TEXT, _OBJECT),
}
# Names LiteLLM maps as OpenAI reasoning models: only these are worth importing LiteLLM for (it decides what is sent).
REASONING_NAMED = re.compile(r"^(o\d|gpt-5(?!-chat)|codex)", re.IGNORECASE)
_CHECKS = {_NUMBER: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
           _WHOLE: lambda v: isinstance(v, int) and not isinstance(v, bool),
           _TEXT: lambda v: isinstance(v, str), _FLAG: lambda v: isinstance(v, bool),
           _LIST: lambda v: isinstance(v, list), _OBJECT: lambda v: isinstance(v, dict)}


def supported_params(model: str, api_base: str | None) -> frozenset[str] | None:
    """Return the params ``model`` accepts, or None when nobody can say (then nothing is refused)."""
    known = provider_for(ModelSpec(model, api_base=api_base)).params
    if known == "any":
        return None  # a dry model stands in for any provider: the real one's check runs without --dry-run
    if known != "litellm":
        return OPENAI_CHAT | LLAMA_CPP if known == "llama_cpp" else OPENAI_CHAT
    lm = litellm()
    try:
        _name, provider, _key, _base = lm.get_llm_provider(model, api_base=api_base)
        found = lm.get_supported_openai_params(model=model.split("/", 1)[-1], custom_llm_provider=provider)
    except Exception:  # an unknown model string: the preflight names it
        return None
    return frozenset(found) if found else None


def param_problems(entries: list[tuple[str, Any]]) -> list[str]:
    """Return one line per unknown or refused generation param of ``(key path, entry)`` pairs."""
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
        before = len(problems)
        for name in names:
            if name in REFUSED:
                problems.append(f"{where}.params.{name}: {REFUSED[name]}")
            elif allowed is not None and name not in allowed:
                problems.append(_unknown(where, entry, name, allowed))
        if len(problems) == before and (refused := translation_problem(entry.model, entry.api_base, entry.params)):
            named = [n for n in names if re.search(rf"\b{re.escape(n)}\b", refused)]
            at, what = (f"params.{named[0]}", "it") if len(named) == 1 else ("params", "these params")
            problems.append(f"{where}.{at}: {entry.model} ({entry.id}) refuses {what}: {refused}")
    return problems


def litellm_view(model: str, api_base: str | None) -> tuple[str, str] | None:
    """Return (model name, provider) as LiteLLM speaks for ``model``, or None where it does not (self-hosted, dry)."""
    known = provider_for(ModelSpec(model, api_base=api_base)).params
    vendor, _, name = model.partition("/")
    if known == "openai" and name and REASONING_NAMED.match(name):
        return name, vendor
    if known != "litellm":
        return None
    try:
        name, vendor, _key, _base = litellm().get_llm_provider(model, api_base=api_base)
    except Exception:  # an unknown model string: the preflight names it
        return None
    return name, vendor


def translation_problem(model: str, api_base: str | None, params: dict[str, Any]) -> str | None:
    """Return why LiteLLM refuses to translate ``params`` for ``model`` (its reason), or None."""
    view = litellm_view(model, api_base)
    wanted = {k: v for k, v in params.items() if k != PASS_THROUGH}
    if view is None or not wanted:
        return None
    litellm()  # configured to stay local and quiet before its utils are imported
    from litellm.utils import get_optional_params  # noqa: PLC0415 (litellm: seconds to import, only when it speaks)

    try:
        get_optional_params(model=view[0], custom_llm_provider=view[1], **wanted)
    except Exception as exc:  # only its UnsupportedParamsError is a refusal; anything else is not ours to judge
        if type(exc).__name__ != "UnsupportedParamsError":
            return None
        text = str(exc).removeprefix("litellm.UnsupportedParamsError: ").splitlines()[0]
        return re.split(r"\s+(?:To drop|If you want)", text)[0].strip()
    return None


def limit_named(route: Route, params: dict[str, Any]) -> dict[str, Any]:
    """Return params with ``max_tokens`` as ``max_completion_tokens`` for a self-hosted OpenAI reasoning model."""
    vendor, name = route.vendor, route.served_model
    if (route.provider.params != "openai" or "max_tokens" not in params or "max_completion_tokens" in params
            or not REASONING_NAMED.match(name)):
        return params
    litellm()  # configured to stay local and quiet before its utils are imported
    from litellm.utils import get_optional_params  # noqa: PLC0415 (litellm: seconds; only for such a model)

    try:
        sent = get_optional_params(model=name, custom_llm_provider=vendor, max_tokens=params["max_tokens"])
    except Exception:  # LiteLLM refuses the limit itself: sent as written, the server says why
        return params
    if "max_completion_tokens" not in sent or "max_tokens" in sent:
        return params
    out = {k: v for k, v in params.items() if k != "max_tokens"}
    out["max_completion_tokens"] = params["max_tokens"]
    return out


def _unknown(where: str, entry: Any, name: str, allowed: frozenset[str]) -> str:
    if name in OPENAI_CHAT:  # a standard param this model refuses (another vendor's, a reasoning model's top_p)
        return (f"{where}.params.{name}: {entry.model} does not take '{name}' ({entry.id}): LiteLLM's list of the "
                f"params this model takes leaves it out (reasoning models refuse sampling params such as top_p and "
                f"logprobs); remove it")
    near = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
    hint = f"did you mean '{near[0]}'? " if near else ""
    return (f"{where}.params.{name}: {entry.model} does not take '{name}' ({entry.id}); {hint}"
            f"a provider-specific field goes under params.{PASS_THROUGH}")


def type_problems(params: dict[str, Any], entry_id: str | None = None) -> list[str]:
    """Return one line per known generation param of the wrong type (a list where the API takes one value, …)."""
    problems = []
    for name, value in params.items():
        kinds = PARAM_TYPES.get(name)
        if kinds is None or any(_CHECKS[k](value) for k in kinds):
            continue
        line = f"params.{name} takes {' or '.join(kinds)}, not {_described(value)}"
        if isinstance(value, list | tuple):
            line += "; an entry is one setting: " + _vary_hint(name, value, entry_id)
        elif value is None:
            line += "; remove the key to use the provider's default"
        problems.append(line)
    return problems


def _described(value: Any) -> str:
    """Return a value's YAML kind and the value itself, for an error message (long values cut)."""
    kind = {int: "a whole number", float: "a number", str: "a string", list: "a list",
            tuple: "a list", dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)
    if value is None or isinstance(value, bool):
        return str(value).lower() if isinstance(value, bool) else kind
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 60 else shown[:57] + '...'}"


def _vary_hint(name: str, values: list[Any] | tuple[Any, ...], entry_id: str | None) -> str:
    """Return how to compare several values of one param: one entry per value, with example ids."""
    ids = " and ".join(f"{entry_id or 'm'}-{v}" for v in [str(v) for v in values[:2]] or ["a", "b"])
    return (f"to compare values of {name}, declare one entry per value (e.g. ids {ids}, "
            f"each with its own {name})")
