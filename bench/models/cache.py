"""The response cache: a content-addressed sqlite file, keyed by everything that determines a reply.

An identical request (same model, endpoint identity, messages, generation params, output
schema and sample index) is answered from here without a call. Only successes are cached.

Writes go through a per-process write-ahead log (``bench.models._cache_log``): a writer thread
appends the replies queued at once, then one group at a time, gathered as long as replies take to come
(at least ``COMMIT_EVERY_S``, 50 ms, at most ``LONGEST_GATHER_S``, 250 ms), long before the stage that
asked appends its record, so a resumed run never pays twice for a reply it had kept; a kill loses at
most the replies of one group, which (replies taking that long) are at most about as many as the requests
in flight it loses too (fewer when replies take longer than ``LONGEST_GATHER_S``; the run's request journal
counts both). The log is merged into sqlite in one sorted transaction when it holds ``MERGE_ROWS``
replies, at ``flush`` (``LLM.aclose``: every stage's end) and at exit; the log of a process that died is merged by the
next process that opens the cache. Why: an insert into sqlite costs 15–22 µs of CPU (a random page
of the key index per reply), an append about 1 µs, and a merge of thousands in key order 3–9 µs a
reply on a cache of up to tens of thousands (more on a larger one); per-reply commits made the cache cost more than the rest of
the seam (docs/llm-seam.md). Other processes see a reply once it is merged (another process asking
the same request before then pays for it again, as one asking while it was in flight did before).

Reads answer from this process's queue and log first, then sqlite. A process keeps the stored keys'
hashes in memory (``bench.models._key_filter``): a miss, nearly every request of a sweep, needs no
query. While requests run, the event loop never waits on a write, a merge or a WAL checkpoint's
fsync; a stage's end (``LLM.aclose``) waits for the last merge. WAL mode keeps reads concurrent,
across processes too; with ``synchronous=NORMAL`` a commit does not fsync (a WAL checkpoint does).

sqlite's WAL mode breaks on a network filesystem (NFS, Lustre), where cluster workers share the
run folder: there the cache is a folder of per-process append-only files instead
(``bench.models.shard_cache.ShardCache``, same interface). ``open_cache`` is the one place that
chooses: ``$BENCH_CACHE`` naming a folder (ending with ``/``) or ``$BENCH_CACHE_SHARDS=1`` (set by
cluster workers) selects the folder kind (see ``bench.core.paths.cache_location``).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import sqlite3
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.core.errors import CacheWriteWarning, StoreError
from bench.core.paths import CACHE_ENV, SHARDS_ENV, cache_location
from bench.core.secrets import may_hold_secret, redact
from bench.models._cache_log import CacheLog, merge_orphans
from bench.models._cache_log import lines as log_lines
from bench.models._cache_table import INSERT, connect, insert_read, insert_rows, open_checked, parameters
from bench.models._json import cache_text, loads
from bench.models._key_filter import BUILD_AFTER, LOAD_AT_ONCE, KeyFilter
from bench.models.shard_cache import ShardCache

COMMIT_EVERY_S = 0.05  # the log is written at most this often: the replies of that time form one group
LONGEST_GATHER_S = 0.25  # ... or as long as replies take (``put_later``'s ``took``), up to this
MERGE_ROWS = 4096  # a log this long is merged into sqlite at once (else at ``flush``: a stage's end, exit)


def request_key(*parts: object) -> str:
    """Return the cache key (sha256 hex) of a request's identity parts (canonical strings and numbers)."""
    return hashlib.sha256("\x1e".join(map(str, parts)).encode("utf-8", "surrogatepass")).hexdigest()


def stored_text(value: dict[str, Any]) -> str:
    """Return a reply as the cache stores (and answers) it: JSON text holding no secret (``redact``)."""
    return redact(cache_text(value))


def stored_texts(group: dict[str, str]) -> dict[str, str]:
    """Return each queued reply of a group (``cache_text``, not yet redacted) as ``stored_text`` does, testing the
    group's texts for a secret once (joined by newlines, which no test reads across) instead of once per reply:
    nearly every group holds none."""
    if may_hold_secret("\n".join(group.values())):
        return {k: redact(v) for k, v in group.items()}
    return group


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


class ResponseCache:
    """Maps request keys to stored replies (JSON dicts): one sqlite file, and a write-ahead log per process."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = open_checked(self.path)
            merge_orphans(self.path, insert_read, self._db)  # replies of processes that died before merging
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the response cache {self.path}: {exc}; fix its permissions, or point "
                             f"{CACHE_ENV} at another file (the cache only saves repeated calls)") from exc
        self._lock = threading.Lock()  # guards the dicts below and the reader connection
        self._io = threading.Lock()  # one writer of the log and of sqlite at a time (writer thread, or flush)
        self._pending: dict[str, str] = {}  # queued for the log (encoded, not yet redacted), already answerable
        self._moving: dict[str, str] = {}  # taken off the queue, being redacted and appended: answerable
        self._logged: dict[str, str] = {}  # in the log, not yet in sqlite (encoded, redacted): answered from here
        self._log = CacheLog(self.path)
        self._writer: ThreadPoolExecutor | None = None
        self._draining = False  # a drain is queued or running on the writer thread
        self._wake = threading.Event()  # set by ``flush``: the drain stops gathering and writes
        self._gather = COMMIT_EVERY_S  # how long a group gathers: as long as replies take (``put_later``)
        self._wdb: sqlite3.Connection | None = None  # the writer's own connection
        self._filter: KeyFilter | None = None  # bench.models._key_filter, once BUILD_AFTER misses were asked
        self._retry_at = 0.0  # after a failed append (disk full), replies wait in memory until then
        self._merge_retry_at = 0.0  # after a failed merge (sqlite locked, disk full), the next waits until then
        self._warned = False  # a failing cache warns once, not per group
        self._warned_read = False
        atexit.register(self.flush)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored (or queued) reply for ``key``, or None (and count the hit or miss)."""
        with self._lock:
            logged = self._logged.get(key)
            if logged is not None:
                value = loads(logged)
            elif (queued := self._pending.get(key, self._moving.get(key))) is not None:
                value = loads(redact(queued))  # as the log will hold it (and answer it)
            elif self._filter is not None and self._filter.absent(key, self._db):
                value = None
            else:
                value = self._read(key)
        if value is None:
            self.misses += 1
            if self.misses == 1 and self._filter is None:
                with self._lock:  # a small cache: at once (≤ 20 ms); a large one: later, on the writer thread
                    self._filter = KeyFilter.load(self._db, limit=LOAD_AT_ONCE)
            elif self.misses == BUILD_AFTER and self._filter is None:
                self._submit(self._build_filter)
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
        found = self.held(keys)
        return sum(k in found for k in keys)

    def held(self, keys: list[str]) -> set[str]:
        """Return which of ``keys`` are cached, in one pass (the estimate asks thousands at once); counts nothing."""
        with self._lock:
            found = {k for k in keys if k in self._pending or k in self._moving or k in self._logged}
            stored = list(dict.fromkeys(k for k in keys if k not in found))
            for i in range(0, len(stored), 500):
                chunk = stored[i:i + 500]
                q = f"SELECT key FROM responses WHERE key IN ({','.join('?' * len(chunk))})"
                found.update(key for (key,) in self._db.execute(q, chunk))
        return found

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a successful reply in sqlite now (the first one wins; an identical request never overwrites)."""
        with self._lock:
            self._db.execute(INSERT, (key, stored_text(value), time.time()))

    def put_later(self, key: str, value: dict[str, Any], took: float | None = None) -> None:
        """Queue a reply for the writer thread, which appends it to this process's log at once (with whatever else
        is queued) and merges the log into sqlite in large groups (bench.models._cache_log). ``took``: how long the
        reply took to come (seconds), which sets how long the writer's groups gather (below).

        The event loop never waits on a write or a commit: it encodes the reply (1 µs without logprobs, where the
        writer thread, woken with cold caches, took 3–4), and the writer tests a group for secrets at once
        (``stored_texts``). Replies that arrive while a write runs form the next group, gathered for
        ``COMMIT_EVERY_S``, or as long as replies take (a running mean of ``took``) up to ``LONGEST_GATHER_S``; a
        kill loses at most one group of replies, at most about as many as the requests in flight it loses too
        (the journal counts both), and slower replies need fewer wakes and writes. ``flush`` writes and merges
        synchronously.
        A value JSON cannot hold (a set; never in a reply the seam builds) is left out with a warning.
        """
        if key in self._pending or key in self._moving or key in self._logged:
            return  # the first reply wins, as in the table (checked again under the lock, below)
        try:
            text = cache_text(value)
        except Exception as exc:
            warnings.warn(f"response cache: a reply cannot be stored ({exc}); it will be asked again",
                          CacheWriteWarning, stacklevel=2)
            return
        if took is not None:  # a lost update between threads only delays the mean: no lock
            self._gather += (min(LONGEST_GATHER_S, max(COMMIT_EVERY_S, took)) - self._gather) * 0.125
        with self._lock:
            if key in self._pending or key in self._moving or key in self._logged:
                return
            self._pending[key] = text
            if self._draining or time.monotonic() < self._retry_at:  # after a failed write: retried later
                return
            self._draining = True
        self._submit(self._drain)

    @property
    def gather_s(self) -> float:
        """How long the writer gathers a group of replies before one append (see ``put_later``)."""
        return self._gather

    def _submit(self, job: Any) -> None:
        """Run ``job`` on the writer thread (started on first use); at interpreter shutdown, here."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-cache")
        try:
            self._writer.submit(job)
        except RuntimeError:
            job()

    def _drain(self) -> None:
        """Write queued groups to the log until a wait gathers nothing, merging when it is long (writer thread);
        whatever stops it, the next ``put_later`` starts another (the queued replies stay queued)."""
        try:
            self._drain_groups()
        except BaseException:
            with self._lock:
                self._draining = False
            raise

    def _drain_groups(self) -> None:
        while True:
            started = time.monotonic()
            with self._io:
                written = self._write_pending()
                if written > 0 and self._log.rows >= MERGE_ROWS:
                    self._merge()
            if written <= 0:  # nothing gathered since the last write, or the write failed (retried later)
                with self._lock:
                    if not self._pending or written < 0:
                        self._draining = False  # in the same hold as the check: a reply queued after it starts a drain
                        return
                continue  # queued between the write and the check: put_later saw a drain running
            rest = self._gather - (time.monotonic() - started)
            if rest > 0:  # replies that arrive meanwhile form one group: one write
                self._wake.wait(rest)  # ``flush`` cuts the wait short
                self._wake.clear()

    def persist(self) -> None:
        """Append the queued replies to the log now, without merging (the caller waits: a conversation, before its
        next turn's request, so a kill during that request never loses the turns it answered)."""
        with self._lock:
            if not self._pending and not self._draining:
                return  # nothing queued, and no group being written (the writer holds ``_io`` until it is appended)
        with self._io:
            self._write_pending()

    def flush(self) -> None:
        """Write everything queued and merge the log into sqlite now (the caller waits: a stage's end, exit).
        When the log cannot be written, the queued replies go straight into sqlite if it can be."""
        self._wake.set()
        with self._io:
            if self._write_pending() >= 0:
                self._merge(force=True)
            else:
                self._insert_pending()

    def _insert_pending(self) -> None:
        """Insert the queued replies into sqlite directly (the log failed; sqlite may still have room); on failure
        they stay queued, in memory and answered (warned once already)."""
        with self._lock:
            group = dict(self._pending)
        if group and self._store(stored_texts(group)) is None:
            with self._lock:
                for k in group:
                    self._pending.pop(k, None)

    def _store(self, held: dict[str, str]) -> BaseException | None:
        """Insert the encoded replies of ``held`` into sqlite in one sorted transaction (answered from sqlite and the
        key filter from then on); return the error, if any.

        ``held`` is the logged replies, which change only in ``_merge`` and ``_write_pending`` (both under ``_io``),
        or a copy: it is sorted and its keys hashed without ``_lock``, so requests asking the cache meanwhile
        never wait for that."""
        keys = sorted(held)  # in key order: neighbours share index pages
        if not keys:
            return None
        flat = parameters(keys, held, time.time())
        known = list(map(hash, keys))  # what the key filter keeps of a key (bench.models._key_filter)

        def in_filter(before: int, after: int, kept: bool) -> None:  # before the commit: never read back
            with self._lock:
                if self._filter is not None:
                    self._filter.stored(known, before, after, kept)

        try:
            if self._wdb is None:
                self._wdb = connect(self.path)
            insert_rows(self._wdb, flat, in_filter)
        except (sqlite3.Error, OSError) as exc:
            return exc
        return None

    def _write_pending(self) -> int:
        """Append the queued replies to the log (redacted: ``stored_texts``); return how many (0: none queued, -1: the
        write failed)."""
        with self._lock:
            if not self._pending:
                return 0
            group, self._pending = self._pending, {}
            self._moving = group  # answerable all along: from the queue, while written, then from the log
        try:
            encoded = stored_texts(group)
        except BaseException:  # e.g. a warning turned into an error: the group goes back to the queue's head
            with self._lock:
                self._pending, self._moving = {**group, **self._pending}, {}
            raise
        with self._lock:
            self._logged.update(encoded)
            self._moving = {}
        exc = self._log.append(log_lines(encoded, time.time()), len(encoded))
        if exc is None:
            self._retry_at = 0.0
            return len(encoded)
        with self._lock:
            for k in encoded:
                del self._logged[k]
            self._pending = {**group, **self._pending}  # back at the queue's head (put_later refused their keys)
        self._failed(exc)
        return -1

    def _merge(self, *, force: bool = False) -> None:
        """Insert every logged reply into sqlite in one transaction, then empty the log (under ``_io``); after a
        failure, only ``force`` (``flush``) tries again before the pause is over."""
        if not self._logged or (not force and time.monotonic() < self._merge_retry_at):
            return
        exc = self._store(self._logged)
        if exc is not None:
            self._merge_retry_at = time.monotonic() + 2.0
            self._failed(exc, pause=False)  # the replies stay in the log and in memory, answered, for the next merge
            return
        with self._lock:
            self._logged = {}  # all of it was stored (nothing else adds to it meanwhile: under ``_io``)
        self._log.emptied()
        self._merge_retry_at = 0.0

    def _failed(self, exc: BaseException, *, pause: bool = True) -> None:
        """An append (``pause``: the next waits 2 s, or ``flush``) or a merge failed; warn once per cache."""
        with self._lock:
            if pause:
                self._retry_at = time.monotonic() + 2.0
            warn, self._warned = not self._warned, True
        if warn:
            warnings.warn(f"cannot write the response cache {self.path}: {exc}; replies are kept in memory "
                          f"and committed when it can be written (this warning is shown once)",
                          CacheWriteWarning, stacklevel=3)

    def _build_filter(self) -> None:
        """Load the stored keys' hashes (the writer thread): later misses need no query."""
        try:
            with self._io:
                if self._wdb is None:
                    self._wdb = connect(self.path)
                made = KeyFilter.load(self._wdb)
        except sqlite3.Error:
            return  # misses keep asking sqlite
        with self._lock:
            self._filter = made

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the connections (queued replies are written and merged first)."""
        self.flush()
        atexit.unregister(self.flush)
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        with self._io:
            self._log.close()
            if self._wdb is not None:
                self._wdb.close()
        self._db.close()
