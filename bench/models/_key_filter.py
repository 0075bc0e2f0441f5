"""Which keys the sqlite cache may hold, in memory: a miss answered without a query.

Nearly every request of a sweep is a miss (a new item), and asking sqlite for a key it lacks costs
5–11 µs. At its first miss a process loads the hash of every stored key (64 bits) into a set when the
cache holds at most ``LOAD_AT_ONCE`` replies; a larger one is loaded on the writer thread once the process
has asked ``BUILD_AFTER`` misses (about 1 µs a key, never for a cache of more than ``MAX_KEYS``); a key whose hash
is not in it is a miss without a query. A hash that is in it (the key, or a one-in-2^64 collision) is looked up as
before. The hash is Python's own (``hash(key)``, this process's: the filter never leaves it): a request's key was
hashed when the cache's dicts were asked for it, so the filter asks for a number Python already holds, where
parsing the key's first 16 hex digits into an int took a slice and a parse per request.

Other processes add replies meanwhile: before answering "absent", a filter older than
``FRESH_S`` reads the rows added since (by rowid: the table only grows, and sqlite gives a new row a
rowid above all others), so a reply another process committed is found within 50 ms, as a group
commit made it visible before. The rows this process merges are added as it commits them (``stored``),
never read back.
"""

from __future__ import annotations

import sqlite3
import time

BUILD_AFTER = 200  # misses before a process builds the filter of a large cache: a short-lived one never pays for it
LOAD_AT_ONCE = 20_000  # a cache this small gets its filter at the first miss, on the asking thread (≤ 20 ms)
MAX_KEYS = 1_000_000  # above this many stored replies, misses query sqlite (the filter would take ~60 MB)
FRESH_S = 0.05  # a filter older than this reads the rows added since before it says "absent"


class KeyFilter:
    """The hashes of the keys stored in one sqlite cache, kept fresh by rowid."""

    def __init__(self) -> None:
        self.known: set[int] = set()
        self.high = 0  # the largest rowid read
        self.read_at = 0.0  # when rows were last read (monotonic)

    @classmethod
    def load(cls, db: sqlite3.Connection, limit: int = MAX_KEYS) -> KeyFilter | None:
        """Return the filter of every stored key, or None for a cache of more than ``limit`` replies."""
        top = db.execute("SELECT MAX(rowid) FROM responses").fetchone()[0] or 0
        if top > limit:
            return None
        made = cls()
        made.read(db)
        return made

    def read(self, db: sqlite3.Connection) -> None:
        """Add the keys stored since the last read."""
        self.read_at = time.monotonic()
        rows = db.execute("SELECT rowid, key FROM responses WHERE rowid > ? ORDER BY rowid", (self.high,)).fetchall()
        if rows:
            self.known.update(hash(k) for _, k in rows)
            self.high = rows[-1][0]

    def stored(self, hashes: list[int], before: int, after: int, kept: bool = True) -> None:
        """Add the key hashes of rows this process is storing, which take the rowids after ``before`` up to ``after``
        (told just before their commit): when the filter had read every row up to ``before``, it need not read
        these back. ``kept=False``: the commit failed, and rowids past ``before`` may go to other rows."""
        self.known.update(hashes)  # a hash too many only costs a query
        if kept and self.high == before:
            self.high = after
        elif not kept and self.high == after:
            self.high = before

    def absent(self, key: str, db: sqlite3.Connection) -> bool:
        """Return whether ``key`` is surely not stored (reading newer rows first when the filter is stale)."""
        p = hash(key)
        if p in self.known:
            return False
        if time.monotonic() - self.read_at > FRESH_S:
            self.read(db)
            return p not in self.known
        return True
