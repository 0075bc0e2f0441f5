"""Where a sweep's wall time goes, against its bound: the profile benchmarks/cluster.py prints for each way.

From a finished sweep's run folder and the fake provider's timeline of requests:

- each execution (``executions.jsonl``): its duration, its requests (the candidates' times) and its time outside
  their span (:func:`executions`);
- each execution's fixed cost, split from its executed notebook's papermill times (:func:`notebook_split`): kernel
  start (execution start → first cell start, papermill's own start included), imports and opening the run (first
  cell → the stage cell), the stage cell, the output cells, save and shutdown (last cell end → execution end);
- each model's time at its cap and below it while it still had requests not yet sent, and which executions were
  running in that time (:func:`cap_profile`), from the provider's side: the spans of its requests.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from bench.core.executions import read_attempts
from bench.core.records import Candidate, cell_key
from bench.core.store import RunStore

STAGE_NOTEBOOKS = {"collect": "01_collect", "judge": "02_judge"}
STAGE_CALLS = ("run_collect(", "run_judge(", "run_on_cluster(")  # the stage cell calls one of these
PARTS = ("kernel", "imports", "stage", "outputs", "save")  # an execution's time, start to end, in order


def epoch(iso: str) -> float:
    """A record's or papermill's ISO time as seconds since the epoch (a time without a zone is UTC)."""
    t = datetime.fromisoformat(iso)
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def executions(run_dir: Path) -> list[dict]:
    """Each ok execution: its duration, its cells, its requests, and its time outside the span of those requests."""
    by_cell: dict[str, list[Candidate]] = defaultdict(list)
    for c in RunStore(run_dir).read(Candidate):
        if c.ok and c.usage is not None:
            by_cell[cell_key(c.model_id, c.prompt_id, c.prompt_version)].append(c)
    out = []
    for a in read_attempts(run_dir):
        if a["status"] != "ok":
            continue
        start, end = epoch(a["started"]), epoch(a["ended"])
        cells = a["cells"] or list(by_cell)
        reqs = [c for cell in cells for c in by_cell[cell]]
        first = min((epoch(c.created_at) - (c.usage.latency_s or 0.0) for c in reqs), default=end)
        last = max((epoch(c.created_at) for c in reqs), default=end)
        span = max(0.0, last - first)
        out.append({"name": a["name"], "worker": a["worker"], "start": start, "end": end, "seconds": end - start,
                    "cells": cells, "requests": len(reqs), "span": span, "overhead": (end - start) - span,
                    "before": first - start, "after": end - last,
                    **notebook_split(run_dir, a, start, end)})
    return out


def notebook_path(run_dir: Path, attempt: dict) -> Path:
    """The executed notebook of an attempt: ``<stage>[.<shard>].ipynb``, a retried cluster attempt's ``-a<N>``."""
    shard = attempt["name"].split(".", 1)[1] if "." in attempt["name"] else None
    if attempt.get("attempt", 1) > 1:
        shard = f"{shard or 'all'}-a{attempt['attempt']}"
    return run_dir / "notebooks" / f"{STAGE_NOTEBOOKS[attempt['stage']]}{'.' + shard if shard else ''}.ipynb"


def notebook_split(run_dir: Path, attempt: dict, start: float, end: float) -> dict:
    """An execution's time in :data:`PARTS` (seconds, summing to its duration) and when its stage cell ran
    (``stage_at``: epoch start and end); None each if its notebook is gone."""
    missing = {**dict.fromkeys(PARTS), "stage_at": None}
    try:
        nb = json.loads(notebook_path(run_dir, attempt).read_text())
    except (OSError, ValueError):
        return missing
    timed = []  # (start, end, source) of each executed code cell, in order
    for cell in nb["cells"]:
        pm = cell.get("metadata", {}).get("papermill", {})
        if cell["cell_type"] == "code" and pm.get("start_time") and pm.get("end_time"):
            timed.append((epoch(pm["start_time"]), epoch(pm["end_time"]), "".join(cell["source"])))
    if not timed:
        return missing
    stage = next((i for i, (_s, _e, src) in enumerate(timed) if any(call in src for call in STAGE_CALLS)),
                 max(range(len(timed)), key=lambda i: timed[i][1] - timed[i][0]))  # else the longest cell
    marks = [start, timed[0][0], timed[stage][0], timed[stage][1], timed[-1][1], end]
    return {**{part: round(b - a, 3) for part, a, b in zip(PARTS, marks, marks[1:])}, "stage_at": marks[2:4]}


def _segments(spans: list[list], models: list[str], t0: float) -> list[tuple[float, float, dict[str, int]]]:
    """The provider's load as pieces ``(start, end, in flight per model)`` from ``t0`` to the last request's end."""
    events = sorted([(s, 1, m) for m, s, _e in spans] + [(e, -1, m) for m, _s, e in spans])
    load = dict.fromkeys(models, 0)
    out, prev = [], t0
    for t, step, m in events:
        if t > prev:
            out.append((prev, t, dict(load)))
            prev = t
        load[m] = load.get(m, 0) + step
    return out


def cap_profile(spans: list[list], caps: dict[str, int], global_cap: int, execs: list[dict],
                cells_of: dict[str, str]) -> dict:
    """Per model (and all together): seconds at its cap, and below it while it had requests not yet sent.

    From the first execution's start: start-up is counted apart. A model has work pending until its last request
    starts; all together are below min(global cap, the caps of the models with work pending) while any has. Of the
    time below the cap: how much an execution carrying one of the model's cells (``cells_of``: a cell key → its
    model; all: any execution) was in its stage cell (``in_stage_s``: the stage itself sent too little), how much
    no such execution was running at all (``no_cell_running_s``), how much all together were at the global cap
    (``all_at_cap_s``: the model could not have had more), and which executions were running (seconds each)."""
    t0 = min(e["start"] for e in execs)
    last_start = {m: max((s for mm, s, _e in spans if mm == m), default=t0) for m in caps}
    keys = ("at_cap_s", "below_cap_pending_s", "in_stage_s", "no_cell_running_s", "all_at_cap_s")
    out: dict = {m: {"cap": c, **dict.fromkeys(keys, 0.0), "running": defaultdict(float)}
                 for m, c in [*caps.items(), ("all", global_cap)]}
    for a, b, load in _segments(spans, list(caps), t0):
        pending = [m for m in caps if a < last_start[m]]
        if not pending:
            continue
        mid = (a + b) / 2
        running = [e for e in execs if e["start"] < b and e["end"] > a]
        full = sum(load.values()) >= min(global_cap, sum(caps[p] for p in pending))
        for m in [*pending, "all"]:
            if full if m == "all" else load[m] >= caps[m]:
                out[m]["at_cap_s"] += b - a
                continue
            out[m]["below_cap_pending_s"] += b - a
            out[m]["all_at_cap_s"] += (b - a) if full else 0.0
            for e in running:
                out[m]["running"][e["name"]] += min(b, e["end"]) - max(a, e["start"])
            mine = [e for e in running if m == "all" or any(cells_of.get(c) == m for c in e["cells"])]
            if any(e["stage_at"] and e["stage_at"][0] <= mid <= e["stage_at"][1] for e in mine):
                out[m]["in_stage_s"] += b - a
            if not mine:
                out[m]["no_cell_running_s"] += b - a
    for row in out.values():
        row["running"] = {k: round(v, 2) for k, v in sorted(row["running"].items(), key=lambda kv: -kv[1])[:4]}
        row.update({key: round(row[key], 2) for key in keys})
    return out


def profile(r: dict, slots: int, bound: float, caps: dict[str, int], global_cap: int,
            cells_of: dict[str, str]) -> dict:
    """The gap of one sweep: start-up, each part of an execution (median and sum), idle slots, the caps, teardown."""
    ex = r["executions"]
    span = max(e["end"] for e in ex) - min(e["start"] for e in ex)
    split = [e for e in ex if e["kernel"] is not None]
    return {"wall_s": round(r["wall"], 2), "bound_s": round(bound, 2), "ratio": round(r["wall"] / bound, 2),
            "startup_s": round(r["startup"], 2), "executions": len(ex),
            "median_s": {p: round(statistics.median(e[p] for e in split), 2) if split else None for p in PARTS},
            "sum_s": {p: round(sum(e[p] for e in split), 1) if split else None for p in PARTS},
            "idle_slots_s": round(max(0.0, slots * span - sum(e["seconds"] for e in ex)), 1),
            "teardown_s": round(r["teardown"], 2),
            "caps": cap_profile(r["timeline"], caps, global_cap, ex, cells_of)}


def print_profile(ways: dict[str, dict], slots: dict[str, int]) -> None:
    """Print the profiles of the ways side by side, then each model's time at and below its cap."""
    names = list(ways)
    row = "  {:60s}" + " {:>16s}" * len(names)
    print("\nprofile of the gap (main grid)")
    print(row.format("", *names))
    print(row.format("wall / bound", *(f"{p['wall_s']:.1f}/{p['bound_s']:.1f} = {p['ratio']:.2f}×"
                                        for p in ways.values())))
    print(row.format("start-up (command start → first execution)", *(f"{p['startup_s']:.1f}" for p in ways.values())))
    print(row.format("executions (slots)", *(f"{p['executions']} ({slots[n]})" for n, p in ways.items())))
    labels = {"kernel": "kernel start (execution start → first cell)", "imports": "imports, open the run (→ stage cell)",
              "stage": "stage cell", "outputs": "output cells", "save": "save, shutdown (last cell → end)"}
    for part, label in labels.items():
        print(row.format(f"{label}, s: median, sum", *(_pair(p, part) for p in ways.values())))
    print(row.format("idle slots in all, s", *(f"{p['idle_slots_s']:.1f}" for p in ways.values())))
    print(row.format("teardown (last execution end → exit), s", *(f"{p['teardown_s']:.1f}" for p in ways.values())))
    print("\n  per model, from the first execution's start, s: at its cap; below it while it had requests not yet sent,"
          "\n  of which: in a stage cell carrying its cells, with none of its cells running, with all together at the "
          "global cap;\n  the executions running then (s each)")
    for way, p in ways.items():
        for m, c in p["caps"].items():
            running = ", ".join(f"{k} {v:.1f}" for k, v in c["running"].items()) or "-"
            print(f"  {way:6s} {m:7s} cap {c['cap']:2d}: {c['at_cap_s']:6.1f} at cap, {c['below_cap_pending_s']:6.1f} "
                  f"below (in stage {c['in_stage_s']:5.1f}, none running {c['no_cell_running_s']:5.1f}, all at cap "
                  f"{c['all_at_cap_s']:5.1f})  {running}")


def _pair(p: dict, part: str) -> str:
    median, total = p["median_s"][part], p["sum_s"][part]
    return "-" if median is None else f"{median:.2f}, {total:.1f}"
