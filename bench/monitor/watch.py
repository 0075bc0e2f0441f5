"""`bench status --watch`: the status again every few seconds until the sweep ends (quietly on Ctrl-C).

On a terminal the table is redrawn in place, lines cut to its width; into a pipe a line every few seconds."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from bench.core.progress import clock, every_for
from bench.monitor.document import Status, status


def watch(run_dir: Path, *, as_json: bool = False, every_s: float | None = None, stream: TextIO | None = None,
          seen: Callable[[Status], None] | None = None) -> int:
    """Show the status of ``run_dir`` every ``every_s`` seconds until the run is no longer running; return 0 (also on
    Ctrl-C). ``seen`` gets each status (`bench status` marks a crashed run's MLflow run there)."""
    out = stream or sys.stdout
    tty = _isatty(out) and not as_json
    every = every_s if every_s is not None else every_for(out)
    drawn = 0
    try:
        while True:
            st = status(run_dir)
            if seen is not None:
                seen(st)
            if tty:
                drawn = _redraw(out, str(st), drawn)
            else:
                out.write((json.dumps(st.doc, sort_keys=True) if as_json else status_line(st.doc)) + "\n")
                out.flush()
            if st.state != "running":
                return 0
            time.sleep(every)  # a person's refresh interval, not a wait on something that could signal
    except KeyboardInterrupt:
        out.write("\n" if tty else "")
        return 0


def _redraw(out: TextIO, text: str, drawn: int) -> int:
    """Replace the ``drawn`` lines written last by ``text``; return how many lines it takes."""
    width = max(20, shutil.get_terminal_size().columns - 1)
    lines = [line[:width] for line in text.splitlines()]
    out.write((f"\x1b[{drawn}F\x1b[J" if drawn else "") + "\n".join(lines) + "\n")
    out.flush()
    return len(lines)


def status_line(doc: dict[str, Any]) -> str:
    """Return the status as one line: ``12:04:01 running · collect 34/120 · judge 20/120 · failed 0 · $0.0012 ·
    42 items/min · ETA 3:12``."""
    parts = [doc["checked_at"][11:19], doc["state"]]
    parts += [f"{s['stage']} {s['done']}/{'?' if s['planned'] is None else s['planned']}" for s in doc["stages"]]
    parts.append(f"failed {sum(s['failed'] for s in doc['stages'])}")
    spend = doc["spend"]
    parts.append(f"${spend['usd']:.4f}" + (f" of ${spend['budget_usd']:.4f}" if spend["budget_usd"] else ""))
    parts.append(f"{doc['rate']['per_minute']:g} items/min")
    if doc["rate"]["eta_s"] is not None:
        parts.append(f"ETA {clock(doc['rate']['eta_s'])}")
    if doc["state"] != "running":
        parts.append(doc["reason"])
    return " · ".join(parts)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
