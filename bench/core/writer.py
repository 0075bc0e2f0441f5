"""Records written while a stage runs, a few hundred at a time; a failed write halts new paid calls and what was
not written goes to a rescue file."""

from __future__ import annotations

import asyncio
import contextlib
import errno
from pathlib import Path

from bench.core.errors import Halted, StoreError, WritesFailed
from bench.core.records import Record
from bench.core.rescue import save
from bench.core.store import RunStore, StoreWriteError

FLUSH_EVERY_S = 0.5  # a kill loses at most this much work…
FLUSH_EVERY_N = 256  # …or this many records

class Halt:
    """The first write failure (or ``stop`` with a ``Halted``) of a stage: once set, workers start no new call.
    ``check()`` ends the stage with one message naming the error and the rescued records, or raises the Halted."""

    def __init__(self) -> None:
        self.error: StoreError | None = None
        self.halted: Halted | None = None  # the first Halted a worker heard (its items get no record)
        self.saved: list[tuple[int, Path]] = []  # (records, rescue file) of every rescue
        self.lost = 0  # records no rescue location could take
        self.lost_reason = ""
        self.root: Path | None = None  # the run folder (set by the first writer)

    def __bool__(self) -> bool:
        return self.error is not None or self.halted is not None

    def set(self, error: StoreError) -> None:
        if self.error is None:
            self.error = error

    def stop(self, halted: Halted) -> None:
        """Stop the stage from starting new items because of ``halted`` (the first one is kept and raised)."""
        if self.halted is None:
            self.halted = halted

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
        """Raise WritesFailed with ``message()`` if a write of the stage failed, else the Halted that stopped it."""
        if self.error is not None:
            raise WritesFailed(self.message()) from None
        if self.halted is not None:
            raise self.halted.with_traceback(None) from None


class RecordWriter:
    """Buffers records and appends them in chunks from a background task; ``flush()`` rescues what failed."""

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
        chunk, self.buffer = self.buffer, []
        if chunk:
            self._write(chunk)
        if self.unwritten:
            records, self.unwritten = self.unwritten, []
            saved, left, reason = save(self.store.root, records)
            self.halt.note(saved, len(left), reason)

    def _write(self, chunk: list[Record]) -> None:
        """Append one chunk; on failure keep what was not written (runs on a worker thread)."""
        if self.error is None:
            try:
                self.store.append(chunk)
                return
            except StoreWriteError as exc:
                self.error, chunk = exc, exc.unwritten
            except (StoreError, OSError) as exc:  # e.g. the run folder is no longer writable: nothing written
                cause = exc if isinstance(exc, OSError) else exc.__cause__
                self.error = (StoreWriteError(self.store.root, self.store.path(chunk[0].kind), cause, chunk)
                              if isinstance(cause, OSError) else exc)
            self.halt.set(self.error)
        self.unwritten.extend(chunk)

    async def run(self) -> None:
        while not self.stopped.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.wake.wait(), FLUSH_EVERY_S)
            self.wake.clear()
            chunk, self.buffer = self.buffer, []
            if chunk:
                await asyncio.to_thread(self._write, chunk)
