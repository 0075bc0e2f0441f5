"""One writer per run folder: a sweep (or a stage run from a notebook) locks ``runs/<sweep>/.lock``.

Two sweeps of the same params at once would pay for every item twice and race on the
MLflow store. The lock is an ``flock`` on the file, so the kernel releases it when its
holder dies, however it dies: a crashed sweep never leaves it stuck. The file holds who
has it (host, PID, since when, the command) for the message the second sweep prints. The
sweep driver exports ``BENCH_RUN_LOCK`` so that its own papermill kernels, which write the
same folder on its behalf, do not wait for it.
"""

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

from bench.core.errors import BenchError
from bench.core.records import utc_now
from bench.core.store import RunStore

ENV = "BENCH_RUN_LOCK"


class RunLocked(BenchError):
    """Another process is writing this run folder."""


@contextlib.contextmanager
def run_lock(run_dir: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold the run folder's lock for the block; raise RunLocked naming the holder, or wait for it."""
    run_dir = Path(run_dir).resolve()
    if os.environ.get(ENV) == str(run_dir):
        yield  # our driver holds it for us
        return
    RunStore(run_dir).ensure_writable()  # a folder that cannot be written is named as such, not as a lock problem
    fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, run_dir, wait)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": utc_now(),
                                  "command": " ".join(sys.argv[:3])}).encode(), 0)
        os.environ[ENV] = str(run_dir)
        try:
            yield
        finally:
            os.environ.pop(ENV, None)
    finally:
        os.close(fd)  # closing releases the flock


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
