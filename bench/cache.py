"""The response cache: a content-addressed sqlite file, keyed by everything that determines a reply.

An identical request (same model, endpoint identity, messages, generation params, output
schema and sample index) is answered from here without a call. Only successes are
cached. Writes go through one writer thread that commits in groups: ``aput`` returns
once its entry is committed (so a killed process never pays twice for a reply it
received), yet no commit or WAL checkpoint ever blocks the event loop. WAL mode keeps
reads concurrent, across processes too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from .errors import StoreError
from .records import canonical_json

_SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
_INSERT = "INSERT OR IGNORE INTO responses (key, value, created) VALUES (?, ?, ?)"


def request_key(identity: dict[str, Any]) -> str:
    """Return the cache key (sha256 hex) of a request's identity dict."""
    return hashlib.sha256(canonical_json(identity).encode("utf-8", "surrogatepass")).hexdigest()


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a committed entry survives a killed process
    return db


class ResponseCache:
    """Maps request keys to stored replies (JSON dicts) in one sqlite file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = _connect(self.path)
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the response cache {self.path}: {exc}; "
                             f"fix permissions or set another cache path") from exc
        self._lock = threading.Lock()  # guards the reader connection between threads
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored reply for ``key``, or None (and count the hit or miss)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def contains(self, keys: list[str]) -> int:
        """Return how many of ``keys`` are cached (for `bench validate`'s plan); counts nothing."""
        found = 0
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                q = f"SELECT COUNT(*) FROM responses WHERE key IN ({','.join('?' * len(chunk))})"
                found += self._db.execute(q, chunk).fetchone()[0]
        return found

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a successful reply now (the first one wins; an identical request never overwrites)."""
        with self._lock:
            self._db.execute(_INSERT, (key, json.dumps(value, ensure_ascii=False), time.time()))

    async def aput(self, key: str, value: dict[str, Any]) -> None:
        """Store a reply through the group-commit writer; return once it is committed."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._ensure_writer()
        self._queue.put((key, json.dumps(value, ensure_ascii=False), loop, done))
        await done

    def _ensure_writer(self) -> None:
        if self._writer is None or not self._writer.is_alive():
            self._writer = threading.Thread(target=self._write_loop, name="bench-cache-writer", daemon=True)
            self._writer.start()

    def _write_loop(self) -> None:
        """Drain the queue in groups: one transaction per group, then wake every waiter."""
        db = _connect(self.path)
        while True:
            item = self._queue.get()
            if item is None:
                db.close()
                return
            group = [item]
            while len(group) < 1000:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)  # stop after this group
                    break
                group.append(nxt)
            error = self._commit(db, group)
            for _key, _value, loop, fut in group:
                loop.call_soon_threadsafe(_settle, fut, error)

    @staticmethod
    def _commit(db: sqlite3.Connection, group: list) -> Exception | None:
        now = time.time()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(_INSERT, [(k, v, now) for k, v, _loop, _fut in group])
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            return StoreError(f"cannot write the response cache: {exc}")
        return None

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Stop the writer (after it commits what is queued) and close the connections."""
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(None)
            self._writer.join(timeout=30)
        self._db.close()


def _settle(fut: asyncio.Future, error: Exception | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)
