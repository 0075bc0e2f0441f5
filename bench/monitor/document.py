"""`bench status --json`'s document (a contract: :data:`SCHEMA`) and the table the terminal and notebooks show.

:func:`status` builds it, reading only."""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.progress import clock
from bench.core.records import utc_now
from bench.core.spend import RunSpend, recorded_spend
from bench.models.budget import cache_holding
from bench.monitor.counts import RATE_WINDOW_S, Row, executions, open_attempts, stage_rows
from bench.monitor.state import STATES, RunState, run_state

SCHEMA_ID = "bench-status/1"
_COUNT = {"type": "integer", "minimum": 0}
_MAYBE_COUNT = {"type": ["integer", "null"], "minimum": 0}
_ROW = {"type": "object", "required": ["stage", "id", "planned", "done", "failed", "in_flight"],
        "properties": {"stage": {"enum": ["collect", "judge"]}, "id": {"type": "string"}, "planned": _MAYBE_COUNT,
                       "done": _COUNT, "failed": _COUNT, "in_flight": _COUNT}}
_STAGE = {"type": "object", "required": ["stage", "planned", "done", "failed", "in_flight", "executions_running"],
          "properties": {"stage": {"enum": ["collect", "judge"]}, "planned": _MAYBE_COUNT, "done": _COUNT,
                         "failed": _COUNT, "in_flight": _COUNT, "executions_running": _COUNT}}
_ATTEMPT = {"type": "object", "required": ["attempt", "status", "worker", "started"],
            "properties": {"status": {"enum": ["running", "ok", "failed", "interrupted", "lost"]},
                           "worker": {"type": ["string", "null"]}, "attempt": _MAYBE_COUNT}}
SCHEMA: dict[str, Any] = {  # `bench status --json`: what orchestrators and notebooks may rely on (docs/sweeps.md)
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema", "run_dir", "state", "reason", "exit_code", "checked_at", "sweep", "lock", "stages",
                 "items", "spend", "executions", "rate"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "run_dir": {"type": "string"},
        "state": {"enum": list(STATES)},
        "reason": {"type": "string"},
        "exit_code": {"type": ["integer", "null"]},  # the last sweep's, once it ended
        "checked_at": {"type": "string"},
        "sweep": {"type": ["object", "null"], "required": ["id", "pid", "host", "started", "ended", "command",
                                                           "stages", "sweeps"]},
        "lock": {"type": "object", "required": ["held", "pid", "holder", "how"],
                 "properties": {"held": {"type": ["boolean", "null"]}, "pid": {"type": ["integer", "null"]}}},
        "stages": {"type": "array", "items": _STAGE},
        "items": {"type": "array", "items": _ROW},  # per model (collect) and per judge (judge)
        "spend": {"type": "object", "required": ["usd", "unpriced", "budget_usd", "fraction"],
                  "properties": {"usd": {"type": "number"}, "unpriced": _COUNT,
                                 "budget_usd": {"type": ["number", "null"]}, "fraction": {"type": ["number", "null"]},
                                 "estimated_usd": {"type": "number"}, "estimated_requests": _COUNT,
                                 "estimated_at_reservation": _COUNT}},  # requests in flight at a kill
        "executions": {"type": "array", "items": {
            "type": "object", "required": ["name", "stage", "cells", "status", "worker", "attempts"],
            "properties": {"attempts": {"type": "array", "items": _ATTEMPT, "minItems": 1}}}},
        "rate": {"type": "object", "required": ["per_minute", "window_s", "eta_s", "eta"],
                 "properties": {"per_minute": {"type": "number", "minimum": 0}, "eta_s": {"type": ["number", "null"]},
                                "eta": {"type": ["string", "null"]}}},
    },
}


@dataclass
class Status:
    """One look at a run folder: its document (``doc``, see :data:`SCHEMA`), shown as a table."""

    doc: dict[str, Any]

    @property
    def state(self) -> str:
        return self.doc["state"]

    def __str__(self) -> str:
        return status_table(self.doc)

    def _repr_html_(self) -> str:  # a notebook shows the same table
        return f"<pre>{html.escape(status_table(self.doc))}</pre>"


def status(run_dir: str | Path) -> Status:
    """Return the status of the run in ``run_dir`` (a run folder), read from the folder alone, changing nothing.
    Safe beside a running sweep and on a shared folder seen from another machine (bench.monitor.state)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise BenchError(f"{run_dir} is not a run folder (give runs/<sweep>, the folder a sweep writes)")
    state = run_state(run_dir)
    now = time.time()
    sweep = state.sweep or {}
    opened = open_attempts(run_dir)
    running = opened if state.state == "running" else []  # a dead driver's open attempts run no more
    stages = sweep.get("stages") or ["collect", "judge"]
    window = _window(sweep.get("started"), now)
    rows = stage_rows(run_dir, sweep.get("plan"), running, stages, now, since=now - window)
    if not rows and state.sweep is None and not (run_dir / "executions.jsonl").exists():
        raise BenchError(f"{run_dir} holds no sweep, record or execution: is it a run folder (runs/<sweep>)?")
    if state.sweep is None and state.state == "finished" and any(r.failed for r in rows):
        state = RunState("failed", state.reason + f"; {sum(r.failed for r in rows)} item(s) failed", None, state.lock)
    return Status(_document(run_dir, state, rows, running, opened, now, window))


def _document(run_dir: Path, state: RunState, rows: list[Row], running: list[dict[str, Any]],
              opened: list[dict[str, Any]], now: float, window: float = RATE_WINDOW_S) -> dict[str, Any]:
    sweep = state.sweep or {}
    spend = recorded_spend(run_dir, cache_holding(run_dir))  # a kill's requests in flight count at once
    budget = sweep.get("budget_usd")
    return {
        "schema": SCHEMA_ID, "run_dir": str(run_dir), "state": state.state, "reason": state.reason,
        "exit_code": state.exit_code, "checked_at": utc_now(),
        "sweep": None if state.sweep is None else {
            "id": sweep.get("sweep"), "pid": sweep.get("pid"), "host": sweep.get("host"),
            "started": sweep.get("started"), "ended": (sweep.get("end") or {}).get("ended"),
            "command": sweep.get("command"), "stages": sweep.get("stages") or [], "sweeps": state.sweeps},
        "lock": {k: state.lock.get(k) for k in ("held", "pid", "holder", "how")},
        "stages": _stages(rows, running),
        "items": [{"stage": r.stage, "id": r.id, "planned": r.planned, "done": r.done, "failed": r.failed,
                   "in_flight": r.in_flight} for r in rows],
        "spend": {"usd": spend.usd, "unpriced": spend.unpriced, "budget_usd": budget,
                  "fraction": round(spend.usd / budget, 6) if budget else None,
                  "estimated_usd": spend.lost_in_flight_usd, "estimated_requests": spend.lost_in_flight,
                  "estimated_at_reservation": spend.lost_reserved},  # requests in flight at a kill
        "executions": executions(run_dir, opened, alive=bool(running)),
        "rate": _rate(rows, state.state == "running", now, window),
    }


def _stages(rows: list[Row], running: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for stage in ("collect", "judge"):
        mine = [r for r in rows if r.stage == stage]
        if not mine:
            continue
        planned = None if any(r.planned is None for r in mine) else sum(r.planned or 0 for r in mine)
        out.append({"stage": stage, "planned": planned, "done": sum(r.done for r in mine),
                    "failed": sum(r.failed for r in mine), "in_flight": sum(r.in_flight for r in mine),
                    "executions_running": sum(a.get("stage") == stage for a in running)})
    return out


def _window(started: Any, now: float) -> float:
    """Return the seconds the rate is measured over: the last minute, or the time the sweep has run when it began
    less than a minute ago (at least a second): its items were not made over a minute that has not passed."""
    try:
        ran = now - datetime.fromisoformat(started).timestamp()
    except (TypeError, ValueError):  # no sweep recorded (an older folder), or a start not readable: a minute
        return RATE_WINDOW_S
    return min(RATE_WINDOW_S, max(1.0, ran))


def _rate(rows: list[Row], running: bool, now: float, window: float = RATE_WINDOW_S) -> dict[str, Any]:
    """Return items recorded per minute over ``window`` and, while running, when what is left ends at that rate."""
    per_minute = sum(r.recent for r in rows) * 60.0 / window
    left = sum(r.left or 0 for r in rows)
    eta_s = left / per_minute * 60.0 if running and per_minute > 0 and left else None
    eta = None if eta_s is None else datetime.fromtimestamp(now + eta_s, timezone.utc).isoformat(timespec="seconds")
    return {"per_minute": round(per_minute, 3), "window_s": round(window, 3), "eta_s": eta_s and round(eta_s, 1),
            "eta": eta}


def status_table(doc: dict[str, Any]) -> str:
    """Return the document as the terminal shows it: state, a table per model and judge, spend, rate, executions."""
    lines = [f"{doc['run_dir']}: {doc['state'].upper()}: {doc['reason']}"]
    if sw := doc["sweep"]:
        ended = f", ended {sw['ended']}" if sw["ended"] else ""
        lines.append(f"sweep {sw['id']} ({sw['command']}) started {sw['started']}{ended}, on {sw['host']} "
                     f"pid {sw['pid']}")
    head = ("stage", "model/judge", "planned", "done", "failed", "in flight")
    body = []
    for s in doc["stages"]:  # each model or judge, then the stage's total
        body += [(r["stage"], r["id"], _n(r["planned"]), str(r["done"]), str(r["failed"]), str(r["in_flight"]))
                 for r in doc["items"] if r["stage"] == s["stage"]]
        body.append((s["stage"], "(all)", _n(s["planned"]), str(s["done"]), str(s["failed"]), str(s["in_flight"])))
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *body]]
    lines.append(_spend_line(doc["spend"]))
    rate = doc["rate"]
    eta = f"; ETA {clock(rate['eta_s'])} ({rate['eta']})" if rate["eta_s"] is not None else ""
    over = "the last minute" if rate["window_s"] >= RATE_WINDOW_S else f"the sweep's first {rate['window_s']:.0f} s"
    lines.append(f"rate: {rate['per_minute']:g} items/min over {over}{eta}")
    for ex in doc["executions"]:
        tries = ", ".join(f"#{a['attempt']} {a['status']} on {a['worker']}" for a in ex["attempts"])
        lines.append(f"  execution {ex['name']}: {ex['status']} ({tries})")
    return "\n".join(lines)


def _spend_line(spend: dict[str, Any]) -> str:
    budget = spend["budget_usd"]
    of = f" of budget ${budget:.4f} ({100 * spend['fraction']:.1f}%)" if budget else " (no budget set)"
    unpriced = f"; {spend['unpriced']} record(s) with no known price" if spend["unpriced"] else ""
    estimated = RunSpend(spend["usd"], spend["unpriced"], lost_in_flight=spend.get("estimated_requests", 0),
                         lost_in_flight_usd=spend.get("estimated_usd", 0.0),
                         lost_reserved=spend.get("estimated_at_reservation", 0)).estimated_note()
    return f"spend: ${spend['usd']:.4f}{estimated}{of}{unpriced}"


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
