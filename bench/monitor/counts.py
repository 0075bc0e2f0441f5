"""Per stage and per model or judge: planned, done, failed and in flight, and the rate over the last minute.

Read from the run folder alone: the records, the ``plan`` line of ``sweeps.jsonl`` and the open attempts."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core.executions import attempt_files, read_attempts
from bench.core.records import cell_key, versioned
from bench.core.store import RunStore

RATE_WINDOW_S = 60.0  # "the rate over the last minute"


@dataclass
class Row:
    """One model (collect) or judge (judge): planned (None: no plan recorded), done, failed, in flight."""

    stage: str
    id: str
    planned: int | None
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    recent: int = 0  # recorded in the last RATE_WINDOW_S seconds

    @property
    def left(self) -> int | None:
        return None if self.planned is None else max(0, self.planned - self.done)


@dataclass
class Items:
    """A kind's records by id: (group, ok, created_at as a POSIX time), the latest state of each id."""

    by_id: dict[str, tuple[Any, bool, float]] = field(default_factory=dict)

    def add(self, rid: str, group: Any, ok: bool, at: float) -> None:
        prev = self.by_id.get(rid)
        if prev is None or not prev[1]:  # a success stays once there is one (with its time); else the latest line
            self.by_id[rid] = (group, ok, at)


def read_items(run_dir: Path, kind: str) -> Items:
    """Return the ``kind`` ("candidate" or "judgment") records of every shard, by id (complete lines only)."""
    items = Items()
    for path in RunStore(run_dir).files(kind):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for line in data[:data.rfind(b"\n") + 1].splitlines():
            if (got := _item(kind, line)) is not None:
                items.add(*got)
    return items


def _item(kind: str, line: bytes) -> tuple[str, Any, bool, float] | None:
    try:
        rec = json.loads(line)
        if kind == "candidate":
            group: Any = cell_key(rec["model_id"], rec["prompt_id"], rec["prompt_version"])
        else:
            group = (rec["judge_id"], versioned(rec["rubric_id"], rec["rubric_version"]))
        at = datetime.fromisoformat(rec["created_at"]).timestamp() if rec.get("created_at") else 0.0
        return rec["id"], group, rec.get("error") is None, at
    except (ValueError, KeyError, TypeError):
        return None


def open_attempts(run_dir: Path) -> list[dict[str, Any]]:
    """Return the attempts whose open record under ``attempts/`` says ``running``."""
    return [rec for _path, rec in attempt_files(run_dir) if isinstance(rec, dict) and rec.get("status") == "running"]


def stage_rows(run_dir: Path, plan: dict[str, Any] | None, running: list[dict[str, Any]],
               stages: list[str], now: float | None = None, since: float | None = None) -> list[Row]:
    """Return one Row per model and per judge: the plan's (a model or judge with records and no plan too).
    A row's ``recent`` counts its records made at ``since`` or later (by default, in the last RATE_WINDOW_S)."""
    now = time.time() if now is None else now
    since = now - RATE_WINDOW_S if since is None else since
    plan = plan or {}
    cells = plan.get("cells") or {}
    rubrics = {tuple(r) for r in plan.get("rubrics") or ()}
    rows = _collect_rows(read_items(run_dir, "candidate"), cells, running, since)
    judging = any(a.get("stage") == "judge" or (a.get("stage") == "collect" and "judge" in stages) for a in running)
    rows += _judge_rows(read_items(run_dir, "judgment"), plan.get("judges"), rubrics, judging, since)
    return rows


def _collect_rows(items: Items, cells: dict[str, int], running: list[dict[str, Any]], since: float) -> list[Row]:
    """Answers per model over the plan's cells (every cell in the folder when no plan was recorded)."""
    rows: dict[str, Row] = {}
    for cell, n in cells.items():
        row = rows.setdefault(_model(cell), Row("collect", _model(cell), 0))
        row.planned = (row.planned or 0) + n
    per_cell: dict[str, list[int]] = {}  # cell -> [done, failed, recent]
    for group, ok, at in items.by_id.values():
        if cells and group not in cells:
            continue  # another cell's (an earlier sweep of the same folder with other --cells)
        counts = per_cell.setdefault(group, [0, 0, 0])
        counts[0] += 1
        counts[1] += not ok
        counts[2] += at >= since
    covered = {c for a in running if a.get("stage") == "collect" for c in (a.get("cells") or cells or per_cell)}
    for cell, (done, failed, recent) in per_cell.items():
        row = rows.setdefault(_model(cell), Row("collect", _model(cell), None))
        row.done, row.failed, row.recent = row.done + done, row.failed + failed, row.recent + recent
    for cell in covered:
        left = cells.get(cell, 0) - per_cell.get(cell, [0])[0]
        if cell in cells and left > 0:
            rows[_model(cell)].in_flight += left
    return list(rows.values())


def _judge_rows(items: Items, planned: dict[str, int] | None, rubrics: set[tuple[str, ...]], judging: bool,
                since: float) -> list[Row]:
    """Judgments per judge over the plan's (judge, rubric version) pairs (all when no plan was recorded)."""
    rows = {j: Row("judge", j, n) for j, n in (planned or {}).items()}
    for (judge, rubric), ok, at in items.by_id.values():
        if rubrics and (judge, rubric) not in rubrics:
            continue  # an earlier rubric version's, or a judge this sweep does not run
        row = rows.setdefault(judge, Row("judge", judge, None))
        row.done += 1
        row.failed += not ok
        row.recent += at >= since
    for row in rows.values():
        row.in_flight = (row.left or 0) if judging else 0
    return list(rows.values())


def _model(cell: str) -> str:
    return cell.split("/", 1)[0]


LEFT_OPEN = "left open by a driver that is gone: the next sweep of the folder records it as lost"


def executions(run_dir: Path, opened: list[dict[str, Any]], alive: bool = True) -> list[dict[str, Any]]:
    """Return each execution (by name, in order of first start): its attempts, the last one's status and worker.
    Attempts still ``opened`` are shown ``lost`` unless their driver is ``alive``."""
    out: dict[str, dict[str, Any]] = {}
    left = [a if alive else {**a, "status": "lost", "reason": LEFT_OPEN} for a in opened]
    for a in [*read_attempts(run_dir), *left]:
        ex = out.setdefault(a.get("name", "?"), {"name": a.get("name", "?"), "stage": a.get("stage", "?"),
                                                  "cells": a.get("cells") or [], "attempts": []})
        ex["attempts"].append({k: a.get(k) for k in ("attempt", "status", "worker", "hostname", "started", "ended")
                               } | ({"reason": a["reason"]} if a.get("reason") else {}))
    for ex in out.values():
        last = ex["attempts"][-1]
        ex.update(status=last["status"], worker=last["worker"])
    return list(out.values())
