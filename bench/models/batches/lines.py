"""One request's line in a provider batch: what it waits for, and what its batch's files make of it; every billed
line it could not use is charged (``Usage.paid_attempts``), estimated when it has no usage."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from bench.core.errors import ProviderError
from bench.core.records import canonical_json
from bench.models._messages import output_limit
from bench.models._no_answer import no_answer
from bench.models._paid import itemized, reconcile, with_paid
from bench.models._transport import Reply, parse_openai
from bench.models.batches.outputs import Files, shown, usage_of
from bench.models.batches.batch_api import line_error
from bench.models.routing import Route
from bench.models.tokens import output_bound
from bench.models.tools_support import calls_text


@dataclass
class Request:
    """One request waiting for its batch's answer."""

    key: str
    body: dict[str, Any]
    label: str | None
    fut: asyncio.Future
    allow_empty: bool = False
    line: bytes = b""
    line_body: dict[str, Any] | None = None  # the batch line's body when it is not ``body`` (batch_api.line_body)
    tries: int = 0  # batches this request has been in
    t0: float = field(default_factory=time.monotonic)
    item: str | None = None  # the item's digest (item_digest): the same on every attempt of the item
    custom_id: str = ""  # its line's custom_id in the batch it waits on: its key, or an earlier attempt's
    paid: list[dict[str, Any]] = field(default_factory=list)  # billed lines it could not use (Usage.paid_attempts)


def item_digest(label: str | None, body: dict[str, Any]) -> str | None:
    """Return a request's identity across attempts: its ``label`` and line body (None without a label)."""
    if label is None:
        return None
    return hashlib.sha256(f"{label}\x1e{canonical_json(body)}".encode()).hexdigest()[:24]


def charge(route: Route, req: Request, files: Files, carrier: str | None) -> None:
    """Put on ``req`` the billed lines of its batch that it cannot use (each a paid attempt on its record)."""
    for used in files.extra.get(req.custom_id, []):
        req.paid.append(paid_line(route, req, used, "repeated or unreadable line"))
    for status, body, _error in files.conflicts.get(req.custom_id, []):
        if status == 200:
            req.paid.append(paid_line(route, req, usage_of(body), "conflicting line"))
    if carrier is not None and req.custom_id == carrier:
        req.paid += [paid_line(route, req, used, "line of no request in its batch") for used in files.unknown]


def paid_line(route: Route, req: Request, used: dict[str, Any] | None, why: str) -> dict[str, Any]:
    """Return one billed line as a paid attempt; without usage its tokens are estimated (output at its bound)."""
    usage = dict(used) if used else {"prompt_tokens": None,
                                     "completion_tokens": output_limit(req.body) or output_bound(route)[0]}
    reconcile(route, req.body, "", usage, batch=True)
    return {**itemized(usage, req.tries), "batch_line": why}


def reply_of(route: Route, req: Request, files: Files, status: str | None, batch_id: str | None
             ) -> Reply | ProviderError:
    """Return ``req``'s answer from its batch's files, or the failure to retry or record."""
    model = route.spec.model
    if (conflict := files.conflicts.get(req.custom_id)) is not None:
        return ProviderError(f"{model}: batch {batch_id} answered this request {len(conflict)} times, differently: "
                             f"{' | '.join(repr(shown(r)) for r in conflict)}; none is used (each was billed), a "
                             f"re-run asks it afresh", kind="batch_conflict", retryable=False)
    line = files.replies.get(req.custom_id)
    if line is None:
        if status == "cancelled":
            return ProviderError(f"{model}: batch {batch_id} was cancelled at the provider before answering this "
                                 f"request", kind="batch_cancelled", retryable=False)
        return ProviderError(f"{model}: batch {batch_id} ended {status} without a readable line for this request",
                             kind="batch_missing", retryable=True)
    if line[0] != 200:
        return line_error(route, line[0], line[1], line[2])
    try:
        text, usage, raw = parse_openai(route, 200, json.dumps(line[1]).encode(), None)
        if not text and not req.allow_empty and "tool_calls" not in usage:  # retried, unless it thought (final)
            raise no_answer(model, usage, f" in batch {batch_id}")
    except ProviderError as err:
        req.paid.append(paid_line(route, req, usage_of(line[1]), f"unusable line: {err.kind}"))
        return err
    reconcile(route, req.body, text or calls_text(usage), usage, batch=True)  # the batch price; no usage: estimated
    usage = with_paid(usage, req.paid, req.tries)
    usage.update(latency_s=round(time.monotonic() - req.t0, 4), cached=False, attempts=req.tries, batch_id=batch_id)
    return text, usage, raw
