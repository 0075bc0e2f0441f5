"""The run store: append-only JSONL files under ``runs/<sweep>/``, one file per record kind.

Crash safety: each ``append`` call writes its whole batch with one ``write`` and then
``fsync``s, so a killed process loses at most the batch it was writing. A torn last line
(a kill mid-write) is skipped with a warning by readers and cut off before the next
append. Concurrent writers (parallel sweep executions) each get their own shard file
(``candidates.<shard>.jsonl``); readers merge every shard.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from .errors import StoreError
from .records import RECORD_TYPES, Record

FLUSH_EVERY_S = 0.5  # a kill loses at most this much work…
FLUSH_EVERY_N = 256  # …or this many records

_KINDS = {"scenario": "scenarios", "candidate": "candidates", "judgment": "judgments", "review": "reviews"}


def atomic_write(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` all at once (temp file, fsync, rename): readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class TornRecordWarning(UserWarning):
    """A line of a run file could not be read (a write cut short by a kill); it was skipped."""


def _kind_of(kind: str | type[Record]) -> str:
    name = kind if isinstance(kind, str) else kind.kind
    if name not in _KINDS:
        raise StoreError(f"unknown record kind {name!r}; expected one of {sorted(_KINDS)}")
    return name


class RunStore:
    """Reads and appends the records of one run folder (``runs/<sweep>``)."""

    def __init__(self, root: str | os.PathLike[str], shard: str | None = None):
        self.root = Path(root)
        self.shard = shard
        self._checked_tails: set[Path] = set()

    def path(self, kind: str | type[Record]) -> Path:
        """Return the file this store appends ``kind`` records to (its own shard, if any)."""
        stem = _KINDS[_kind_of(kind)]
        return self.root / (f"{stem}.{self.shard}.jsonl" if self.shard else f"{stem}.jsonl")

    def files(self, kind: str | type[Record]) -> list[Path]:
        """Return every file holding ``kind`` records: the main file and all shards, sorted."""
        stem = _KINDS[_kind_of(kind)]
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_file()
                      and (p.name == f"{stem}.jsonl" or (p.name.startswith(f"{stem}.") and p.suffix == ".jsonl")))

    def ensure_writable(self) -> None:
        """Create the run folder if needed; raise StoreError naming it if it cannot be written."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StoreError(f"run folder {self.root} is not writable ({exc.strerror or exc}); "
                             f"fix its permissions or choose another run folder") from exc

    def append(self, records: Iterable[Record]) -> int:
        """Append a batch of records durably (one write and one fsync per file); return how many."""
        by_path: dict[Path, list[bytes]] = {}
        for rec in records:
            by_path.setdefault(self.path(rec.kind), []).append(rec.model_dump_json().encode() + b"\n")
        if not by_path:
            return 0
        self.ensure_writable()
        for path, lines in by_path.items():
            self._repair_tail(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, b"".join(lines))
                os.fsync(fd)
            finally:
                os.close(fd)
        return sum(len(v) for v in by_path.values())

    def _repair_tail(self, path: Path) -> None:
        """Cut a torn last line (no trailing newline) so the next append starts on a fresh line."""
        if path in self._checked_tails:
            return
        self._checked_tails.add(path)
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return
            keep = data.rfind(b"\n") + 1
            warnings.warn(f"{path}: cut a torn last line ({len(data) - keep} bytes) left by an "
                          f"interrupted write; that record will be redone", TornRecordWarning, stacklevel=3)
            fh.truncate(keep)
            os.fsync(fh.fileno())

    def iter(self, kind: str | type[Record]) -> Iterator[Record]:
        """Yield every readable record of ``kind`` in file order, skipping torn lines with a warning."""
        cls = RECORD_TYPES[_kind_of(kind)]
        for path in self.files(kind):
            data = path.read_bytes()
            lines = data.split(b"\n")
            for lineno, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                last = lineno == len(lines)
                try:
                    yield cls.model_validate_json(line)
                except ValidationError as exc:
                    where = "torn last line" if last else "unreadable line"
                    warnings.warn(f"{path}:{lineno}: skipped a {where} ({exc.errors()[0]['msg']})",
                                  TornRecordWarning, stacklevel=2)

    def read(self, kind: str | type[Record]) -> list[Record]:
        """Return every readable record of ``kind`` (all attempts, failures included)."""
        return list(self.iter(kind))

    def latest(self, kind: str | type[Record]) -> dict[str, Record]:
        """Return one record per id: the last success if there is one, else the last failure."""
        out: dict[str, Record] = {}
        for rec in self.iter(kind):
            prev = out.get(rec.id)
            if prev is None or rec.ok or not prev.ok:
                out[rec.id] = rec
        return out

    def done_ids(self, kind: str | type[Record]) -> set[str]:
        """Return the ids with at least one successful record: the work resume skips."""
        return {rec.id for rec in self.iter(kind) if rec.ok}

    def failed(self, kind: str | type[Record]) -> dict[str, Record]:
        """Return the latest failure of each id that never succeeded: the work resume redoes."""
        return {i: r for i, r in self.latest(kind).items() if not r.ok}


class BatchWriter:
    """Buffers records and appends them in batches from a background task (every FLUSH_EVERY_S or N records).

    ``run()`` is the background task; ``stop()`` ends it; ``flush()`` writes what is left
    (call it in a ``finally``: nothing already produced is lost on Ctrl-C or a bug).
    """

    def __init__(self, store: RunStore):
        self.store = store
        self.buffer: list[Record] = []
        self.stopped = asyncio.Event()
        self.wake = asyncio.Event()

    def add(self, rec: Record) -> None:
        self.buffer.append(rec)
        if len(self.buffer) >= FLUSH_EVERY_N:
            self.wake.set()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()

    def flush(self) -> None:
        batch, self.buffer = self.buffer, []
        if batch:
            self.store.append(batch)

    async def run(self) -> None:
        while not self.stopped.is_set():
            try:
                await asyncio.wait_for(self.wake.wait(), FLUSH_EVERY_S)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
            batch, self.buffer = self.buffer, []
            if batch:
                await asyncio.to_thread(self.store.append, batch)
