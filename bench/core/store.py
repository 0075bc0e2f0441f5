"""The run store: append-only JSONL files under ``runs/<sweep>/``, one file per record kind; each ``append``
writes then ``fsync``s, a torn last line is skipped, a failed write raises StoreWriteError."""

from __future__ import annotations

import errno
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.core.errors import StoreError
from bench.core.records import RECORD_TYPES, Record
from bench.core.secrets import redact  # every record line is redacted as it is written: no key ever reaches a run folder


# the error kinds of a failed record that a stop wrote for the spend of work it interrupted (bench.collect.conversation,
# bench.judge.solutions): no try of that work (``RunStore.attempts``)
INTERRUPTED = frozenset({"budget", "stopped"})
_KINDS = {"scenario": "scenarios", "candidate": "candidates", "judgment": "judgments", "review": "reviews"}


def atomic_write(path: Path, data: bytes, *, shared: bool = False) -> Path:
    """Write ``data`` to ``path`` at once (temp file, fsync, rename); private (0600) unless ``shared`` (umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            if shared:
                os.fchmod(fh.fileno(), 0o666 & ~current_umask())
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def current_umask() -> int:
    """Return the process's umask, read without changing it (Linux: /proc/self/status; elsewhere set and restored)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_WARNED: set[tuple[Path, int, int]] = set()  # unreadable lines already reported by this process


class TornRecordWarning(UserWarning):
    """A line of a run file could not be read (a write cut short by a kill); it was skipped."""


def write_all(fd: int, data: bytes) -> tuple[int, OSError | None]:
    """Write all of ``data`` to ``fd`` despite short writes; return (bytes written, the error or None)."""
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


def append_line(path: Path, line: bytes) -> None:
    """Append ``line`` to ``path`` (0644) in one ``O_APPEND`` write, so lines of several processes never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _done, err = write_all(fd, line)
    finally:
        os.close(fd)
    if err is not None:
        raise err


def json_lines(path: Path) -> list[Any]:
    """Return the JSON value of each line of ``path`` ([] when it is no file); a line that is no JSON is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a torn last line (a kill mid-write), a hand-broken one
            continue
    return out


def os_reason(exc: OSError) -> str:
    """Return an OS error as ``no space left on device (ENOSPC)``."""
    name = errno.errorcode.get(exc.errno or 0)
    text = (exc.strerror or str(exc)).lower()
    return f"{text} ({name})" if name else text


class StoreWriteError(StoreError):
    """An append could not be written: ``unwritten`` records, ``path`` and ``os_error`` (the file was cut back)."""

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


def parse_line(cls: type[Record], path: Path, lineno: int, line: bytes, last: bool) -> Record | None:
    """Return the record a run file's line holds, or None (warned once per line) for a torn or broken one."""
    try:
        return cls.model_validate_json(line)
    except ValidationError as exc:
        if (path, lineno, len(line)) not in _WARNED:  # a run reads its files several times: say it once
            _WARNED.add((path, lineno, len(line)))
            where = "torn last line" if last else "unreadable line"
            warnings.warn(f"{path}:{lineno}: skipped a {where} ({exc.errors()[0]['msg']})",
                          TornRecordWarning, stacklevel=4)
        return None


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

    def raw(self, kind: str | type[Record]) -> Iterator[dict]:
        """Yield ``kind``'s records as written, raw dicts (unreadable lines skipped), for checks before any model."""
        for path in self.files(kind):
            yield from (rec for rec in json_lines(path) if isinstance(rec, dict))

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
        """Append records durably (one fsync per file); return how many; StoreWriteError when a write fails."""
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
        for path, lineno, line, last in self.lines(kind):
            rec = parse_line(cls, path, lineno, line, last)
            if rec is not None:
                yield rec

    def lines(self, kind: str | type[Record]) -> Iterator[tuple[Path, int, bytes, bool]]:
        """Yield (file, line number, bytes, is it the last line) of each non-blank ``kind`` line, in file order."""
        for path in self.files(kind):
            lines = path.read_bytes().split(b"\n")
            for lineno, line in enumerate(lines, 1):
                if line.strip():
                    yield path, lineno, line, lineno == len(lines)

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
        """Return, per id that never succeeded, its tries; a stop's record (INTERRUPTED) is no try."""
        out: dict[str, int] = {}
        done: set[str] = set()
        for rec in self.iter(kind):
            if rec.ok:
                done.add(rec.id)
            elif getattr(rec, "error_kind", None) in INTERRUPTED:
                continue
            else:
                out[rec.id] = max(out.get(rec.id, 0) + 1, getattr(rec, "attempt", 1) or 1)  # schema 1: count
        return {i: n for i, n in out.items() if i not in done}

    def failed(self, kind: str | type[Record]) -> dict[str, Record]:
        """Return the latest failure of each id that never succeeded: the work resume redoes."""
        return {i: r for i, r in self.latest(kind).items() if not r.ok}
