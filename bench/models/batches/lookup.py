"""Whether a batch bench submitted exists at the provider (by metadata, input file or ``custom_id`` set), asked
before any of its requests is sent again: ``None`` means confirmed absent; an unreadable list raises."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from bench.core.errors import ProviderError
from bench.models.batches.ledger import BatchInfo
from bench.models.batches.batch_api import BatchApi, BatchState

META_KEY = "bench_batch"  # the provider-side metadata naming bench's local id of a batch
SKEW_S = 3600  # how much earlier than its submission the provider's list is read (clock differences)

Call = Callable[..., Awaitable[Any]]  # the caller's retrying call of a provider function


async def lookup(api: BatchApi, info: BatchInfo, call: Call) -> BatchState | None:
    """Return the provider's batch that is ``info``, or None when the provider's list confirms there is none."""
    listed = await call(api.recent, _epoch(info.at) - SKEW_S)
    for state in listed:
        if (state.metadata or {}).get(META_KEY) == info.local:
            return state
    if info.file_id:
        for state in listed:
            if state.input_file_id == info.file_id:
                return state
    keys = set(info.keys)
    for state in listed:
        if META_KEY in (state.metadata or {}) or not state.input_file_id:
            continue  # another bench batch (its own metadata), or nothing to compare
        if custom_ids(await call(api.content, state.input_file_id)) == keys:
            return state
    return None


def unknown_error(info: BatchInfo, err: ProviderError, why: str) -> ProviderError:
    """Return the final failure of requests whose batch may exist though the lookup could not tell (``err``)."""
    return ProviderError(
        f"{info.model}: batch {info.local} of {len(info.keys)} requests may be running at the provider ({why}), and "
        f"its batch list could not be read to tell ({err}); its requests are not asked again until it is found or "
        f"confirmed absent: re-run later (a re-run looks it up first and adopts it), or look for metadata "
        f"{META_KEY}={info.local} in the provider's console", kind="batch_unknown", retryable=False)


def custom_ids(data: bytes) -> set[str]:
    """Return the ``custom_id`` of every request line of a batch input file (lines that are not one are skipped)."""
    ids = set()
    for raw in data.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            ids.add(line["custom_id"])
    return ids


def _epoch(at: str) -> float:
    """Return an ISO time of the ledger as epoch seconds (0.0, so that nothing is skipped, when it has none)."""
    try:
        return datetime.fromisoformat(at).timestamp()
    except (TypeError, ValueError):
        return 0.0
