"""Whether a run is running, finished, failed, interrupted or crashed, from its run folder alone, taking no lock.

A sweep with no end line is running while its driver lives (process table, ``/proc/locks``), else crashed."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from bench.core.executions import ATTEMPTS, read_attempts
from bench.core.runlock import lock_holder
from bench.core.sweeps import read_sweeps

STATES = ("running", "finished", "failed", "interrupted", "crashed")
CLOCK_SLACK_S = 2.0  # a driver's process may be created this much after the time its start line says (rounding)


@dataclass
class RunState:
    """A run's state, why, the sweep it is about (its start line, plan and end), and what is known of its lock."""

    state: str
    reason: str
    sweep: dict[str, Any] | None = None
    lock: dict[str, Any] = field(default_factory=dict)
    sweeps: int = 0  # how many sweeps the folder has seen

    @property
    def exit_code(self) -> int | None:
        end = (self.sweep or {}).get("end")
        return end.get("exit_code") if end else None


def run_state(run_dir: Path) -> RunState:
    """Return the state of the run in ``run_dir`` (see the module doc); reads only."""
    lock = lock_holder(run_dir)
    sweeps = read_sweeps(run_dir)
    if not sweeps:
        return _without_ledger(run_dir, lock)
    last = sweeps[-1]
    state = _of_sweep(last, lock, run_dir)
    if state.state != "running" and lock.get("held") and lock.get("pid") != last.get("pid"):
        command = (lock.get("holder") or {}).get("command") or "a stage run from a notebook"
        state = RunState("running", f"the run lock is held by pid {lock['pid']} ({command}), after the last sweep "
                                    f"{state.state}", last, lock)
    state.sweeps = len(sweeps)
    return state


def _of_sweep(sweep: dict[str, Any], lock: dict[str, Any], run_dir: Path) -> RunState:
    """Return the state of one sweep: its end line's, else running or crashed as its driver lives or not."""
    if (end := sweep.get("end")) is not None:
        return RunState(end["state"], f"exit {end['exit_code']}: {end['reason']}", sweep, lock)
    driver = f"pid {sweep.get('pid')} on {sweep.get('host')}"
    if sweep.get("host") != socket.gethostname():
        return RunState("running", f"started by {driver} at {sweep.get('started')} with no end recorded; a lock held "
                                   f"by another host cannot be probed from here (flock is local to the machine that "
                                   f"took it), so this is what sweeps.jsonl says, not a check that it lives; "
                                   f"{last_write(run_dir)}", sweep, lock)
    if driver_alive(sweep):
        held = "holds the run lock" if lock.get("held") else "has let the run lock go and is finishing"
        return RunState("running", f"its driver ({driver}) is alive and {held}", sweep, lock)
    stale = "the lock file still names it and nobody holds it (a stale lock)" if lock.get("held") is False else \
        "the lock cannot be probed here" if lock.get("held") is None else f"the lock is held by pid {lock.get('pid')}"
    return RunState("crashed", f"its driver ({driver}) is gone without recording an end (killed, or its machine "
                               f"stopped); {stale}; the next sweep resumes it", sweep, lock)


def last_write(run_dir: Path) -> str:
    """Return how long ago the run folder's files were last written (its records, executions, ledger)."""
    try:
        newest = max(p.stat().st_mtime for p in Path(run_dir).iterdir() if p.is_file())
    except (OSError, ValueError):
        return "when the folder was last written is unknown"
    return f"the folder was last written {max(0.0, time.time() - newest):.0f}s ago (by this machine's clock)"


def driver_alive(sweep: dict[str, Any]) -> bool:
    """Return whether the sweep's driver process lives on this machine (not a zombie, not a pid reused since)."""
    try:
        proc = psutil.Process(int(sweep["pid"]))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        created = proc.create_time()
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False
    try:
        started = datetime.fromisoformat(sweep["started"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return True
    return created <= started + CLOCK_SLACK_S


def _without_ledger(run_dir: Path, lock: dict[str, Any]) -> RunState:
    """Return the state of a folder without sweeps.jsonl: from its lock, open attempts and executions.jsonl."""
    if lock.get("held"):
        holder = lock.get("holder") or {}
        return RunState("running", f"the run lock is held by pid {lock['pid']} ({holder.get('command') or '?'})",
                        None, lock)
    open_local = [p.name for p in (Path(run_dir) / ATTEMPTS).glob("*.local-*.json")]
    if open_local and lock.get("held") is None:
        return RunState("running", f"{len(open_local)} execution(s) are open and the lock cannot be probed here "
                                   f"({lock.get('how')}): this is what the folder says, not a check", None, lock)
    if open_local:
        return RunState("crashed", f"{len(open_local)} execution(s) were left open by a driver that is gone "
                                   f"({', '.join(sorted(open_local))}); the next sweep resumes it", None, lock)
    attempts = read_attempts(run_dir)
    last = {a.get("name"): a.get("status") for a in attempts}
    for status, state in (("lost", "crashed"), ("failed", "failed"), ("interrupted", "interrupted")):
        if status in last.values():
            names = sorted(n for n, s in last.items() if s == status)
            return RunState(state, f"no sweeps.jsonl; executions.jsonl says {', '.join(names)} ended {status}",
                            None, lock)
    how = "executions.jsonl says every execution ended ok" if attempts else "nothing says it is running"
    return RunState("finished", f"no sweeps.jsonl (a folder written before it existed, or by notebooks); {how}",
                    None, lock)
