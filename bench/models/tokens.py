"""Tokens before any call: a prompt counted with its model's tokenizer (never fetched from the network), and a
request's output bound; :func:`bound_counter` never counts fewer than the model's own tokenizer (docs/budget.md)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.models._litellm import litellm
from bench.models._messages import output_limit
from bench.models.ratelimit import DEFAULT_COMPLETION_TOKENS
from bench.models.reasoning import hides_thinking
from bench.models.routing import Route

DEFAULT_ENCODING = "cl100k_base"  # LiteLLM's default tokenizer
BOUND_MEMO = 4096  # texts a bound counter remembers (it counts every request of a sweep: its memory stays flat)
BYTES = "UTF-8 bytes"  # the counting of a model whose tokenizer LiteLLM does not have: a bound, never fewer
PER_MESSAGE, PER_NAME, REPLY_PRIMING = 3, 1, 3  # LiteLLM's token_counter for chat models
IMAGE_TOKENS = 4_000  # an image_url part, before any reply says what it cost: a bound (docs/budget.md)
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"  # tiktoken's cache key


@dataclass
class TokenCounter:
    """Counts the prompt tokens of chat messages for one tokenizer; each distinct text is counted once."""

    tokenizer: str  # what counts: an encoding name, "anthropic", or BYTES (a bound)
    note: str | None  # set when the model's own tokenizer is not used (it says which one is, and why)
    count_text: Callable[[str], int]
    memo: dict[str, int] = field(default_factory=dict)
    memo_max: int | None = None  # a counter that lives as long as a sweep's kernel forgets past this many texts

    def text(self, text: str) -> int:
        """Return the tokens of one text (memoized)."""
        n = self.memo.get(text)
        if n is None:
            if self.memo_max is not None and len(self.memo) >= self.memo_max:
                self.memo.clear()
            n = self.memo[text] = self.count_text(text)
        return n

    def messages(self, messages: list[dict[str, Any]]) -> int:
        """Return the prompt tokens of a chat request's messages, as ``litellm.token_counter`` counts them."""
        total = REPLY_PRIMING
        for message in messages:
            total += PER_MESSAGE
            for key, value in message.items():
                if isinstance(value, str):
                    total += self.text(value) + (PER_NAME if key == "name" else 0)
                elif key == "content" and isinstance(value, list):  # text parts, and each image at its bound
                    total += sum(IMAGE_TOKENS if p.get("type") == "image_url" else self.text(str(p.get("text") or ""))
                                 for p in value if isinstance(p, dict))
        return total


_counters: dict[tuple[str, str], TokenCounter] = {}


def counter_for(route: Route) -> TokenCounter:
    """Return the token counter of ``route``'s model (one per tokenizer and name, shared by every caller)."""
    name = bare_name(route)
    through_litellm = route.provider.counting == "litellm"
    key = ("litellm" if through_litellm else "tiktoken", name)
    counter = _counters.get(key)
    if counter is None:
        counter = _counters[key] = _litellm_counter(name) if through_litellm else _bundled_counter(name)
    return counter


def bound_counter(route: Route) -> TokenCounter:
    """Return a counter never counting fewer tokens than ``route``'s model: its own tokenizer, else UTF-8 bytes."""
    name = bare_name(route)
    key = ("bound", name, route.provider.counting != "litellm")
    counter = _counters.get(key)
    if counter is None:
        own = counter_for(route) if _own_tokenizer(route, name) else byte_counter(
            f"{name}: counted as UTF-8 bytes (a bound), because LiteLLM has no tokenizer of this model")
        counter = _counters[key] = TokenCounter(own.tokenizer, own.note, own.count_text, memo_max=BOUND_MEMO)
    return counter


def byte_counter(note: str | None = None) -> TokenCounter:
    """Return the counter of UTF-8 bytes: no byte-level tokenizer makes more tokens than a text has bytes."""
    return TokenCounter(BYTES, note, lambda text: len(text.encode("utf-8", "surrogatepass")))


def _own_tokenizer(route: Route, name: str) -> bool:
    """Return whether LiteLLM counts ``route``'s model with the model's own tokenizer (not a default stand-in)."""
    source = route.provider.own_tokenizer
    if source == "none":
        return False  # the embedded model's and a dry model's tokenizers are not LiteLLM's
    if source == "litellm" and (kind := _hugging_face_kind(name)) is not None:
        return kind == "anthropic"  # any other Hugging Face tokenizer LiteLLM would download: never loaded here
    import tiktoken  # noqa: PLC0415 (heavy for `import bench`: only a request to count needs it)

    try:
        tiktoken.encoding_name_for_model(name)
    except KeyError:
        return "gpt-4o" in name  # LiteLLM's own rule for the o200k models tiktoken's table may not list yet
    wanted = _encoding_name(name)
    counter = counter_for(route)
    return counter.tokenizer == wanted or (source == "litellm" and counter.note is None)


def bare_name(route: Route) -> str:
    """Return the model's name without its provider prefix (how LiteLLM's tokenizer tables name models)."""
    model = route.spec.model
    return model.split("/", 1)[1] if "/" in model else model


def _litellm_counter(name: str) -> TokenCounter:
    lm = litellm()
    kind = _hugging_face_kind(name)
    if kind is not None and kind != "anthropic":  # LiteLLM would download it from the Hugging Face Hub
        note = f"{name}: counted with {DEFAULT_ENCODING}, because LiteLLM's {kind} tokenizer is not bundled"
        return TokenCounter(DEFAULT_ENCODING, note, lambda text: lm.token_counter(model="", text=text))
    label = "anthropic" if kind == "anthropic" else _litellm_encoding_name(name)
    return TokenCounter(label, None, lambda text: lm.token_counter(model=name, text=text))


def _litellm_encoding_name(name: str) -> str:
    """Return the tiktoken encoding LiteLLM's token_counter uses for ``name`` (its own rule where it has one)."""
    try:
        from litellm.litellm_core_utils.token_counter import openai_tokenizer_encoding_name  # noqa: PLC0415 (litellm)
    except ImportError:
        return _encoding_name(name)
    return openai_tokenizer_encoding_name(name)


def _hugging_face_kind(name: str) -> str | None:
    """Return which Hugging Face tokenizer LiteLLM's token_counter would load for ``name`` (None: tiktoken)."""
    try:
        from litellm.utils import huggingface_tokenizer_kind  # noqa: PLC0415 (litellm: seconds to import)
    except ImportError:  # another LiteLLM version: its rule, by the names it matches
        low = name.lower()
        return next((kind for kind, marks in (("llama2", ("llama-2", "replicate")), ("llama3", ("llama-3",)),
                                                ("cohere", ("command-r",))) if any(m in low for m in marks)), None)
    return huggingface_tokenizer_kind(name)


def _encoding_name(name: str) -> str:
    """Return the tiktoken encoding LiteLLM picks for a model name (its default for names it does not know)."""
    import tiktoken  # noqa: PLC0415 (heavy for `import bench`: only a prompt to count needs it)

    if "gpt-4o" in name:
        return "o200k_base"
    try:
        return tiktoken.encoding_name_for_model(name)
    except KeyError:
        return DEFAULT_ENCODING


def _bundled_counter(name: str) -> TokenCounter:
    wanted = _encoding_name(name)
    folder = _bundled_folder()
    chosen = next((enc for enc in (wanted, DEFAULT_ENCODING) if folder and _bundled_file(folder, enc).is_file()), None)
    if chosen is None or folder is None:
        return byte_counter(f"{name}: counted as UTF-8 bytes (a bound), because no tokenizer file bundled with "
                            f"LiteLLM was found")
    encoding = bundled_encoding(chosen, folder)
    note = None if chosen == wanted else f"{name}: counted with {chosen}, because {wanted} is not bundled with LiteLLM"
    return TokenCounter(chosen, note, lambda text: len(encoding.encode(text, disallowed_special=())))


def bundled_encoding(name: str, folder: Path) -> Any:
    """Return tiktoken's encoding ``name`` from LiteLLM's bundled ``folder`` (set as tiktoken's cache: no download)."""
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    import tiktoken  # noqa: PLC0415 (heavy for `import bench`: only a prompt to count needs it)

    return tiktoken.get_encoding(name)


def _bundled_folder() -> Path | None:
    """Return the folder of tokenizer files LiteLLM ships (found without importing LiteLLM), or None."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def _bundled_file(folder: Path, encoding: str) -> Path:
    """Return where ``encoding``'s file sits in a tiktoken cache folder (named by the SHA-1 of its public URL)."""
    return folder / hashlib.sha1(_ENCODING_URL.format(name=encoding).encode()).hexdigest()


def output_bound(route: Route) -> tuple[int, str]:
    """Return the most output tokens one request to ``route`` may take, and where that bound comes from:
    ``"max_tokens"`` (its params), ``"model"`` (LiteLLM's model map) or ``"default"`` (DEFAULT_COMPLETION_TOKENS)."""
    limit = output_limit(route.spec.params)
    if limit is not None:
        return max(0, limit), "max_tokens"
    most = max_output_tokens(route)
    return (most, "model") if most else (DEFAULT_COMPLETION_TOKENS, "default")


def output_ceiling(route: Route, body: dict[str, Any]) -> int:
    """Return the most output tokens ``body`` can be billed for: its own limit; else a model that may think
    unseen, its maximum output; else ``DEFAULT_COMPLETION_TOKENS``."""
    limit = output_limit(body)
    if limit is not None:
        return max(0, limit)
    return output_bound(route)[0] if hides_thinking(route, body) else DEFAULT_COMPLETION_TOKENS


def image_parts(messages: list[dict[str, Any]]) -> int:
    """Return how many ``image_url`` parts the messages carry (each counted at ``IMAGE_TOKENS``)."""
    return sum(1 for m in messages if isinstance(m.get("content"), list)
               for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")


def max_output_tokens(route: Route) -> int | None:
    """Return a provider model's maximum output tokens from LiteLLM's local map (None: unknown, self-hosted, dry)."""
    if not route.provider.in_model_map(route):
        return None
    cost = litellm().model_cost
    for key in (route.spec.model, route.served_model, f"{route.vendor}/{route.served_model}", bare_name(route)):
        entry = cost.get(key) or {}
        most = entry.get("max_output_tokens") or entry.get("max_tokens")
        if isinstance(most, int) and most > 0:
            return most
    return None
