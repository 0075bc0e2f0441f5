"""The run folder's record of every provider batch: each process appends fsynced events to its own file under
``<run folder>/batches/`` before polling, so on resume a batch is adopted, read or looked up, never forgotten."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.records import utc_now

FOLDER = "batches"


@dataclass
class BatchInfo:
    """One batch as the ledger knows it."""

    local: str  # bench's id of the batch (the provider's metadata bench_batch)
    endpoint: str
    model: str
    keys: list[str]
    labels: list[str | None] = field(default_factory=list)
    items: list[str | None] = field(default_factory=list)  # each request's item digest (queue.item_digest)
    batch_id: str | None = None
    file_id: str | None = None
    status: str = "submitting"
    completed: int = 0
    failed: int = 0
    total: int = 0
    finished: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None
    answered: set[str] = field(default_factory=set)  # keys with a 200 line in the output file
    at: str = ""  # when it was submitted
    last: str = ""  # its latest event (an adopted batch's status changes come later)
    conflicts: dict[str, list[str]] = field(default_factory=dict)  # key → its different replies, as received
    unknown: int = 0  # output lines whose custom_id no request of the batch has (billed, never an answer)
    unreadable: int = 0  # output lines that were not JSON (billed)
    carrier: str | None = None  # the request whose record carries the paid lines no request owns


class Ledger:
    """The batches of one run folder (``folder`` None: kept in memory only, for a client without a run)."""

    def __init__(self, folder: str | os.PathLike[str] | None):
        self.folder = Path(folder) if folder is not None else None
        self.path: Path | None = None
        self.batches: dict[str, BatchInfo] = {}  # local id → info
        self.loaded = False

    def load(self) -> Ledger:
        """Fold every process's file into ``batches`` (once; later events of this process update it in place)."""
        if self.loaded:
            return self
        self.loaded = True
        if self.folder is None or not self.folder.is_dir():
            return self
        events = []
        for path in sorted(self.folder.glob("*.jsonl")):
            for line in path.read_bytes().splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a torn last line of a killed process
                if isinstance(event, dict):
                    events.append(event)
        by_batch: dict[str, str] = {}
        for event in sorted(events, key=lambda e: str(e.get("at", ""))):  # one batch's events span processes' files
            self._fold(event, by_batch)
        return self

    def _fold(self, ev: dict[str, Any], by_batch: dict[str, str]) -> None:
        kind, local = ev.get("event"), ev.get("local") or by_batch.get(ev.get("batch_id") or "")
        if kind == "submitting":
            self.batches[ev["local"]] = BatchInfo(ev["local"], ev.get("endpoint", ""), ev.get("model", ""),
                                                  list(ev.get("keys") or []), list(ev.get("labels") or []),
                                                  list(ev.get("items") or []), at=ev.get("at", ""))
            return
        info = self.batches.get(local or "")
        if info is None:
            return
        info.last = max(info.last, str(ev.get("at", "")))
        if kind == "uploaded":
            info.file_id = ev.get("file_id")
        elif kind == "created":
            info.batch_id, info.file_id, info.status = ev.get("batch_id"), ev.get("file_id"), "validating"
            by_batch[info.batch_id or ""] = info.local
        elif kind in ("status", "finished"):
            info.status = ev.get("status", info.status)
            info.completed, info.failed, info.total = (int(ev.get(k) or 0) for k in ("completed", "failed", "total"))
        if kind == "finished":
            info.finished = True
            info.output_file_id, info.error_file_id = ev.get("output_file_id"), ev.get("error_file_id")
            info.answered = set(ev.get("answered") or [])
            info.conflicts = dict(ev.get("conflicts") or {})
            info.unknown, info.unreadable = int(ev.get("unknown") or 0), int(ev.get("unreadable") or 0)
            info.carrier = ev.get("carrier")

    def holding(self, endpoint: str) -> dict[str, BatchInfo]:
        """Return key → batch for every request of ``endpoint`` a batch holds: running, or answered by a finished one."""
        held: dict[str, BatchInfo] = {}
        for info in self.load().batches.values():
            if info.endpoint == endpoint:
                held.update(dict.fromkeys(info.answered if info.finished else info.keys, info))
        return held

    def pending_items(self, endpoint: str) -> dict[str, tuple[BatchInfo, str]]:
        """Return item digest → (batch, custom_id) of ``endpoint``'s requests in unfinished batches (to adopt)."""
        pending: dict[str, tuple[BatchInfo, str]] = {}
        for info in self.load().batches.values():
            if info.endpoint == endpoint and not info.finished:
                pending.update((item, (info, key)) for key, item in zip(info.keys, info.items) if item)
        return pending

    def submitting(self, info: BatchInfo) -> None:
        info.at = info.at or utc_now()
        self.load().batches[info.local] = info
        self._write({"event": "submitting", "local": info.local, "endpoint": info.endpoint, "model": info.model,
                     "keys": info.keys, "labels": info.labels, "items": info.items})

    def uploaded(self, info: BatchInfo, file_id: str) -> None:
        info.file_id = file_id  # a lookup matches the batch by its input file when its metadata is gone
        self._write({"event": "uploaded", "local": info.local, "file_id": file_id})

    def created(self, info: BatchInfo, batch_id: str, file_id: str | None) -> None:
        info.batch_id, info.file_id, info.status = batch_id, file_id, "validating"
        self._write({"event": "created", "local": info.local, "batch_id": batch_id, "file_id": file_id})

    def status(self, info: BatchInfo, status: str, completed: int, failed: int, total: int) -> None:
        info.status, info.completed, info.failed, info.total = status, completed, failed, total
        self._write({"event": "status", "local": info.local, "batch_id": info.batch_id, "status": status,
                     "completed": completed, "failed": failed, "total": total})

    def finished(self, info: BatchInfo, status: str, output_file_id: str | None, error_file_id: str | None,
                 answered: set[str], *, conflicts: dict[str, list[str]] | None = None, unknown: int = 0,
                 unreadable: int = 0, carrier: str | None = None) -> None:
        info.finished, info.status = True, status
        info.output_file_id, info.error_file_id, info.answered = output_file_id, error_file_id, set(answered)
        info.conflicts, info.unknown, info.unreadable, info.carrier = conflicts or {}, unknown, unreadable, carrier
        odd = {"conflicts": info.conflicts, "unknown": unknown, "unreadable": unreadable, "carrier": carrier}
        self._write({"event": "finished", "local": info.local, "batch_id": info.batch_id, "status": status,
                     "completed": info.completed, "failed": info.failed, "total": info.total,
                     "output_file_id": output_file_id, "error_file_id": error_file_id, "answered": sorted(answered),
                     **{k: v for k, v in odd.items() if v}})

    def _write(self, event: dict[str, Any]) -> None:
        if self.folder is None:
            return
        if self.path is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.path = self.folder / f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}.jsonl"
        at = utc_now()
        if (info := self.batches.get(event.get("local", ""))) is not None:
            info.last = at
        data = (json.dumps({**event, "at": at}, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def endpoint_id(identity: str) -> str:
    """Return what the ledger keeps of an endpoint: a digest of its identity (an api_base may carry a password)."""
    return hashlib.sha256(identity.encode()).hexdigest()[:20]


def batches_of(run_dir: str | os.PathLike[str]) -> list[BatchInfo]:
    """Return every batch recorded in a run folder, oldest first (the sweep's summary and progress read it)."""
    return sorted(Ledger(Path(run_dir) / FOLDER).load().batches.values(), key=lambda b: b.at)


def summary_line(run_dir: str | os.PathLike[str], since: str = "") -> str | None:
    """Return one line on the provider batches of a run folder since ``since`` (an ISO time), or None when none."""
    batches = [b for b in batches_of(run_dir) if (b.last or b.at) >= since]
    if not batches:
        return None
    shown = ", ".join(f"{n} {status}" for status, n in Counter(b.status for b in batches).most_common())
    answered = sum(len(b.answered & set(b.keys)) for b in batches)  # a line of no request is no answer
    requests = sum(len(b.keys) for b in batches)
    odd = [f"{n} {what}" for n, what in ((sum(len(b.conflicts) for b in batches), "answered twice, differently "
                                          "(recorded failed, both replies in the ledger)"),
                                         (sum(b.unknown for b in batches), "output lines of no request"),
                                         (sum(b.unreadable for b in batches), "unreadable output lines")) if n]
    return (f"provider batches: {len(batches)} ({shown}); {answered} of {requests} batched requests answered"
            + (f"; {', '.join(odd)}: billed, and counted on the records" if odd else "")
            + f" (see {Path(run_dir) / FOLDER})")
