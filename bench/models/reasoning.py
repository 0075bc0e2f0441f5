"""A reply's reasoning kept apart from its answer: thinking from a message field, Anthropic's thinking blocks or
inline markers; a reply that never closes its thinking is a ``reasoning_cut`` failure."""

from __future__ import annotations

from typing import Any

from bench.models._litellm import litellm

THINK_START, THINK_END = "<think>", "</think>"  # the markers open models use when none is configured
REASONING_PARAMS = ("reasoning_effort", "thinking")  # generation params that turn thinking on (or tune it)
_APART = frozenset(("reasoning_content", "reasoning", "thinking_blocks"))  # where a message keeps thinking apart


def start_marker(end: str) -> str:
    """Return the start marker that goes with an end marker: the end marker without its first ``/``."""
    return end.replace("/", "", 1)


def split_think(text: str, think_end: str | None = None) -> tuple[str, str | None, int]:
    """Return (answer, reasoning or None, offset: answer == ``text[offset:]``) of inline thinking."""
    end = think_end or THINK_END
    start = start_marker(end)
    body = text.lstrip()
    opened = body.startswith(start)
    if not opened and not (think_end and end in text):
        return text, None, 0
    head = len(text) - len(body) + (len(start) if opened else 0)
    at = text.find(end, head)
    if at < 0:  # opened and never closed: the reply ran out while thinking
        return "", text[head:].strip() or None, len(text)
    rest = at + len(end)
    offset = len(text) - len(text[rest:].lstrip())
    return text[offset:], text[head:at].strip() or None, offset


def message_reasoning(message: Any) -> str | None:
    """Return the thinking a chat message carries in a field of its own (a dict or LiteLLM's Message), or None."""
    get = message.get if isinstance(message, dict) else lambda name: getattr(message, name, None)
    for name in ("reasoning_content", "reasoning"):
        value = get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    blocks = get("thinking_blocks")
    if isinstance(blocks, list):
        texts = [b.get("thinking") for b in blocks if isinstance(b, dict) and isinstance(b.get("thinking"), str)]
        joined = "\n\n".join(t.strip() for t in texts if t.strip())
        return joined or None
    return None


def plain(text: str, message: Any, think_end: str | None) -> bool:
    """Return whether a reply surely holds no thinking (no marker, no leading whitespace, no reasoning field)."""
    return (think_end is None and not text.startswith(THINK_START) and not text[:1].isspace()
            and isinstance(message, dict) and _APART.isdisjoint(message))


def separated(text: str, message: Any, think_end: str | None) -> tuple[str, str | None, int]:
    """Return (answer, reasoning or None, offset of the answer in ``text``), field and inline thinking joined."""
    if plain(text, message, think_end):
        return text, None, 0  # the common reply, no thinking anywhere: answered without copies
    answer, inline, offset = split_think(text, think_end)
    apart = message_reasoning(message)
    if apart and not inline:
        offset = len(text) - len(text.lstrip())
        answer = text[offset:]
    kept = [p for p in (apart, inline) if p]
    return answer, "\n\n".join(kept) if kept else None, offset


def reasoning_tokens(usage: Any) -> int | None:
    """Return ``completion_tokens_details.reasoning_tokens`` of a usage (a dict or LiteLLM's Usage), or None."""
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else getattr(
        usage, "completion_tokens_details", None)
    value = details.get("reasoning_tokens") if isinstance(details, dict) else getattr(details, "reasoning_tokens", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def billed_completion(prompt: int | None, completion: int | None, total: int | None,
                      reasoning: int | None) -> int | None:
    """Return the completion tokens to price: ``completion`` plus ``reasoning`` when counted outside it (``total``
    holds it above prompt + completion, or it exceeds ``completion``)."""
    if not reasoning or completion is None:
        return completion
    outside = total is not None and prompt is not None and total - prompt - completion >= reasoning
    return completion + reasoning if outside or reasoning > completion else completion


def trim_logprobs(raw: dict[str, Any] | None, offset: int) -> None:
    """Drop, in place, the logprob tokens of the first ``offset`` characters (the thinking split off)."""
    try:
        tokens = raw["choices"][0]["logprobs"]["content"]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        return
    if not offset or not isinstance(tokens, list):
        return
    at, kept = 0, []
    for tok in tokens:
        text = tok.get("token") if isinstance(tok, dict) else None
        if not isinstance(text, str):
            return  # not OpenAI's shape: left as it is (its expected scores are then not read)
        if at + len(text) > offset:
            kept.append(tok if at >= offset else {**tok, "token": text[offset - at:]})
        at += len(text)
    raw["choices"][0]["logprobs"]["content"] = kept  # type: ignore[index]


def thinks(spec: Any) -> bool:
    """Return whether a ModelSpec declares thinking (``reasoning_effort``, ``thinking`` or ``think_end``)."""
    return bool(spec.think_end) or any(k in spec.params for k in REASONING_PARAMS)


_hidden: dict[Any, bool] = {}  # ModelSpec -> whether its replies may be billed for thinking they do not show


def hides_thinking(route: Any, body: dict[str, Any] | None = None) -> bool:
    """Return whether ``route``'s reply may be billed for unseen thinking (params set it, or LiteLLM's map)."""
    if body is not None and any(k in body for k in REASONING_PARAMS):
        return True
    known = _hidden.get(route.spec)
    if known is None:
        known = _hidden[route.spec] = (any(k in route.spec.params for k in REASONING_PARAMS)
                                       or (route.provider.in_model_map(route) and _mapped_reasoning(route)))
    return known


def _mapped_reasoning(route: Any) -> bool:
    """Return whether LiteLLM's local model map marks ``route``'s model as a reasoning model."""
    try:
        return bool(litellm().supports_reasoning(model=route.spec.model))
    except Exception:  # noqa: BLE001 (a LiteLLM without the check, or a name it cannot parse: no claim either way)
        return False
