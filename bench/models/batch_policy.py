"""How one model's requests go through its provider's Batch API: limits per batch, polling, retries (apart from
``bench.models.batches`` so that reading the settings loads no Batch API machinery; docs/batch-apis.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_DISCOUNT = 0.5  # what OpenAI, Anthropic, Google, Azure and Bedrock take off for batch calls
BATCH_POOL = 100_000  # items a stage may have waiting at once when a model is batched (a provider batch's size)


@dataclass(frozen=True)
class BatchPolicy:
    """One endpoint's batch settings (all validated by bench.config.entries.BatchSettings)."""

    max_requests: int = 50_000  # requests per batch: a larger queue is split
    max_bytes: int = 200 * 1024 * 1024  # bytes of one batch's JSONL file
    retry: Literal["batch", "direct"] = "batch"  # where an item that failed or expired in a batch is asked again
    poll_s: float = 5.0  # first wait between two status polls; grows ×1.5 per poll ...
    poll_max_s: float = 60.0  # ... up to this
    gather_s: float = 0.5  # a queue is sent once no request joined it for this long
    window: str = "24h"  # the completion window asked of the provider
