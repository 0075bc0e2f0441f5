"""Progress bars that work in JupyterLab (widgets) and in papermill logs and terminals (text lines).
No wait is silent: a line at least every ``every_s`` seconds; under `bench sweep` lines start with :data:`MARK`."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

MARK = "\x1b[0m"  # an ANSI reset: invisible in notebooks and terminals; `bench sweep` shows only marked lines
TERMINAL_EVERY_S = 2.0  # a person watching a terminal sees the counts move
PIPED_EVERY_S = 5.0  # a pipe or a file (a CI log, `| tee`): one line every few seconds, not a flood
# this process's choices (:func:`configure`): lines marked for a sweep's terminal; the lines' interval (None: by stream)
_SETTINGS: dict[str, Any] = {"marked": False, "every_s": None}


def configure(*, marked: bool = False, every_s: float | None = None) -> None:
    """Set this process's progress: ``marked`` (lines start with MARK) and ``every_s`` (None: by stream)."""
    _SETTINGS.update(marked=bool(marked), every_s=None if every_s is None else float(every_s))


def every_for(stream: Any) -> float:
    """Return the seconds between progress lines to ``stream``: :func:`configure`'s, else 2 s (terminal) or 5 s."""
    if _SETTINGS["every_s"] is not None:
        return float(_SETTINGS["every_s"])
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    return TERMINAL_EVERY_S if tty else PIPED_EVERY_S


def clock(seconds: float) -> str:
    """Return a duration as a progress line shows it: ``0:42``, ``12:03``, ``1:02:03``."""
    whole = int(max(seconds, 0))
    h, rest = divmod(whole, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def say(line: object) -> None:
    """Print one of bench's own status lines (under `bench sweep`: marked, so it reaches the terminal)."""
    print(f"{MARK if _SETTINGS['marked'] else ''}{line}", file=sys.stdout, flush=True)


def widget_every() -> float:
    """Return the seconds between two refreshes of widget bars: the interval :func:`configure` set, else 2 s."""
    return float(_SETTINGS["every_s"] or TERMINAL_EVERY_S)


def requests_in_flight(llm: Any) -> Callable[[], int | None]:
    """Return a function counting ``llm``'s requests in flight in the running event loop (None: unknown)."""
    def count() -> int | None:
        try:
            return llm._state().in_flight  # bench.models.client's per-loop counter (the one peak_in_flight() reads)
        except Exception:  # no running loop, or another client
            return None
    return count


def in_kernel() -> bool:
    """Return whether this code runs in a Jupyter kernel (progress shows widgets there, and says "run this cell")."""
    try:
        from IPython import get_ipython  # noqa: PLC0415
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class Progress:
    """Overall and per-group counters, shown as bars or periodic text lines. ``mode``: "widgets", "text", "none"
    or "auto"; ``growing``: totals grow with :meth:`grow` until :meth:`phase`."""

    def __init__(self, title: str, totals: dict[str, int], mode: str = "auto", every_s: float | None = None, *,
                 growing: bool = False, in_flight: Callable[[], int | None] | None = None):
        self.title = self._name = title
        self.totals, self.growing, self.in_flight = dict(totals), growing, in_flight
        self.done = {k: 0 for k in totals}
        self.failed = 0
        self.mode = ("widgets" if in_kernel() else "text") if mode == "auto" else mode
        self.every_s = every_s if every_s is not None else \
            every_for(sys.stdout) if self.mode == "text" else widget_every()
        self._t0 = self._last = time.monotonic()
        self._closed = False
        self._bars: dict[str, Any] = {}
        if self.mode == "widgets" and (not growing or sum(self.totals.values())):
            self._bars = self._make_bars()  # a growing total shows its bars once something is planned
        self._beat = self._start_heartbeat() if self.mode in ("text", "widgets") else None

    def _make_bars(self) -> dict:
        from tqdm.auto import tqdm  # noqa: PLC0415 (tqdm.auto loads ipywidgets: only notebook progress bars need it)

        bars = {"": tqdm(total=sum(self.totals.values()), desc=self._desc())}
        for key, total in self.totals.items():
            if total or not self.growing:  # a growing group gets its bar with its first item
                bars[key] = tqdm(total=total, desc=f"  {key}", leave=True)
        return bars

    def _desc(self) -> str:
        return f"{self.title} (total grows as answers arrive)" if self.growing else self.title

    def grow(self, key: str, n: int = 1) -> None:
        """Add ``n`` items to group ``key``'s total (a growing total: answers arrived that need grading)."""
        self.totals[key] = self.totals.get(key, 0) + n
        self.done.setdefault(key, 0)
        if self.mode != "widgets":
            return
        if not self._bars:
            self._bars = self._make_bars()
        elif key not in self._bars:
            from tqdm.auto import tqdm  # noqa: PLC0415 (tqdm.auto loads ipywidgets: only notebook progress bars need it)

            _set_total(self._bars[""], sum(self.totals.values()))
            self._bars[key] = tqdm(total=self.totals[key], desc=f"  {key}", leave=True)
        else:
            for bar, total in ((self._bars[""], sum(self.totals.values())), (self._bars[key], self.totals[key])):
                _set_total(bar, total)

    def phase(self, title: str) -> None:
        """Rename the stage's current phase (e.g. "judging" once every answer is in): the totals are final now."""
        self.title, self.growing = title, False
        if self._bars:
            self._bars[""].set_description(self._desc())
        elif self.mode == "text" and sum(self.totals.values()) > sum(self.done.values()):
            self._print()

    def update(self, key: str, n: int = 1, failed: bool = False) -> None:
        """Count ``n`` finished items of group ``key`` (and whether they failed)."""
        self.done[key] = self.done.get(key, 0) + n
        self.failed += n if failed else 0
        if self.done[key] > self.totals.get(key, 0):  # never more done than planned: the bar stays truthful
            self.grow(key, self.done[key] - self.totals.get(key, 0))
        if self._bars:
            self._bars[""].update(n)
            self._bars[key].update(n)
            if failed:
                self._bars[""].set_postfix(failed=self.failed)
        elif self.mode == "text" and time.monotonic() - self._last >= self.every_s:
            self._print()

    def line(self) -> str:
        """Return the one-line summary: overall, per group, failures, rate, time elapsed and what is left."""
        done, total = sum(self.done.values()), sum(self.totals.values())
        elapsed = time.monotonic() - self._t0
        rate = done / max(elapsed, 1e-9)
        groups = " | ".join(f"{k} {self.done[k]}/{t}" for k, t in self.totals.items())
        if self.growing and not self._closed:
            head = f"{self.title}: {done}/{total} so far (the total grows as answers arrive)"
        else:
            head = f"{self._name if self._closed else self.title}: {done}/{total} " \
                   f"({100 * done / total if total else 100.0:.0f}%)"
        parts = [head, groups, f"failed {self.failed}", f"{rate:.1f}/s", f"{clock(elapsed)} elapsed"]
        if not self._closed:
            parts.append(self._pending(total - done))
        return " | ".join(p for p in parts if p)

    def _pending(self, left: int) -> str:
        in_flight = self.in_flight() if self.in_flight is not None else None
        if in_flight is None:
            return f"{left} left"
        return f"{left} left, {in_flight} request{'' if in_flight == 1 else 's'} in flight"

    def _print(self) -> None:
        self._last = time.monotonic()
        say(self.line())

    def _start_heartbeat(self) -> asyncio.Task | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # made outside an event loop: lines only when something finishes
            return None
        return loop.create_task(self._heartbeat())

    async def _heartbeat(self) -> None:
        """Show the counters at least every ``every_s`` seconds while the stage runs, even if nothing finishes."""
        while True:
            await asyncio.sleep(max(0.05, self._last + self.every_s - time.monotonic()))
            if time.monotonic() - self._last < self.every_s or not sum(self.totals.values()):
                continue
            if self.mode == "text":
                self._print()
            elif self._bars:  # refresh: elapsed time and rate move on, and the postfix says what is pending
                self._last = time.monotonic()
                done, total = sum(self.done.values()), sum(self.totals.values())
                self._bars[""].set_postfix_str(self._pending(total - done) +
                                               (f", failed {self.failed}" if self.failed else ""))

    def close(self) -> None:
        """Finish the bars, or print the final line."""
        if self._closed:
            return
        if self._beat is not None:
            self._beat.cancel()
        self._closed = True
        if self._bars:  # the final state: the stage's name, and no "left"/"in flight" of the last heartbeat
            self._bars[""].set_description(self._name, refresh=False)
            self._bars[""].set_postfix_str(f"failed {self.failed}" if self.failed else "", refresh=False)
        for bar in self._bars.values():
            bar.close()
        if self.mode == "text" and (sum(self.totals.values()) or not self.growing):
            self._print()


def _set_total(bar: Any, total: int) -> None:
    """Set a tqdm bar's total, also on its notebook widget (tqdm.notebook keeps the widget's max apart)."""
    bar.total = total
    container = getattr(bar, "container", None)
    if container is not None:
        container.children[1].max = max(total, 1)
    bar.refresh()
