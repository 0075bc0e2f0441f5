"""The response cache: a content-addressed sqlite file, keyed by everything that determines a reply.

An identical request (same model, endpoint identity, messages, generation params, output
schema and sample index) is answered from here without a call. Only successes are
cached. Writes are group commits on a writer thread: a commit starts at once for the first
reply after a pause, then at most every ``COMMIT_EVERY_S`` (50 ms) with the replies of that
time, long before the stage that asked appends its record (so a resumed run never pays twice
for a reply it had kept). A kill loses at most those 50 ms of replies: fewer than the requests
it finds in flight whenever replies take longer than 50 ms, as any model's do (the run's
request journal counts both). Each commit writes whole pages, one per reply at least (keys
are hashes): at 500 replies/s, 50 ms groups of about 25 replies cost the writer 0.025 ms of
CPU a reply, where committing as soon as the commit before ended (groups of 2–5) cost 0.045.
The event loop never waits on a commit or a WAL checkpoint's fsync: measured, those stalls
cost 7% of throughput at 200 in flight.
WAL mode keeps reads concurrent, across processes too; with ``synchronous=NORMAL`` a
commit does not fsync (a WAL checkpoint does, every few thousand replies).

sqlite's WAL mode breaks on a network filesystem (NFS, Lustre), where cluster workers share the
run folder: there the cache is a folder of per-process append-only files instead
(``bench.models.shard_cache.ShardCache``, same interface). ``open_cache`` is the one place that
chooses: ``$BENCH_CACHE`` naming a folder (ending with ``/``) or ``$BENCH_CACHE_SHARDS=1`` (set by
cluster workers) selects the folder kind (see ``bench.core.paths.cache_location``).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import sqlite3
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.core.errors import StoreError
from bench.core.paths import CACHE_ENV, SHARDS_ENV, cache_location
from bench.core.secrets import redact
from bench.models._json import cache_text, loads
from bench.models.shard_cache import ShardCache

_SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
_INSERT = "INSERT OR IGNORE INTO responses (key, value, created) VALUES (?, ?, ?)"
_ROWS = 300  # rows per INSERT of a group commit (3 variables a row: under the 999 of SQLite before 3.32)
COMMIT_EVERY_S = 0.05  # a group commit starts at most this often: the replies of that time form one group


def request_key(*parts: object) -> str:
    """Return the cache key (sha256 hex) of a request's identity parts (canonical strings and numbers)."""
    return hashlib.sha256("\x1e".join(map(str, parts)).encode("utf-8", "surrogatepass")).hexdigest()


def open_cache(path: str | os.PathLike[str] | None = None, *,
               root: Path | None = None) -> ResponseCache | ShardCache:
    """Open the response cache: at ``path`` if given (a folder, or a path ending with ``/``, is a
    ``ShardCache``; a file a sqlite ``ResponseCache``), else where the environment says
    (``bench.core.paths.cache_location``: ``$BENCH_CACHE``, ``$BENCH_CACHE_SHARDS``, under ``root``'s runs)."""
    if path is None:
        where, shards = cache_location(root)
    else:
        where = Path(path).expanduser()
        shards = os.fspath(path).endswith(("/", os.sep)) or where.is_dir()
    if shards and where.is_file():
        raise StoreError(f"the response cache {where} is a file, but {SHARDS_ENV}=1 asks for a folder of shard "
                         f"files: point {CACHE_ENV} at a folder (ending with /) or unset it")
    return ShardCache(where) if shards else ResponseCache(where)


def _open_checked(path: Path) -> sqlite3.Connection:
    """Open the cache, checking it first (sqlite's quick_check): a damaged file is moved aside with a
    warning naming both files, and a fresh cache is started; the damaged one is kept for inspection."""
    db: sqlite3.Connection | None = None
    try:
        db = _connect(path)
        db.execute(_SCHEMA)
        verdict = db.execute("PRAGMA quick_check").fetchone()
        if verdict and verdict[0] == "ok":
            return db
        problem = str(verdict[0] if verdict else "no verdict")
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise
        problem = str(exc)
    if db is not None:
        db.close()
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    warnings.warn(f"response cache {path} is damaged ({problem}); moved it to {aside} and started a fresh one: "
                  f"replies it held will be asked again", RuntimeWarning, stacklevel=3)
    db = _connect(path)
    db.execute(_SCHEMA)
    return db


@functools.lru_cache(maxsize=64)
def _insert(rows: int) -> str:
    """Return the INSERT of ``rows`` replies in one statement (the first reply of a key wins, as in the table)."""
    return _INSERT + ", (?, ?, ?)" * (rows - 1)


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
            self._db = _open_checked(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the response cache {self.path}: {exc}; fix its permissions, or point "
                             f"{CACHE_ENV} at another file (the cache only saves repeated calls)") from exc
        self._lock = threading.Lock()  # guards the reader connection between threads
        self._pending: dict[str, str] = {}  # queued for the next group commit, already answerable
        self._writing: list[dict[str, str]] = []  # groups the writer thread is committing
        self._writer: ThreadPoolExecutor | None = None
        self._draining = False  # a drain is queued or running on the writer thread
        self._wake = threading.Event()  # set by ``flush``: the drain stops gathering and commits
        self._flushing = False
        self._wdb: sqlite3.Connection | None = None  # the writer thread's own connection
        self._retry_at = 0.0  # after a failed commit (disk full), its group waits in memory until then
        self._warned = False  # a failing cache warns once, not per group
        self._warned_read = False
        atexit.register(self.flush)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored (or queued) reply for ``key``, or None (and count the hit or miss)."""
        with self._lock:
            queued = self._pending.get(key)
            if queued is None and self._writing:
                queued = next((g[key] for g in self._writing if key in g), None)
            value = loads(queued) if queued is not None else self._read(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        return value

    def _read(self, key: str) -> dict[str, Any] | None:
        """Return the stored reply of ``key``; a damaged page is a miss (warned once), never a failed item."""
        try:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            return None if row is None else loads(row[0])  # read once: the check that it parses is the parse
        except (sqlite3.DatabaseError, ValueError) as exc:
            if not self._warned_read:
                self._warned_read = True
                warnings.warn(f"response cache {self.path}: an entry cannot be read ({exc}); such entries are asked "
                              f"again instead (run any sweep to have a damaged cache set aside)", RuntimeWarning,
                              stacklevel=3)
            return None

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
            self._db.execute(_INSERT, (key, redact(cache_text(value)), time.time()))

    def put_later(self, key: str, value: dict[str, Any]) -> None:
        """Queue a reply for the writer thread, which commits it at once (with whatever else is queued).

        The event loop never waits on a commit or a WAL checkpoint. Replies that arrive while
        a commit runs form the next group, so a kill loses at most the replies of one commit
        (about a millisecond), like requests still in flight. ``flush`` commits synchronously.
        """
        encoded = redact(cache_text(value))  # what is stored (and answered) holds no key
        with self._lock:
            if key in self._pending:
                return  # the first reply wins, as in the table
            self._pending[key] = encoded
            if self._draining or time.monotonic() < self._retry_at:  # after a failed commit: retried later
                return
            self._draining = True
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-cache")
        try:
            self._writer.submit(self._drain)
        except RuntimeError:  # interpreter shutdown: commit here
            self._drain()

    def _drain(self) -> None:
        """Commit queued groups until none is left (runs on the writer thread)."""
        while True:
            with self._lock:
                group, self._pending = self._pending, {}
                if not group:
                    self._draining = False
                    return
                self._writing.append(group)
            started = time.monotonic()
            if not self._commit(group):  # kept in memory for a later attempt, not retried at once
                with self._lock:
                    self._draining = False
                return
            rest = COMMIT_EVERY_S - (time.monotonic() - started)
            if rest > 0 and not self._flushing:  # a commit writes whole pages: gathering replies makes fewer
                self._wake.wait(rest)  # ``flush`` cuts the wait short
                self._wake.clear()

    def flush(self) -> None:
        """Commit everything queued now, and wait for the writer thread to finish what it has."""
        if self._writer is not None:
            self._flushing = True
            self._wake.set()  # a drain waiting for its group to gather commits it now, and waits no more
            try:
                self._writer.submit(lambda: None).result()  # one worker: this waits for every earlier commit
            except RuntimeError:
                pass  # at interpreter exit the executor has already drained and shut down
            finally:
                self._flushing = False
        with self._lock:
            group, self._pending = self._pending, {}
            if group:
                self._writing.append(group)
        if group:
            self._commit(group)

    def _commit(self, group: dict[str, str]) -> bool:
        """Write one group in one transaction on the writer connection; return whether it was committed.

        A failed commit (disk full, I/O error) keeps the group in memory, still answerable,
        for the next commit attempt (a later reply after a short pause, or ``flush``); it
        warns once per cache, not per group.
        """
        now = time.time()
        try:
            if self._wdb is None:
                self._wdb = _connect(self.path)
            rows = [(k, v, now) for k, v in group.items()]
            many = len(rows) > _ROWS  # else one statement, its own transaction: one step, one release of the GIL
            if many:
                self._wdb.execute("BEGIN IMMEDIATE")
            for i in range(0, len(rows), _ROWS):
                chunk = rows[i:i + _ROWS]
                self._wdb.execute(_insert(len(chunk)), [field for row in chunk for field in row])
            if many:
                self._wdb.execute("COMMIT")
            self._retry_at = 0.0
            return True
        except (sqlite3.Error, OSError) as exc:
            try:
                if self._wdb is not None and self._wdb.in_transaction:
                    self._wdb.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            with self._lock:
                self._pending = {**self._pending, **group}  # the earlier reply wins, as in the table
                self._retry_at = time.monotonic() + 2.0
                warn, self._warned = not self._warned, True
            if warn:
                warnings.warn(f"cannot write the response cache {self.path}: {exc}; replies are kept in memory "
                              f"and committed when it can be written (this warning is shown once)",
                              RuntimeWarning, stacklevel=2)
            return False
        finally:
            with self._lock:
                self._writing.remove(group)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the connection (pending group commits are flushed first)."""
        self.flush()
        atexit.unregister(self.flush)
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        if self._wdb is not None:
            self._wdb.close()
        self._db.close()
