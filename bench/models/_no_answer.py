"""The failure of a reply that holds no answer (billed either way): retried when merely empty (``kind="empty"``),
final when the model spent its output limit thinking (``kind="reasoning_cut"``)."""

from __future__ import annotations

from typing import Any

from bench.core.errors import ProviderError
from bench.models._transport import storable


def no_answer(model: str, usage: dict[str, Any], where: str = "") -> ProviderError:
    """Return the ProviderError of ``model``'s empty reply (``usage``: the transport's; ``where``: " in batch …")."""
    finish = usage.get("finish_reason")
    thought, tokens = usage.get("reasoning"), usage.get("reasoning_tokens")
    if not (thought or tokens):
        return ProviderError(f"{model} returned empty content{where} (finish_reason={finish})", kind="empty",
                             retryable=True)
    spent = f"{tokens:,} reasoning tokens and no answer" if tokens else "its reply is all reasoning, no answer"
    err = ProviderError(f"{model} spent its output limit thinking{where}: {spent} (finish_reason="
                        f"{finish}); asking again would spend the same, so it was not retried. Raise max_tokens "
                        f"(max_completion_tokens for OpenAI's reasoning models) on its entry, or lower its "
                        f"reasoning_effort", kind="reasoning_cut", retryable=False)
    err.reasoning = storable(thought) if thought else None  # type: ignore[attr-defined]  (its failed record keeps it)
    return err
