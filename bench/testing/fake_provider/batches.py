"""The fake provider's Files and Batch API state: stored files, batches, and the task that runs each batch, walking
OpenAI's statuses on the configured delays; each line is answered by the server's ``answer`` unless a ``batch_fail_*``
knob fails it, and billed (docs/tests.md)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import random
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.testing.fake_provider.batch_lines import ENDPOINTS, WINDOW, parse_lines
from bench.testing.fake_provider.replies import error_payload
from bench.testing.fake_provider.request_body import message_text

Answer = Callable[[dict[str, Any], str], tuple[int, dict[str, Any]]]  # (chat body, completion id) -> (status, JSON)
TERMINAL = ("completed", "failed", "expired", "cancelled")
STATUSES = ("validating", "in_progress", "finalizing", "cancelling", *TERMINAL)
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
LIST_LIMIT_MAX = 100


class Refusal(Exception):
    """A files/batches request the API refuses: an HTTP status and an OpenAI error message."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.code = code or {404: "not_found", 409: "invalid_state"}.get(status)


def new_id(prefix: str) -> str:
    """An OpenAI-looking object id: ``prefix`` and 24 random hex digits."""
    return f"{prefix}{secrets.token_hex(12)}"


@dataclass
class StoredFile:
    """One file: uploaded (purpose "batch") or written by a batch (purpose "batch_output")."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def to_json(self) -> dict[str, Any]:
        """The OpenAI file object."""
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "status_details": None, "expires_at": None}


@dataclass
class Batch:
    """One batch: its request, its status with the time it entered each, its counts and files."""

    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None
    created_at: int = field(default_factory=lambda: int(time.time()))
    status: str = "validating"
    times: dict[str, int] = field(default_factory=dict)
    errors: dict[str, Any] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: Counter[str] = field(default_factory=lambda: Counter(total=0, completed=0, failed=0))
    tokens: Counter[str] = field(default_factory=Counter)
    model: str | None = None
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def enter(self, status: str) -> None:
        """Move to ``status``, stamping its ``<status>_at`` time."""
        self.status = status
        self.times[f"{status}_at"] = int(time.time())

    def to_json(self) -> dict[str, Any]:
        """The OpenAI batch object."""
        stamps = {f"{s}_at": self.times.get(f"{s}_at") for s in STATUSES if s != "validating"}
        tokens = self.tokens
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint, "errors": self.errors,
                "input_file_id": self.input_file_id, "completion_window": self.completion_window,
                "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": self.created_at, **stamps, "expires_at": self.created_at + 24 * 3600,
                "request_counts": {k: self.counts[k] for k in ("total", "completed", "failed")},
                "metadata": self.metadata, "model": self.model,
                "usage": {"input_tokens": tokens["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": tokens["completion_tokens"],
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens["total_tokens"]}}


class BatchStore:
    """The files and batches of one server, its batch counters, and the task running each batch."""

    def __init__(self, config: Callable[[], dict[str, Any]], answer: Answer) -> None:
        self.config = config
        self.answer = answer
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, Batch] = {}
        self.rng = random.Random(0)
        self.clear()

    def clear(self) -> None:
        """Drop every file and batch (cancelling the running ones) and zero the counters."""
        for batch in self.batches.values():
            if batch.task is not None:
                batch.task.cancel()
        self.files, self.batches = {}, {}
        self.counters: Counter[str] = Counter(
            {k: 0 for k in ("created", "files_uploaded", "lines_answered", "lines_failed", "lines_expired",
                            "lines_billed", "billed_prompt_tokens", "billed_completion_tokens")})
        self.injected: Counter[str] = Counter()  # faulty output lines written so far, per knob
        self.route_calls: Counter[str] = Counter()  # calls per route, for batch_route_fail

    def route_fault(self, route: str) -> bool:
        """Count one call of ``route``; whether ``batch_route_fail`` fails it (its first N calls since the reset)."""
        self.route_calls[route] += 1
        return self.route_calls[route] <= int(self.config()["batch_route_fail"].get(route, 0))

    def reseed(self, seed: int) -> None:
        """Restart the draws of ``batch_fail_rate`` from ``seed``."""
        self.rng = random.Random(seed)

    def snapshot(self) -> dict[str, Any]:
        """The counters, and how many batches are in each status now."""
        return {**self.counters, "by_status": dict(Counter(b.status for b in self.batches.values())),
                "route_calls": dict(self.route_calls)}

    def add_file(self, filename: str, purpose: str, data: bytes, *, uploaded: bool = True) -> StoredFile:
        """Store a file (an upload counts in ``files_uploaded``)."""
        stored = StoredFile(new_id("file-"), filename, purpose, data)
        self.files[stored.id] = stored
        if uploaded:
            self.counters["files_uploaded"] += 1
        return stored

    def file(self, file_id: str) -> StoredFile:
        """The file ``file_id``; 404 if there is none."""
        if file_id not in self.files:
            raise Refusal(404, f"No such File object: {file_id}")
        return self.files[file_id]

    def delete_file(self, file_id: str) -> dict[str, Any]:
        """Delete a file; the OpenAI deletion object."""
        self.file(file_id)
        del self.files[file_id]
        return {"id": file_id, "object": "file", "deleted": True}

    def create(self, input_file_id: Any, endpoint: Any, window: Any, metadata: Any) -> Batch:
        """Check a create request, store the batch and start its task."""
        if endpoint not in ENDPOINTS:
            raise Refusal(400, f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r} (fake provider)")
        if window != WINDOW:
            raise Refusal(400, f"completion_window must be {WINDOW!r}, got {window!r}")
        if not isinstance(input_file_id, str) or input_file_id not in self.files:
            raise Refusal(404, f"No such File object: {input_file_id}")
        if self.files[input_file_id].purpose != "batch":
            raise Refusal(400, f"File {input_file_id} has purpose {self.files[input_file_id].purpose!r}, "
                               f"not 'batch'")
        if metadata is not None and not (isinstance(metadata, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
            raise Refusal(400, f"metadata must be an object of strings, got {metadata!r}")
        kept = None if self.config()["batch_drop_metadata"] else metadata
        batch = Batch(new_id("batch_"), input_file_id, endpoint, window, kept)
        self.batches[batch.id] = batch
        self.counters["created"] += 1
        # a fresh context: nothing of the creating request (its Authorization, for echo_auth) leaks into the lines
        batch.task = asyncio.get_running_loop().create_task(self.run(batch), context=contextvars.Context())
        return batch

    def get(self, batch_id: str) -> Batch:
        """The batch ``batch_id``; 404 if there is none."""
        if batch_id not in self.batches:
            raise Refusal(404, f"No batch found with id '{batch_id}'.")
        return self.batches[batch_id]

    def cancel(self, batch_id: str) -> Batch:
        """Ask a running batch to stop: it shows "cancelling" until its task ends it "cancelled"."""
        batch = self.get(batch_id)
        if batch.status in TERMINAL:
            raise Refusal(409, f"Cannot cancel a batch with status '{batch.status}'.")
        if batch.status != "cancelling":
            batch.enter("cancelling")
            batch.cancel.set()
        return batch

    def page(self, limit: Any = None, after: str | None = None) -> dict[str, Any]:
        """``GET /v1/batches``: newest first, ``limit`` (1-100, default 20) after the batch ``after``."""
        try:
            size = 20 if limit is None else int(limit)
        except ValueError:
            size = 0
        if not 1 <= size <= LIST_LIMIT_MAX:
            raise Refusal(400, f"limit must be an integer from 1 to {LIST_LIMIT_MAX}, got {limit!r}")
        ordered = list(reversed(self.batches.values()))
        start = 0 if after is None else [b.id for b in ordered].index(self.get(after).id) + 1
        page = ordered[start:start + size]
        return {"object": "list", "data": [b.to_json() for b in page],
                "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
                "has_more": start + size < len(ordered)}

    async def run(self, batch: Batch) -> None:
        """validating → in_progress → each line → finalizing → completed; or failed, expired, cancelled."""
        outputs: list[dict[str, Any]] = []
        failures: list[dict[str, Any]] = []
        if await self.pause(batch, "validating"):
            return await self.finish(batch, outputs, failures, "cancelled")
        source = self.files.get(batch.input_file_id)
        cfg = self.config()
        requests, errors = parse_lines(b"" if source is None else source.data, batch.endpoint,
                                       cfg["batch_max_requests"], cfg["batch_max_bytes"])
        if errors:
            batch.errors = {"object": "list", "data": errors}
            return batch.enter("failed")
        batch.counts["total"] = len(requests)
        batch.model = requests[0]["body"].get("model")
        batch.enter("in_progress")
        if await self.pause(batch, "in_progress"):
            return await self.finish(batch, outputs, failures, "cancelled")
        for index, request in enumerate(requests):
            expire_after = self.config()["batch_expire_after"]
            if expire_after is not None and index >= expire_after:
                failures += [expired_line(r) for r in requests[index:]]
                self.counters["lines_expired"] += len(requests) - index
                return await self.finish(batch, outputs, failures, "expired")
            if await self.pause(batch, None):
                return await self.finish(batch, outputs, failures, "cancelled")
            status, payload = self.answer_line(request["body"])
            (outputs if status == 200 else failures).append(output_line(request["custom_id"], status, payload))
            batch.counts["completed" if status == 200 else "failed"] += 1
            self.counters["lines_answered"] += 1
            self.counters["lines_failed"] += status != 200
            if status == 200:
                self.bill(batch, payload)
                outputs[-1:] = self.faulty(batch, request, outputs[-1])
        outputs += self.strays(batch, requests)
        batch.enter("finalizing")
        if await self.pause(batch, "finalizing"):
            return await self.finish(batch, outputs, failures, "cancelled")
        return await self.finish(batch, outputs, failures, "completed")

    async def pause(self, batch: Batch, status: str | None) -> bool:
        """Hold ``batch_delays_s[status]`` (or ``batch_line_ms`` for a line); True once it is cancelled."""
        cfg = self.config()
        delay = cfg["batch_line_ms"] / 1000 if status is None else cfg["batch_delays_s"].get(status, 0)
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(batch.cancel.wait(), delay)
        else:
            await asyncio.sleep(0)  # a big batch with no delays still lets the server answer others
        return batch.cancel.is_set()

    def answer_line(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A line's (status, body): failed by ``batch_fail_match``/``batch_fail_rate``, else answered as chat."""
        cfg = self.config()
        prompt = message_text(body.get("messages"))
        matched = next((m for m in cfg["batch_fail_match"] if m in prompt), None)
        drawn = matched is None and cfg["batch_fail_rate"] > 0 and self.rng.random() < cfg["batch_fail_rate"]
        if matched is not None or drawn:
            status = cfg["batch_fail_status"]
            why = (f"batch_fail_match {matched!r}" if matched is not None
                   else f"batch_fail_rate {cfg['batch_fail_rate']}")
            return status, error_payload(status, f"fake batch line failure ({why})")
        return self.answer(body, new_id("chatcmpl-fake-"))

    def bill(self, batch: Batch, payload: dict[str, Any]) -> None:
        """Count one answered line as billed: its tokens in the batch's usage and in the counters."""
        batch.tokens.update(payload["usage"])
        self.counters["lines_billed"] += 1
        self.counters["billed_prompt_tokens"] += payload["usage"]["prompt_tokens"]
        self.counters["billed_completion_tokens"] += payload["usage"]["completion_tokens"]

    def faulty(self, batch: Batch, request: dict[str, Any], line: dict[str, Any]) -> list[dict[str, Any]]:
        """The output lines ``line`` becomes under ``batch_unreadable_lines`` and ``batch_duplicate_lines``."""
        cfg, lines = self.config(), [line]
        if self.injected["unreadable"] < cfg["batch_unreadable_lines"]:
            self.injected["unreadable"] += 1
            line["unreadable"] = True
        if self.injected["duplicate"] < cfg["batch_duplicate_lines"]:
            self.injected["duplicate"] += 1
            status, again = self.answer(request["body"], new_id("chatcmpl-fake-"))
            if status == 200:
                again["choices"][0]["message"]["content"] = f"{again['choices'][0]['message']['content']} (again)"
                self.bill(batch, again)
                lines.append(output_line(request["custom_id"], 200, again))
        return lines

    def strays(self, batch: Batch, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The answered lines no request asked for (``batch_unknown_lines``, billed), at the end of the file."""
        lines = []
        while requests and self.injected["unknown"] < self.config()["batch_unknown_lines"]:
            self.injected["unknown"] += 1
            status, payload = self.answer(requests[0]["body"], new_id("chatcmpl-fake-"))
            if status == 200:
                self.bill(batch, payload)
                lines.append(output_line(f"unknown-{self.injected['unknown']}", 200, payload))
        return lines

    async def finish(self, batch: Batch, outputs: list[dict[str, Any]], failures: list[dict[str, Any]],
                     status: str) -> None:
        """Write the output and error files (each only if it has a line) and enter the final ``status``."""
        if status == "cancelled":
            await asyncio.sleep(self.config()["batch_delays_s"].get("cancelling", 0))
        for kind, lines in (("output", outputs), ("error", failures)):
            if lines:
                data = "".join(written(line) + "\n" for line in lines).encode()
                stored = self.add_file(f"{batch.id}_{kind}.jsonl", "batch_output", data, uploaded=False)
                setattr(batch, f"{kind}_file_id", stored.id)
        batch.enter(status)


def output_line(custom_id: str, status: int, body: dict[str, Any]) -> dict[str, Any]:
    """One line of an output (status 200) or error file: the response the request got."""
    return {"id": new_id("batch_req_"), "custom_id": custom_id,
            "response": {"status_code": status, "request_id": secrets.token_hex(16), "body": body}, "error": None}


def written(line: dict[str, Any]) -> str:
    """One output line as JSON text; one marked ``unreadable`` broken (its custom_id and usage still there)."""
    if not line.pop("unreadable", False):
        return json.dumps(line)
    return json.dumps(line).replace('"message": {', '"message": {{', 1)


def expired_line(request: dict[str, Any]) -> dict[str, Any]:
    """One line of the error file for a request the batch did not reach before it expired."""
    return {"id": new_id("batch_req_"), "custom_id": request["custom_id"], "response": None,
            "error": {"code": "batch_expired", "message": EXPIRED_MESSAGE}}
