"""The run store: append-only JSONL files under ``runs/<sweep>/``, one file per record kind.

Crash safety: each ``append`` call writes its whole batch (looping over short writes) and
then ``fsync``s, so a killed process loses at most the batch it was writing. A torn last
line (a kill mid-write) is skipped with a warning by readers and cut off before the next
append. A write that fails (disk full, file size limit, quota) raises StoreWriteError and
cuts the file back; ``BatchWriter`` then keeps what it could not write, its stage stops
issuing calls, and the records are saved to a rescue file (``bench.core.rescue``) that the
next run reads. Concurrent writers (parallel sweep executions) each get their own shard file
(``candidates.<shard>.jsonl``); readers merge every shard.
"""

from __future__ import annotations

import asyncio
import errno
import os
import tempfile
import threading
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from bench.core.errors import StoreError
from bench.core.records import RECORD_TYPES, Record
from bench.core.secrets import redact  # every record line is redacted as it is written: no key ever reaches a run folder

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


_WARNED: set[tuple[Path, int, int]] = set()  # unreadable lines already reported by this process


class TornRecordWarning(UserWarning):
    """A line of a run file could not be read (a write cut short by a kill); it was skipped."""


def write_all(fd: int, data: bytes) -> tuple[int, OSError | None]:
    """Write all of ``data`` to ``fd``, looping over short writes; return (bytes written, the error or None).

    ``os.write`` may write less than asked (a file size limit, a nearly full disk): the next
    write then reports the error (EFBIG, ENOSPC, EDQUOT, …), which is returned, never ignored.
    """
    view, done = memoryview(data), 0
    while done < len(view):
        try:
            n = os.write(fd, view[done:])
        except OSError as exc:
            return done, exc
        if n <= 0:
            return done, OSError(errno.EIO, "write wrote nothing")
        done += n
    return done, None


def os_reason(exc: OSError) -> str:
    """Return an OS error as ``no space left on device (ENOSPC)``."""
    name = errno.errorcode.get(exc.errno or 0)
    text = (exc.strerror or str(exc)).lower()
    return f"{text} ({name})" if name else text


class StoreWriteError(StoreError):
    """An append could not be written (disk full, file size limit, quota, I/O error).

    ``unwritten`` holds the records that are not in the file (the file was cut back, so no
    torn line remains); ``path`` the file and ``os_error`` the error of the failed write.
    """

    def __init__(self, root: Path, path: Path, exc: OSError, unwritten: list[Record]):
        self.root, self.path, self.os_error, self.unwritten = root, path, exc, unwritten
        self.errno = exc.errno
        super().__init__(f"run folder {root}: {os_reason(exc)} writing {path.name}")


def _kind_of(kind: str | type[Record]) -> str:
    name = kind if isinstance(kind, str) else kind.kind
    if name not in _KINDS:
        raise StoreError(f"unknown record kind {name!r}; expected one of {sorted(_KINDS)}")
    return name


def latest_of(records: Iterable[Record]) -> dict[str, Record]:
    """Return one record per id: the last success if there is one, else the last failure."""
    out: dict[str, Record] = {}
    for rec in records:
        prev = out.get(rec.id)
        if prev is None or rec.ok or not prev.ok:
            out[rec.id] = rec
    return out


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
            # per thread: two writers of one process (collect and a pipelined judge) append at once
            probe = self.root / f".write-probe-{os.getpid()}-{threading.get_ident()}"
            probe.write_bytes(b"")
            probe.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"run folder {self.root} is not writable ({exc.strerror or exc}); "
                             f"fix its permissions or choose another run folder") from exc

    def append(self, records: Iterable[Record]) -> int:
        """Append a batch of records durably (whole writes, one fsync per file); return how many.

        A write that cannot complete (disk full, file size limit, quota, I/O error) raises
        StoreWriteError naming the file and the OS error, with the records it did not write;
        the file is cut back to where it was, so no torn line is left for a later append.
        """
        by_path: dict[Path, list[tuple[Record, bytes]]] = {}
        for rec in records:
            by_path.setdefault(self.path(rec.kind), []).append(
                (rec, redact(rec.model_dump_json()).encode() + b"\n"))
        if not by_path:
            return 0
        self.ensure_writable()
        paths = list(by_path)
        for n, path in enumerate(paths):
            data = b"".join(line for _rec, line in by_path[path])
            failure = self._append_file(path, data)
            if failure is not None:
                kept, exc = failure
                unwritten = [rec for rec, _line in by_path[path]][data[:kept].count(b"\n"):]
                unwritten += [rec for later in paths[n + 1:] for rec, _line in by_path[later]]
                raise StoreWriteError(self.root, path, exc, unwritten) from exc
        return sum(len(v) for v in by_path.values())

    def _append_file(self, path: Path, data: bytes) -> tuple[int, OSError] | None:
        """Append ``data`` to ``path`` and fsync; on failure cut the file back and return (bytes kept, error)."""
        try:
            self._repair_tail(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            return 0, exc
        try:
            start = os.fstat(fd).st_size
            done, exc = write_all(fd, data)
            if exc is None:
                try:
                    os.fsync(fd)
                    return None
                except OSError as err:  # not durable: treated as not written at all
                    exc = err
            try:
                os.ftruncate(fd, start)  # no partial record stays behind
                return 0, exc
            except OSError:  # cannot cut: keep the whole lines written; the next append cuts the torn one
                self._checked_tails.discard(path)
                return data.rfind(b"\n", 0, done) + 1, exc
        finally:
            os.close(fd)

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
                    if (path, lineno, len(line)) in _WARNED:
                        continue  # a run reads its files several times: say it once
                    _WARNED.add((path, lineno, len(line)))
                    where = "torn last line" if last else "unreadable line"
                    warnings.warn(f"{path}:{lineno}: skipped a {where} ({exc.errors()[0]['msg']})",
                                  TornRecordWarning, stacklevel=2)

    def read(self, kind: str | type[Record]) -> list[Record]:
        """Return every readable record of ``kind`` (all attempts, failures included)."""
        return list(self.iter(kind))

    def latest(self, kind: str | type[Record]) -> dict[str, Record]:
        """Return one record per id: the last success if there is one, else the last failure."""
        return latest_of(self.iter(kind))

    def done_ids(self, kind: str | type[Record]) -> set[str]:
        """Return the ids with at least one successful record: the work resume skips."""
        return {rec.id for rec in self.iter(kind) if rec.ok}

    def attempts(self, kind: str | type[Record]) -> dict[str, int]:
        """Return, per id that never succeeded, how many times it was tried (its latest ``attempt``)."""
        out: dict[str, int] = {}
        done: set[str] = set()
        for rec in self.iter(kind):
            if rec.ok:
                done.add(rec.id)
            else:
                out[rec.id] = max(out.get(rec.id, 0) + 1, getattr(rec, "attempt", 1) or 1)  # schema 1: count
        return {i: n for i, n in out.items() if i not in done}

    def failed(self, kind: str | type[Record]) -> dict[str, Record]:
        """Return the latest failure of each id that never succeeded: the work resume redoes."""
        return {i: r for i, r in self.latest(kind).items() if not r.ok}


class Halt:
    """The first write failure of a stage, shared by its writers and checked by its workers.

    Falsy until a ``BatchWriter`` fails to append; then every worker that checks it starts
    no new call (calls in flight finish: they are paid, and their records are kept). Each
    writer's rescue is noted here, and ``check()`` ends the stage with one message naming
    the error once, how many records were saved and where.
    """

    def __init__(self) -> None:
        self.error: StoreError | None = None
        self.saved: list[tuple[int, Path]] = []  # (records, rescue file) of every rescue
        self.lost = 0  # records no rescue location could take
        self.lost_reason = ""
        self.root: Path | None = None  # the run folder (set by the first writer)

    def __bool__(self) -> bool:
        return self.error is not None

    def set(self, error: StoreError) -> None:
        if self.error is None:
            self.error = error

    def note(self, saved: list[tuple[int, Path]], lost: int = 0, reason: str = "") -> None:
        self.saved += saved
        self.lost += lost
        self.lost_reason = self.lost_reason or reason

    def message(self) -> str:
        """Return the stage's one message: the error, that calls stopped, what was saved where, what to do."""
        err = self.error
        parts = [str(err), "stopped issuing calls"]
        n = sum(k for k, _p in self.saved)
        root = getattr(err, "root", None) or self.root
        if n:
            inside = [p for _k, p in self.saved if root is not None and p.parent == Path(root)]
            outside = sorted({str(p.parent) for _k, p in self.saved if p not in inside})
            where = ", ".join([*(p.name for p in inside), *(f"{o}/ (moved into the run folder by the next run)"
                                                              for o in outside)])
            parts.append(f"{n} paid replies saved to {where}")
        if self.lost:
            parts.append(f"{self.lost} records could not be saved anywhere ({self.lost_reason}); a reply the "
                         f"response cache kept is not paid again")
        hint = {errno.ENOSPC: "free space", errno.EDQUOT: "free space or raise the quota",
                errno.EFBIG: "raise the file size limit (ulimit -f)", errno.EROFS: "make the run folder writable",
                errno.EACCES: "make the run folder writable"}.get(getattr(err, "errno", None), "fix this")
        after = ("they are kept, not asked again" if not self.lost else
                 "the saved ones are kept, not asked again" if n else "what was written is not asked again")
        parts.append(f"{hint} and re-run: {after}")
        return "; ".join(parts)

    def check(self) -> None:
        """Raise StoreError with ``message()`` if a write of the stage failed."""
        if self.error is not None:
            raise StoreError(self.message()) from None


class BatchWriter:
    """Buffers records and appends them in batches from a background task (every FLUSH_EVERY_S or N records).

    ``run()`` is the background task; ``stop()`` ends it; ``flush()`` writes what is left
    (call it in a ``finally``: nothing already produced is lost on Ctrl-C or a bug).

    A failed append never drops a batch: its records go to ``unwritten``, the error to
    ``error`` and to the shared ``halt`` (workers check ``writer.halt`` before each new call),
    and the writer stops appending. ``flush()`` then saves everything unwritten to a rescue
    file (``bench.core.rescue.save``: the run folder if it can, else a rescue folder outside it)
    and notes it on ``halt``; the stage ends with ``halt.check()``.
    """

    def __init__(self, store: RunStore, halt: Halt | None = None):
        self.store = store
        self.halt = halt if halt is not None else Halt()
        self.halt.root = self.halt.root or store.root
        self.error: StoreError | None = None
        self.unwritten: list[Record] = []
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
        """Write what is buffered; after a failure, save every unwritten record to a rescue file (never raises)."""
        batch, self.buffer = self.buffer, []
        if batch:
            self._write(batch)
        if self.unwritten:
            from bench.core.rescue import save  # noqa: PLC0415

            records, self.unwritten = self.unwritten, []
            saved, left, reason = save(self.store.root, records)
            self.halt.note(saved, len(left), reason)

    def _write(self, batch: list[Record]) -> None:
        """Append one batch; on failure keep what was not written (runs on a worker thread)."""
        if self.error is None:
            try:
                self.store.append(batch)
                return
            except StoreWriteError as exc:
                self.error, batch = exc, exc.unwritten
            except (StoreError, OSError) as exc:  # e.g. the run folder is no longer writable: nothing written
                cause = exc if isinstance(exc, OSError) else exc.__cause__
                self.error = (StoreWriteError(self.store.root, self.store.path(batch[0].kind), cause, batch)
                              if isinstance(cause, OSError) else exc)
            self.halt.set(self.error)
        self.unwritten.extend(batch)

    async def run(self) -> None:
        while not self.stopped.is_set():
            try:
                await asyncio.wait_for(self.wake.wait(), FLUSH_EVERY_S)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
            batch, self.buffer = self.buffer, []
            if batch:
                await asyncio.to_thread(self._write, batch)
