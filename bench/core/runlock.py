"""One writer per run folder: a sweep (or a stage run from a notebook) ``flock``s ``runs/<sweep>/.lock``; the
driver's kernels get ``lock_held`` so they do not wait."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.records import utc_now
from bench.core.store import RunStore

_HELD: set[str] = set()  # the run folders whose lock this process holds (:func:`held_here`)


class RunLocked(BenchError):
    """Another process is writing this run folder."""


@contextlib.contextmanager
def run_lock(run_dir: Path, *, wait: bool = False, held: bool = False) -> Iterator[None]:
    """Hold the run folder's lock for the block (nothing taken if ``held``); raise RunLocked naming the holder."""
    run_dir = Path(run_dir).resolve()
    if held or str(run_dir) in _HELD:
        yield
        return
    RunStore(run_dir).ensure_writable()  # a folder that cannot be written is named as such, not as a lock problem
    fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, run_dir, wait)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": utc_now(),
                                  "command": " ".join(sys.argv[:3])}).encode(), 0)
        _HELD.add(str(run_dir))
        try:
            yield
        finally:
            _HELD.discard(str(run_dir))
    finally:
        os.close(fd)  # closing releases the flock


def held_here(run_dir: Path) -> bool:
    """Return whether this process holds the run folder's lock (:func:`run_lock`)."""
    return str(Path(run_dir).resolve()) in _HELD


def _acquire(fd: int, run_dir: Path, wait: bool) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    who = holder(run_dir)
    if not wait:
        raise RunLocked(f"run folder {run_dir} is being written by another sweep ({who}); wait for it to finish, "
                        f"pass --wait to queue behind it, or choose another --run-dir")
    print(f"waiting for run folder {run_dir}: held by {who} …", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    fcntl.flock(fd, fcntl.LOCK_EX)
    print(f"run folder {run_dir} is free after {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)


def holder(run_dir: Path) -> str:
    """Return who holds (or last held) the lock: host, PID, since when."""
    try:
        info = json.loads((Path(run_dir) / ".lock").read_text() or "{}")
        return f"host {info['host']}, PID {info['pid']}, since {info['since']}"
    except (OSError, ValueError, KeyError):
        return "a process that has not written its name yet"


PROC_LOCKS = Path("/proc/locks")  # every flock on this machine: who holds the lock, read without taking it


def lock_holder(run_dir: Path) -> dict[str, Any]:
    """Return what is known of the run folder's lock without taking it: ``holder``, ``held``, ``pid`` and ``how``.
    Read from /proc/locks (a killed driver's ``flock`` is gone); ``held`` is None when it cannot be told here."""
    path = Path(run_dir) / ".lock"
    try:
        st = path.stat()
    except OSError:
        return {"holder": None, "held": False, "pid": None, "how": "no lock file"}
    try:  # a holder still writing its line: who it is is unknown, whether it holds the lock is not
        holder = json.loads(path.read_text() or "null")
    except (OSError, ValueError):
        holder = None
    holder = holder if isinstance(holder, dict) else None
    if holder and holder.get("host") not in (None, socket.gethostname()):
        return {"holder": holder, "held": None, "pid": None,
                "how": f"last taken on host {holder.get('host')}: a lock held by another host cannot be probed here"}
    me = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = PROC_LOCKS.read_text().splitlines()
    except OSError:
        return {"holder": holder, "held": None, "pid": None, "how": f"{PROC_LOCKS} cannot be read"}
    for parts in (line.split() for line in lines):
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == me:  # "->" lines (waiters) shift the fields
            return {"holder": holder, "held": True, "pid": int(parts[4]), "how": str(PROC_LOCKS)}
    return {"holder": holder, "held": False, "pid": None, "how": str(PROC_LOCKS)}


def is_held(run_dir: Path) -> bool | None:
    """Return whether a live process holds the run folder's lock; None when this machine cannot tell."""
    return lock_holder(run_dir)["held"]
