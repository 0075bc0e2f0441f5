"""The request journal: which requests were in flight when a run stopped, so a resume can count them.

Each process journals each sent request's cache key and reservation; at a stage's start ``settle`` reads
dead processes' journals into ``repeats.json`` (``lost``: not cached; ``unclaimed``: cached)."""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
import secrets
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.core.records import utc_now
from bench.core.store import atomic_write

GLOB = "requests-*.journal"
REPEATS_FILE = "repeats.json"
_armed: contextvars.ContextVar[str | None] = contextvars.ContextVar("bench_journal_key", default=None)


class Journal:
    """One process's request journal in a run folder (created on the first request sent)."""

    def __init__(self, run_dir: str | os.PathLike[str]):
        self.dir = Path(run_dir)
        self.path: Path | None = None
        self._fd: int | None = None
        self.error: OSError | None = None  # could not be created or written: it stops, silently (see _give_up)
        self.lines = 0

    def arm(self, key: str) -> None:
        """Name the request the current task is about to send (no I/O)."""
        _armed.set(key)

    def pending(self) -> bool:
        """Return whether the current task armed a request not journaled yet (its reservation is then needed)."""
        return _armed.get() is not None and self.error is None

    def sent(self, usd: float | None = None) -> None:
        """Journal the current task's armed request once, with its reservation (the most it can cost; None: unknown)."""
        key = _armed.get()
        if key is None or self.error is not None:
            return
        _armed.set(None)
        fd = self._fd if self._fd is not None else self._open()
        if fd is None:
            return
        try:
            os.write(fd, f"{key} {'?' if usd is None else repr(float(usd))}\n".encode())  # O_APPEND: whole
            self.lines += 1
        except OSError as exc:  # disk full: the run is stopping anyway; the journal must not add to it
            self._give_up(exc)

    def _open(self) -> int | None:
        """Create the journal under a temporary name, lock it, then publish it (never visible unlocked)."""
        name = f"requests-{os.getpid()}-{secrets.token_hex(4)}.journal"
        tmp = self.dir / f".{name}.tmp"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            self._give_up(exc)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(tmp, self.dir / name)
        except OSError as exc:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            self._give_up(exc)
            return None
        self._fd, self.path = fd, self.dir / name
        return fd

    def _give_up(self, exc: OSError) -> None:
        """Stop journaling, silently: the stage's own failed writes say what went wrong."""
        self.error = exc

    def close(self, keep: bool = False) -> None:
        """End the journal: removed at a clean end (nothing in flight), kept when ``keep`` (an interrupted stage)."""
        if self._fd is None:
            return
        if not keep and self.path is not None:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)  # releases the lock: a kept journal is now a leftover
        self._fd, self.path = None, None


@contextlib.contextmanager
def _leftovers(run_dir: Path, shared: bool = False) -> Iterator[list[tuple[Path, dict[str, float | None]]]]:
    """Yield (path, {key: reservation}) of every journal in ``run_dir`` whose process is gone, locked (``shared``)."""
    held: list[tuple[int, Path, dict[str, float | None]]] = []
    try:
        for path in sorted(run_dir.glob(GLOB)) if run_dir.is_dir() else []:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                if os.fstat(fd).st_ino != os.stat(path).st_ino:
                    raise FileNotFoundError(path)  # settled and removed by another process meanwhile
            except OSError:  # held by a live process (or gone): not a leftover
                os.close(fd)
                continue
            with os.fdopen(os.dup(fd), "rb") as fh:
                keys = dict(_entry(line) for line in fh if line.endswith(b"\n"))
            held.append((fd, path, keys))
        yield [(path, keys) for _fd, path, keys in held]
    finally:
        for fd, _path, _keys in held:
            os.close(fd)


def _entry(line: bytes) -> tuple[str, float | None]:
    """Return a journal line's key and reservation (a line of a journal written before reservations: unknown)."""
    key, _, usd = line.decode("ascii", "replace").strip().partition(" ")
    try:
        return key, float(usd)
    except ValueError:
        return key, None


def _merged(found: list[tuple[Path, dict[str, float | None]]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for _path, keys in found:
        out.update(keys)
    return out


def _split(keys: dict[str, float | None], cache: Any) -> tuple[dict[str, float | None], list[str]]:
    """Return the journaled requests the cache lacks (in flight at the stop) and the keys it holds (paid)."""
    held = cache.held(sorted(keys)) if keys and cache is not None else set()
    return {k: v for k, v in keys.items() if k not in held}, sorted(held)


def in_flight_repeats(run_dir: str | os.PathLike[str], cache: Any) -> int:
    """Return how many requests an earlier run of ``run_dir`` left in flight and ``cache`` lacks; changes nothing."""
    with _leftovers(Path(run_dir)) as found:
        return len(_split(_merged(found), cache)[0])


def settle(run_dir: str | os.PathLike[str], cache: Any) -> int:
    """Add the leftover journals' requests to ``repeats.json`` (``lost`` / ``unclaimed``), remove the journals.
    Call it when a stage starts, before any request; returns this start's count."""
    run_dir = Path(run_dir)
    try:
        with _lock(run_dir), _leftovers(run_dir) as found:
            if not found:
                return 0
            lost, paid = _split(_merged(found), cache)
            data = read_repeats(run_dir)
            data["in_flight_repeats"] = int(data.get("in_flight_repeats", 0)) + len(lost)
            attempts = data.setdefault("lost", {})
            for key, usd in lost.items():
                attempts.setdefault(key, []).append(usd)
            data["unclaimed"] = sorted(set(data.get("unclaimed", [])) | set(paid))
            data.setdefault("events", []).append({"time": utc_now(), "in_flight_repeats": len(lost),
                                                  "journals": len(found), "journaled": sum(len(k) for _p, k in found),
                                                  "cached": len(paid)})
            atomic_write(run_dir / REPEATS_FILE, (json.dumps(data, indent=1) + "\n").encode())
            for path, _keys in found:
                path.unlink(missing_ok=True)
    except OSError as exc:  # a measurement: it never stops a run (the journals stay for a later start)
        warnings.warn(f"cannot count the requests an earlier stop left in flight in {run_dir}: {exc}",
                      RuntimeWarning, stacklevel=2)
        return 0
    return len(lost)


def read_repeats(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Return a run folder's ``repeats.json``: ``in_flight_repeats``, ``lost``, ``unclaimed`` and ``events``."""
    try:
        data = json.loads((Path(run_dir) / REPEATS_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def lost_attempts(run_dir: str | os.PathLike[str], held: Callable[[list[str]], set[str]] | None = None
                  ) -> dict[str, list[float | None]]:
    """Return the requests kills left in flight with their reply lost: {key: [reservation per attempt]}.

    With ``held`` (which of some keys the response cache holds), also those of dead processes' journals no stage
    start has settled yet (right after a kill, before a resume): their keys the cache lacks. Changes nothing."""
    run_dir = Path(run_dir)
    with _shared_lock(run_dir):
        lost = read_repeats(run_dir).get("lost")
        lost = {k: list(v) for k, v in lost.items() if isinstance(v, list)} if isinstance(lost, dict) else {}
        if held is None or not run_dir.is_dir() or not any(run_dir.glob(GLOB)):
            return lost
        with _leftovers(run_dir, shared=True) as found:
            keys = _merged(found)
    cached = held(sorted(keys)) if keys else set()
    for key, usd in keys.items():
        if key not in cached:
            lost.setdefault(key, []).append(usd)
    return lost


@contextlib.contextmanager
def _shared_lock(run_dir: Path) -> Iterator[None]:
    """Hold off ``settle`` (its ``_lock``) while repeats.json and the journals are read together."""
    try:
        fd = os.open(run_dir / ".journal.lock", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # never settled here (or a read-only folder): nothing to hold off
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def unclaimed_keys(run_dir: str | os.PathLike[str]) -> set[str]:
    """Return the keys a stopped process paid and cached, perhaps with no record (a resume counts them as spent)."""
    return set(read_repeats(run_dir).get("unclaimed", []))


def recorded_repeats(run_dir: str | os.PathLike[str]) -> int:
    """Return how many requests resumes of this run folder asked again after a stop (0 if never)."""
    return int(read_repeats(run_dir).get("in_flight_repeats", 0))


@contextlib.contextmanager
def _lock(run_dir: Path) -> Iterator[None]:
    """Serialize ``settle`` between the processes of one run folder (executions starting together)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / ".journal.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
