"""The response cache's write-ahead log: this process's replies, appended at once, merged into sqlite later.

Inserting a reply into the sqlite cache costs 15–22 µs of CPU (its key is a hash: every insert dirties a
random page of the key index, and a group commit writes each such page whole), more than all the rest of
a request's bookkeeping. Appending the reply as one line to a file this process owns costs about 1 µs,
and a killed process keeps what it wrote (the kernel holds it). So replies go to the log within
one writer's group (gathered for 50–250 ms: bench.models.cache), and into sqlite in large groups: when the log holds
``MERGE_ROWS`` replies, at ``flush`` (a stage's end) and at exit. A log left by a process that died is
merged by the next process that opens the cache.

Each process writes ``<cache>.log/<host>-<pid>-<random>.log`` and holds an exclusive ``flock`` on it
while it lives (taken before the file gets that name): a log whose lock can be taken belongs to nobody and
is merged and removed. A line is
``{"k": KEY, "t": UNIX TIME, "v": REPLY}`` (the shard cache's line); a line cut short by a kill is skipped.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.core.store import write_all
from bench.models._json import cache_text, dumps_str, loads

SUFFIX = ".log"
_TEMP = ".new"  # a log being created: locked before it is renamed to SUFFIX, the only name ``orphans`` takes
_HOST = "".join(c if c.isalnum() or c in "_.-" else "_" for c in socket.gethostname() or "host")


def log_dir(cache_path: Path) -> Path:
    """Return the folder of a sqlite cache's logs (``responses.sqlite`` → ``responses.sqlite.log/``)."""
    return cache_path.with_name(cache_path.name + SUFFIX)


def lines(group: dict[str, str], created: float) -> bytes:
    """Return the log lines of a group of replies (key → JSON text, already redacted), written at ``created``."""
    when = f"{created:.3f}"
    return "".join([text_line(k, when, v) for k, v in group.items()]).encode("utf-8", "surrogatepass")


def text_line(key: str, when: str, encoded: str) -> str:
    """Return one log line as text; a request key (hex digits) needs no JSON escaping, any other key gets it."""
    quoted = f'"{key}"' if key.isalnum() and key.isascii() else dumps_str(key)
    return f'{{"k":{quoted},"t":{when},"v":{encoded}}}\n'


class CacheLog:
    """This process's log: appended on the cache's writer thread, emptied after each merge into sqlite."""

    def __init__(self, cache_path: Path):
        self.folder = log_dir(cache_path)
        self._fd: int | None = None
        self._path: Path | None = None
        self._pid = 0
        self.rows = 0  # replies in the log, not yet merged

    def append(self, data: bytes, rows: int) -> OSError | None:
        """Append whole lines; return the error that stopped it (a torn tail is cut back) or None."""
        try:
            fd = self._own()
            start = os.lseek(fd, 0, os.SEEK_END)
        except OSError as exc:
            return exc
        done, exc = write_all(fd, data)
        if exc is not None:
            if done:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    self.close()  # the torn line stays at the end of a file nobody owns: skipped when merged
            return exc
        self.rows += rows
        return None

    def emptied(self) -> None:
        """Forget what the log held: every line is in sqlite now."""
        if self._fd is not None and self._pid == os.getpid():
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass  # merged lines that stay are merged again by whoever finds them: INSERT OR IGNORE
        self.rows = 0

    def _own(self) -> int:
        """Return this process's log descriptor, created and locked on first use (again in a forked child)."""
        if self._fd is not None and self._pid == os.getpid():
            return self._fd
        self._fd = None  # a forked child: the parent's log and lock stay the parent's
        name = f"{_HOST}-{os.getpid()}-{secrets.token_hex(4)}"
        temp, path = self.folder / f"{name}{_TEMP}", self.folder / f"{name}{SUFFIX}"
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, flags, 0o600)
        except FileNotFoundError:  # another process removed the empty folder just now (``close``)
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, flags, 0o600)
        try:  # locked under a name no other process merges, then named a log: never merged from under us
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(temp, path)
        except OSError:
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        self._fd, self._path, self._pid, self.rows = fd, path, os.getpid(), 0
        return fd

    def close(self) -> None:
        """Close (and remove, when empty) this process's log; its lock goes with the descriptor."""
        if self._fd is None or self._pid != os.getpid():
            self._fd = None
            return
        fd, self._fd = self._fd, None
        try:
            if self.rows == 0 and self._path is not None and os.fstat(fd).st_size == 0:
                self._path.unlink(missing_ok=True)  # still locked: no other process merges it meanwhile
                os.rmdir(self.folder)  # only when no other process has a log in it
        except OSError:
            pass
        finally:
            os.close(fd)


def orphans(cache_path: Path) -> Iterator[tuple[Path, int]]:
    """Yield (log, locked descriptor) for every log whose process is gone (its lock can be taken)."""
    folder = log_dir(cache_path)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # merged and removed by another process meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # its process lives: it merges its own
            continue
        yield path, fd


def read_lines(fd: int) -> list[tuple[str, str, float]]:
    """Return the (key, reply JSON, created) of every whole line of a log; torn or damaged lines are skipped."""
    with os.fdopen(os.dup(fd), "rb") as f:
        data = f.read()
    rows = []
    for raw in data.split(b"\n")[:-1]:  # the last piece has no newline: empty, or a write cut short
        try:
            entry = loads(raw)
            rows.append((str(entry["k"]), cache_text(entry["v"]), float(entry["t"])))
        except (ValueError, KeyError, TypeError):
            continue
    return rows


def merge_orphans(cache_path: Path, insert: Callable[[sqlite3.Connection, list], object],
                  db: sqlite3.Connection) -> int:
    """Merge every log of a dead process into ``db`` (first reply wins) and remove it; return the replies.
    A log its process died creating (still named ``.new`` a minute on; it holds no reply) is removed."""
    for young in log_dir(cache_path).glob(f"*{_TEMP}"):
        try:
            if time.time() - young.stat().st_mtime > 60:
                young.unlink()
        except OSError:
            continue
    merged = 0
    for path, fd in orphans(cache_path):
        try:
            rows = read_lines(fd)
            if rows:
                insert(db, rows)
                merged += len(rows)
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return merged

