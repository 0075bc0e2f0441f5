"""The dry-run provider: ``dry/<name>`` models answer in-process, with no server, no HTTP and no cost.

Replies are shaped like a provider's (a schema-valid instance, a pairwise verdict, prose cut at ``max_tokens``) and
deterministic from the request's cache key (``bench sweep --dry-run``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

from bench.models._messages import message_text, output_limit
from bench._schema_instance import SchemaInstance
from bench.models.ratelimit import CHARS_PER_TOKEN

DRY_PREFIX = "dry/"
TOKENS_PER_MESSAGE = 4  # role and separators, as chat formats add them
FALLBACK_VERDICTS = ("A>B", "A=B", "B>A")  # a pairwise prompt listing fewer than two labels
_LABEL = re.compile(r"(?<![\w\[<>=])([AB](?:>>|>|=|<<|<)[AB])(?![\w\]<>=])")
_WORD = re.compile(r"[A-Za-z][a-z]{4,}")
_COMMON = frozenset("""about above after again against answer because before being below between could
doing during every first further having itself might other ought response responses should their there
these those through under until where which while would write written reply model asked grade
criterion criteria tagged ignore rules format instructions nothing please""".split())
_SENTENCES = (
    "The short answer is that {a} depends mostly on {b}.",
    "In practice, {a} and {b} are closely related, so it helps to look at both.",
    "A good first step is to start with {a} and then consider {b}.",
    "This matters because {a} changes how {b} behaves in most cases.",
    "For example, comparing {a} with {b} makes the difference clear.",
    "One common mistake is to treat {a} as if it were the same as {b}.",
    "It is worth checking {a} before drawing conclusions about {b}.",
    "Overall, {a} is best understood through its effect on {b}.",
)
_FILLER = ("the question", "the context", "the main idea", "the details", "the result", "the approach")

Reply = tuple[str, dict[str, Any], dict[str, Any]]


def is_dry(model: str) -> bool:
    """Return whether ``model`` names the dry-run provider (``dry/<name>``)."""
    return isinstance(model, str) and model.startswith(DRY_PREFIX)


def dry_model(model: str) -> str:
    """Return the dry stand-in of a model string: ``openai/gpt-4o`` -> ``dry/gpt-4o`` (a dry one is kept)."""
    if is_dry(model):
        return model
    return DRY_PREFIX + (model.split("/", 1)[1] if "/" in model else model)


def answer(body: dict[str, Any], seed: str) -> Reply:
    """Return (text, usage, OpenAI-shaped body) answering a chat request ``body``, deterministic from ``seed``."""
    rng = random.Random(seed)  # a str seed is hashed with SHA-512: the same across processes and runs
    messages = body.get("messages") or []
    prompt = _last_user_text(messages)
    topic = _topic_words(prompt)
    rf = body.get("response_format") if isinstance(body.get("response_format"), dict) else None
    schema = _schema_of(rf) if rf is not None else None
    finish = "stop"
    if schema is not None:
        text = json.dumps(SchemaInstance(schema, rng, _prose_for(topic)).of(schema), ensure_ascii=False)
    elif rf is not None and rf.get("type") == "json_object":
        text = json.dumps({"answer": _prose(rng, topic, 200)}, ensure_ascii=False)
    elif _is_pairwise(prompt):
        text = _verdict(rng, topic, prompt)
    else:
        text = _prose(rng, topic, rng.randint(300, 1200))
        limit = output_limit(body)
        if limit is not None and limit > 0 and _tokens(text) > limit:
            text, finish = text[: max(1, limit * CHARS_PER_TOKEN)].rstrip(), "length"
    usage = {"prompt_tokens": prompt_tokens(messages), "completion_tokens": _tokens(text), "finish_reason": finish}
    raw = {"id": f"dry-{seed[:24]}", "object": "chat.completion", "model": body.get("model"),
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
           "usage": {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                     "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}}
    return text, usage, raw


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Return the prompt tokens of ``messages``, estimated: characters / 4 plus a few per message."""
    total = sum(_tokens(message_text(message)) + TOKENS_PER_MESSAGE for message in messages)
    return total + 3 if messages else 0  # the assistant turn's primer


def _tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _schema_of(rf: dict[str, Any]) -> dict[str, Any] | None:
    """Return the JSON schema of a ``response_format`` (OpenAI's json_schema, or llama.cpp's json_object form)."""
    schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else rf.get("schema")
    return schema if isinstance(schema, dict) else None


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    return next((message_text(m) for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), "")


def _topic_words(prompt: str) -> list[str]:
    """Return up to 12 distinct content words of the prompt, in order (what the answer talks about)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(prompt):
        low = word.lower()
        if low not in _COMMON:
            seen.setdefault(low, None)
        if len(seen) >= 12:
            break
    return list(seen)


def _prose(rng: random.Random, topic: list[str], chars: int) -> str:
    """Return sentences about ``topic`` adding up to about ``chars`` characters (at least one sentence)."""
    words = topic or list(_FILLER)
    sentences: list[str] = []
    while not sentences or sum(len(s) + 1 for s in sentences) < chars:
        a, b = rng.choice(words), rng.choice(words)
        if a == b and len(words) > 1:
            b = words[(words.index(a) + 1) % len(words)]
        sentences.append(rng.choice(_SENTENCES).format(a=a, b=b))
    return " ".join(sentences)


def _prose_for(topic: list[str]) -> Callable[[random.Random, int | None], str]:
    """Return the text maker of a schema's free strings (a rationale): a sentence or two about the prompt."""
    return lambda rng, limit: _prose(rng, topic, min(limit or 10**6, rng.randint(60, 220)))


def _is_pairwise(prompt: str) -> bool:
    return "[[A>B]]" in prompt or ("Response A" in prompt and "Response B" in prompt)


def _verdict(rng: random.Random, topic: list[str], prompt: str) -> str:
    """Return a short comparison ending in one bracketed verdict, from the labels the prompt's instructions list."""
    at = prompt.rfind("one of ")  # "give your verdict as one of A>B, A=B, B>A": the instructions come last
    listed = list(dict.fromkeys(_LABEL.findall(prompt[at:] if at >= 0 else prompt[-800:])))
    label = rng.choice(listed if len(listed) >= 2 else list(FALLBACK_VERDICTS))
    return f"{_prose(rng, topic, 240)}\n\nVerdict: [[{label}]]"
