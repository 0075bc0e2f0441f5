"""The response cache's sqlite table: opened and checked, connected in WAL mode, and written in groups.

``bench.models.cache.ResponseCache`` keeps replies here once its per-process log is merged: one transaction
per group, in key order, many rows per INSERT, the first reply of a key winning as in the table.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
INSERT = "INSERT OR IGNORE INTO responses (key, value, created) VALUES (?, ?, ?)"
_ROWS = 300  # rows per INSERT of a group commit (3 variables a row: under the 999 of SQLite before 3.32)


def open_checked(path: Path) -> sqlite3.Connection:
    """Open the cache, checking it first (sqlite's quick_check): a damaged file is moved aside with a
    warning naming both files, and a fresh cache is started; the damaged one is kept for inspection."""
    db: sqlite3.Connection | None = None
    try:
        db = connect(path)
        db.execute(SCHEMA)
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
    db = connect(path)
    db.execute(SCHEMA)
    return db


@functools.lru_cache(maxsize=64)
def _insert(rows: int) -> str:
    """Return the INSERT of ``rows`` replies in one statement (the first reply of a key wins, as in the table)."""
    return INSERT + ", (?, ?, ?)" * (rows - 1)


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a committed entry survives a killed process
    return db


def parameters(keys: list[str], held: dict[str, str], created: float) -> list[Any]:
    """Return the INSERT parameters of these replies: key, value, created, one reply after another (no tuple per
    reply: each would be one more object for the garbage collector to count)."""
    flat: list[Any] = []
    add = flat.append
    for k in keys:
        add(k)
        add(held[k])
        add(created)
    return flat


def insert_read(db: sqlite3.Connection, rows: list[tuple[str, str, float]]) -> None:
    """Insert (key, value, created) rows read from a log (``merge_orphans``)."""
    insert_rows(db, [field for row in rows for field in row])


def insert_rows(db: sqlite3.Connection, flat: list[Any],
                 span: Callable[[int, int, bool], None] | None = None) -> None:
    """Insert replies, given as key, value, created, one after another, in one transaction; the first reply of a
    key wins. ``span`` is told the largest rowid before and after the inserts (the rows between are these: the
    transaction holds the only write lock) just before the commit (``True``), and again (``False``) if the commit
    fails."""
    db.execute("BEGIN IMMEDIATE")
    told = None
    try:
        before = _top_rowid(db) if span is not None else 0
        step = 3 * _ROWS
        for i in range(0, len(flat), step):
            chunk = flat[i:i + step]
            db.execute(_insert(len(chunk) // 3), chunk)
        if span is not None:
            told = before, _top_rowid(db)
            span(*told, True)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if told is not None:
            span(*told, False)  # type: ignore[misc]
        raise


def _top_rowid(db: sqlite3.Connection) -> int:
    """Return the largest rowid of the table (0 when it is empty)."""
    return db.execute("SELECT MAX(rowid) FROM responses").fetchone()[0] or 0
