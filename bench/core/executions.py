"""Provenance of a sweep: ``runs/<sweep>/executions.jsonl``, one line per papermill execution attempt: which stage
ran over which cells, where, when and how it ended; open attempts live under ``runs/<sweep>/attempts/``."""

from __future__ import annotations

import json
import os
import socket
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.core.records import utc_now
from bench.core.store import append_line, atomic_write, json_lines, os_reason

FILE = "executions.jsonl"
ATTEMPTS = "attempts"  # <run folder>/attempts/: the open record of each attempt while it runs
STATUSES = ("ok", "failed", "interrupted", "lost")  # lost: its worker died mid-execution (a cluster sweep)


@dataclass(frozen=True)
class ExecutionAttempt:
    """One attempt of one execution: a stage's notebook over some cells, on one worker."""

    stage: str
    name: str  # the execution: collect, judge, collect.job2, collect.<cell>
    cells: list[str]  # the grid cells it covered (empty: the whole grid, or a pair dataset)
    started: str
    ended: str
    status: str  # ok, failed or interrupted
    worker: str = field(default_factory=lambda: f"local:{os.getpid()}")
    hostname: str = field(default_factory=socket.gethostname)
    attempt: int = 1
    reason: str = ""  # why it ended so, when the status alone does not say (e.g. its driver was killed)

    @property
    def cell(self) -> str | None:
        """The cell, when the execution covered exactly one."""
        return self.cells[0] if len(self.cells) == 1 else None


def record_attempt(run_dir: str | Path, attempt: ExecutionAttempt) -> None:
    """Append one attempt's line to ``executions.jsonl`` (a failed write is reported, never fatal to the sweep)."""
    if attempt.status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {attempt.status!r}")
    fields = {k: v for k, v in asdict(attempt).items() if k != "reason" or v}
    line = (json.dumps({**fields, "cell": attempt.cell}, sort_keys=True) + "\n").encode()
    path = Path(run_dir) / FILE
    try:
        append_line(path, line)
    except OSError as exc:  # provenance is never worth a crashed sweep: say so and go on
        warnings.warn(f"{path}: could not record execution {attempt.name} ({os_reason(exc)})", RuntimeWarning,
                      stacklevel=2)


def read_attempts(run_dir: str | Path) -> list[dict]:
    """Return every recorded attempt (a torn last line, left by a kill mid-write, is skipped)."""
    return json_lines(Path(run_dir) / FILE)


def attempt_files(run_dir: str | Path, pattern: str = "*.json") -> list[tuple[Path, Any]]:
    """Return (path, JSON value) of each readable file matching ``pattern`` under ``attempts/``, by path."""
    out = []
    for path in sorted((Path(run_dir) / ATTEMPTS).glob(pattern)):
        try:
            out.append((path, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    return out


def workers(run_dir: str | Path) -> list[str]:
    """Return the distinct workers the run's executions ran on, in the order they first appear."""
    return list(dict.fromkeys(a["worker"] for a in read_attempts(run_dir) if a.get("worker")))


def driver_name() -> str:
    """Return how an open attempt names the driver that will record it: ``pid <n> on <host>``."""
    return f"pid {os.getpid()} on {socket.gethostname()}"


def local_marker(run_dir: str | Path, attempt: ExecutionAttempt, sweep: str) -> Path | None:
    """Write a local execution's open record (``running``); return its path, None when it could not be written."""
    path = Path(run_dir) / ATTEMPTS / f"{attempt.name}.local-{os.getpid()}.json"
    try:
        atomic_write(path, json.dumps({**asdict(attempt), "status": "running", "sweep": sweep,
                                       "driver": driver_name()}).encode())
    except OSError as exc:
        warnings.warn(f"{path}: could not mark execution {attempt.name} as running ({os_reason(exc)})",
                      RuntimeWarning, stacklevel=2)
        return None
    return path


def close_abandoned(run_dir: str | Path, sweep: str) -> int:
    """Record as ``lost`` each attempt another sweep left unrecorded in executions.jsonl (hold the lock); count them."""
    recorded = {_identity(a) for a in read_attempts(run_dir)}
    closed = 0
    for path, a in attempt_files(run_dir):
        if not isinstance(a, dict) or a.get("sweep") == sweep or _identity(a) in recorded:
            continue
        status = a.get("status")
        said = "" if status == "running" else f"; its worker had ended it {status} at {a.get('ended')}"
        reason = (f"its sweep's driver ({a.get('driver') or 'pid unknown'}) stopped before recording it{said}; "
                  f"closed by the next sweep of this folder")
        a.update(status="lost", ended=a.get("ended") or utc_now(), reason=reason)
        keys = ("stage", "name", "cells", "started", "ended", "status", "worker", "hostname", "attempt", "reason")
        record_attempt(run_dir, ExecutionAttempt(**{k: a[k] for k in keys if a.get(k) is not None}))
        try:
            if ".local-" in path.name:
                path.unlink()
            else:
                atomic_write(path, json.dumps(a).encode())
        except OSError:
            pass  # recorded: its line keeps the next sweep from recording it again
        closed += 1
    return closed


def _identity(attempt: dict) -> tuple:
    """Return what tells one attempt from every other of the folder: its execution, number, worker and start."""
    return attempt.get("name"), attempt.get("attempt", 1), attempt.get("worker"), attempt.get("started")
