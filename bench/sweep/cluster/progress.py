"""A cluster sweep's progress in the driver: one line for the whole grid, read from the shared run folder.

:class:`ClusterProgress` reads it incrementally (bench.core.tally) from the driver's wait loop, no thread:
lines with a heartbeat in a terminal, one updated display in Jupyter."""

from __future__ import annotations

import html
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from bench.core.progress import clock, every_for, in_kernel, widget_every
from bench.core.tally import Counts, Planned, StoreTally, progress_line
from bench.estimate import planned_progress
from bench.run import Run


class ClusterProgress:
    """Overall and per-model progress of a sweep whose executions run anywhere, from its run folder.

    ``planned``: a Planned, or answers per model (then ``judgments`` is the total). ``mode``: "text", "notebook",
    "none" or "auto". ``every_s``: the least time between refreshes; ``heartbeat_s``: an unchanged line's repeat."""

    def __init__(self, run_dir: str | os.PathLike[str], planned: Planned | dict[str, int],
                 judgments: int | None = None, *, mode: str = "auto", every_s: float | None = None,
                 heartbeat_s: float = 30.0, out: TextIO | None = None):
        self.tally = StoreTally(Path(run_dir))
        self.planned = planned if isinstance(planned, Planned) else Planned(dict(planned), judgments)
        self.mode = ("notebook" if in_kernel() else "text") if mode == "auto" else mode
        if self.mode not in ("text", "notebook", "none"):
            raise ValueError(f"progress mode {mode!r}: expected auto, text, notebook or none")
        self.every_s = every_s if every_s is not None else every_for(out or sys.stdout) if self.mode == "text" \
            else widget_every()
        self.heartbeat_s = heartbeat_s
        self.out = out
        self.printed = 0  # lines printed (text) or displays sent (notebook)
        self._t0 = self._began = time.monotonic()  # _t0 is set again at the first refresh: the rate counts since
        self._refreshed = self._shown_at = float("-inf")
        self._start: int | None = None  # records finished when progress began: the rate counts this sweep's
        self._shown = ""
        self._handle: Any = None
        self._line = ""  # the line shown last
        self._final: str | None = None  # once closed: the final line

    @classmethod
    def for_run(cls, run: Run, **options: Any) -> ClusterProgress:
        """Return the progress of ``run``: its cells' answers per model and its judges' judgments."""
        return cls(run.dir, planned_progress(run), **options)

    def line(self) -> str:
        """Return the current line (as of the last refresh) with the time elapsed and the rate."""
        text = f"{progress_line(self.tally, self.planned)} · {clock(time.monotonic() - self._began)} elapsed"
        finished = self._finished()
        if self._start is not None and finished > self._start:
            text += f" · {(finished - self._start) / max(time.monotonic() - self._t0, 1e-9):.1f} records/s"
        return text

    def update(self, force: bool = False) -> str:
        """Read what the workers appended, show it; return the line (none read within ``every_s``, unless ``force``)."""
        if self._final is not None:
            return self._final
        now = time.monotonic()
        if not force and now - self._refreshed < self.every_s:
            return self.line()
        self._refreshed = now
        self.tally.refresh()
        if self._start is None:
            self._start, self._t0 = self._finished(), now
        counts = progress_line(self.tally, self.planned)
        if counts != self._shown or now - self._shown_at >= self.heartbeat_s or force:
            self._show(counts, now)
        return self.line()

    def close(self) -> str:
        """Read the folder one last time and show the final line (once); return it (the same on every call)."""
        if self._final is None:
            self.update(force=True)
            self._final = self._line
        return self._final

    def _finished(self) -> int:
        answers = sum(c.done for c in self.tally.by_model(self.planned.cells).values())
        return answers + sum(c.done for c in self.tally.by_judge(self.planned.rubrics).values())

    def _show(self, counts: str, now: float) -> None:
        self._shown, self._shown_at = counts, now
        line = self._line = self.line()
        if self.mode == "none":
            return
        self.printed += 1
        if self.mode == "text":
            print(line, file=self.out or sys.stdout, flush=True)
            return
        from IPython.display import display  # noqa: PLC0415 (IPython: only inside a Jupyter kernel)

        data = {"text/plain": line, "text/html": self._html(line)}
        if self._handle is None:
            self._handle = display(data, raw=True, display_id=True)
        else:
            self._handle.update(data, raw=True)

    def _html(self, line: str) -> str:
        """The notebook's display: a bar overall and per model, the judgments, the failures and the rate."""
        rows = []
        models = self.tally.by_model(self.planned.cells)
        per = self.planned.per_model
        if per:
            done = sum(models.get(m, Counts()).done for m in per)
            rows.append(_bar("collect", done, sum(per.values()), bold=True))
            rows += [_bar(m, models.get(m, Counts()).done, n) for m, n in per.items()]
        judges = self.tally.by_judge(self.planned.rubrics)
        if self.planned.judgments is not None:
            rows.append(_bar("judged", sum(c.done for c in judges.values()), self.planned.judgments, bold=True))
        return (f"<table style='border-collapse:collapse'>{''.join(rows)}</table>"
                f"<div style='font-family:monospace'>{html.escape(line)}</div>")


def _bar(name: str, done: int, total: int, bold: bool = False) -> str:
    label = f"<b>{html.escape(name)}</b>" if bold else html.escape(name)
    pct = 100 * done / total if total else 100.0
    return (f"<tr><td style='text-align:left;padding-right:1em'>{label}</td>"
            f"<td><progress value='{done}' max='{max(total, 1)}' style='width:16em'></progress></td>"
            f"<td style='text-align:right;padding-left:1em'>{done}/{total} ({pct:.0f}%)</td></tr>")
