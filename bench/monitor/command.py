"""`bench status RUN [--json] [--watch]`: a run's state and progress, from its run folder alone.

It reads only; the one write, for a run found crashed, marks its live MLflow run KILLED (``mark_crashed``)."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

from bench.core.errors import BenchError
from bench.core.paths import resolve, run_dir
from bench.monitor.document import Status, status
from bench.monitor.watch import watch

LIVE = "bench.tracking.live"  # the live MLflow run of a sweep (its mark_crashed ends a crashed one's)


def status_command(run: str, *, as_json: bool = False, watch_it: bool = False, every_s: float | None = None) -> int:
    """Print the status of ``run`` (a run folder or a sweep name) as a table or one JSON document; return 0."""
    folder = run_folder(run)
    if watch_it:
        return watch(folder, as_json=as_json, every_s=every_s, seen=mark_if_crashed)
    st = status(folder)
    mark_if_crashed(st)
    print(json.dumps(st.doc, indent=1, sort_keys=True) if as_json else str(st), flush=True)
    return 0


def run_folder(arg: str) -> Path:
    """Return the run folder ``arg`` names: a path, else a sweep name under ``runs/``; BenchError if neither."""
    path = resolve(arg)
    if path.is_dir():
        return path
    if "/" not in arg and run_dir(arg).is_dir():
        return run_dir(arg)
    raise BenchError(f"{arg}: no such run folder (give runs/<sweep> or a sweep name; `bench sweep` makes one)")


def mark_if_crashed(st: Status) -> bool:
    """Mark a crashed run's live MLflow run KILLED (once: mark_crashed leaves a run no longer RUNNING alone);
    return whether it was marked. Without bench.tracking.live there is nothing to mark."""
    if st.state != "crashed" or importlib.util.find_spec(LIVE) is None:
        return False
    return bool(importlib.import_module(LIVE).mark_crashed(Path(st.doc["run_dir"])))
