"""Provenance of a sweep: ``runs/<sweep>/executions.jsonl``, one line per papermill execution attempt.

Each line says which stage ran over which cells, on which worker (a local sweep's worker is its
driver process, ``local:<pid>``), on which host, when it started and ended, how it ended (``ok``,
``failed``, ``interrupted``, or ``lost`` when a cluster worker died under it: ``ended`` is then when
the sweep noticed) and which attempt it was (attempts count every run of that execution in the folder). Lines are appended whole (one ``write`` on a
file opened with O_APPEND), so executions running side by side never interleave them.
"""

from __future__ import annotations

import json
import os
import socket
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.core.store import os_reason, write_all

FILE = "executions.jsonl"
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

    @property
    def cell(self) -> str | None:
        """The cell, when the execution covered exactly one."""
        return self.cells[0] if len(self.cells) == 1 else None


def record_attempt(run_dir: str | Path, attempt: ExecutionAttempt) -> None:
    """Append one attempt's line to ``executions.jsonl`` (a failed write is reported, never fatal to the sweep)."""
    if attempt.status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, not {attempt.status!r}")
    line = (json.dumps({**asdict(attempt), "cell": attempt.cell}, sort_keys=True) + "\n").encode()
    path = Path(run_dir) / FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _done, err = write_all(fd, line)
        finally:
            os.close(fd)
        if err is not None:
            raise err
    except OSError as exc:  # provenance is never worth a crashed sweep: say so and go on
        warnings.warn(f"{path}: could not record execution {attempt.name} ({os_reason(exc)})", RuntimeWarning,
                      stacklevel=2)


def read_attempts(run_dir: str | Path) -> list[dict]:
    """Return every recorded attempt (a torn last line, left by a kill mid-write, is skipped)."""
    path = Path(run_dir) / FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def workers(run_dir: str | Path) -> list[str]:
    """Return the distinct workers the run's executions ran on, in the order they first appear."""
    return list(dict.fromkeys(a["worker"] for a in read_attempts(run_dir) if a.get("worker")))
