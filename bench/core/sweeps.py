"""How each sweep of a run folder started and ended: ``runs/<sweep>/sweeps.jsonl`` (``start``, ``plan``,
``end``), read by `bench status`; a ``start`` without ``end`` whose driver is gone is crashed."""

from __future__ import annotations

import json
import os
import secrets
import socket
import warnings
from pathlib import Path
from typing import Any

from bench.core.exit_codes import ExitCode
from bench.core.records import utc_now
from bench.core.store import append_line, json_lines, os_reason

FILE = "sweeps.jsonl"
# what a sweep's exit code says of the run (docs/sweeps.md, How a sweep ends): `bench status`'s state, and why
ENDINGS: dict[int, tuple[str, str]] = {
    ExitCode.OK: ("finished", "every item answered and judged"),
    ExitCode.CRASHED: ("failed", "an execution crashed (see its executed notebook)"),
    ExitCode.BAD_INPUT: ("failed", "refused before or while starting (bad input)"),
    ExitCode.FAILED_ITEMS: ("failed", "ran to its end with items still failed: re-run to retry them"),
    ExitCode.BUDGET: ("interrupted", "limits.budget_usd reached: raise it and re-run to continue"),
    ExitCode.GATE_FAILED: ("failed", "a gate of the params file failed"),
    ExitCode.CANNOT_DECIDE: ("failed", "a gate of the params file cannot decide (too few scenarios, a damaged run)"),
    ExitCode.INTERRUPTED: ("interrupted", "interrupted (Ctrl-C or SIGINT): re-run to resume"),
}


def ending(code: int) -> tuple[str, str]:
    """Return (state, reason) of a sweep that ended with exit code ``code``."""
    return ENDINGS.get(code, ("failed", f"ended with exit code {code}"))


def record_start(run_dir: str | Path, *, command: str, budget_usd: float | None, stages: list[str]) -> str:
    """Append the ``start`` line of a sweep holding the run lock; return the sweep's id (for its other lines)."""
    sweep = secrets.token_hex(6)
    _append(run_dir, {"event": "start", "sweep": sweep, "pid": os.getpid(), "host": socket.gethostname(),
                      "started": utc_now(), "command": command, "budget_usd": budget_usd, "stages": stages})
    return sweep


def record_plan(run_dir: str | Path, sweep: str, *, cells: dict[str, int], judges: dict[str, int],
                rubrics: list[tuple[str, str]]) -> None:
    """Append what sweep ``sweep`` plans: answers per cell key, judgments per judge id, its (judge, rubric) pairs."""
    _append(run_dir, {"event": "plan", "sweep": sweep, "time": utc_now(), "cells": cells, "judges": judges,
                      "rubrics": [list(r) for r in rubrics]})


def record_end(run_dir: str | Path, sweep: str, code: int) -> None:
    """Append the ``end`` line of sweep ``sweep``: its exit code and the state and reason it means."""
    state, reason = ending(code)
    _append(run_dir, {"event": "end", "sweep": sweep, "ended": utc_now(), "exit_code": code, "state": state,
                      "reason": reason})


def read_sweeps(run_dir: str | Path) -> list[dict[str, Any]]:
    """Return the folder's sweeps, oldest first: each start line with its ``plan`` and ``end`` (None if absent)."""
    try:
        lines = json_lines(Path(run_dir) / FILE)
    except OSError:
        return []
    sweeps: dict[str, dict[str, Any]] = {}
    for rec in lines:
        if not isinstance(rec, dict) or not isinstance(rec.get("sweep"), str):
            continue
        if rec.get("event") == "start":
            sweeps[rec["sweep"]] = {**rec, "plan": None, "end": None}
        elif rec.get("event") in ("plan", "end") and rec["sweep"] in sweeps:
            sweeps[rec["sweep"]][rec["event"]] = rec
    return list(sweeps.values())


def _append(run_dir: str | Path, fields: dict[str, Any]) -> None:
    """Append one line whole; a write that fails is said (a warning), never fatal to the sweep."""
    path = Path(run_dir) / FILE
    line = (json.dumps(fields, sort_keys=True) + "\n").encode()
    try:
        append_line(path, line)
    except OSError as exc:
        warnings.warn(f"{path}: could not record the sweep's {fields['event']} ({os_reason(exc)}); `bench status` "
                      f"may misread this run", RuntimeWarning, stacklevel=3)
