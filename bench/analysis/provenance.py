"""Where a run's executions ran: one row per worker from ``runs/<sweep>/executions.jsonl`` (bench.core.executions),
over every sweep of the folder; ``lost`` counts attempts whose worker died under them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

from bench.core.executions import read_attempts

_SCHEMA = {"worker": pl.String, "hostname": pl.String, "executions": pl.Int64, "ok": pl.Int64, "failed": pl.Int64,
           "interrupted": pl.Int64, "lost": pl.Int64, "seconds": pl.Float64}


def worker_table(run_dir: str | Path) -> pl.DataFrame:
    """Return one row per worker: its host, the execution attempts it ran, how they ended, and their seconds."""
    rows: dict[str, dict] = {}
    for a in read_attempts(run_dir):
        worker = str(a.get("worker") or "unknown")
        row = rows.setdefault(worker, {"worker": worker, "hostname": str(a.get("hostname") or ""), "executions": 0,
                                       "ok": 0, "failed": 0, "interrupted": 0, "lost": 0, "seconds": 0.0})
        row["executions"] += 1
        status = a.get("status")
        row[status if status in ("ok", "interrupted", "lost") else "failed"] += 1
        row["seconds"] += _seconds(a.get("started"), a.get("ended"))
    return pl.DataFrame(list(rows.values()), schema=_SCHEMA).sort("worker")


def _seconds(started: object, ended: object) -> float:
    try:
        return max(0.0, (datetime.fromisoformat(str(ended)) - datetime.fromisoformat(str(started))).total_seconds())
    except ValueError:
        return 0.0
