"""What tracking prints: a progress line after a few quiet seconds, and a warning when it fails (once per cause:
tracking never stops a sweep)."""

from __future__ import annotations

import os
import sys
import threading
import time

from bench.core.secrets import redact

PROGRESS_EVERY_S = float(os.environ.get("BENCH_TRACKING_PROGRESS_S", "3"))  # a progress line after this much quiet


class TrackingProgress:
    """Say what tracking is doing: after ``every_s`` seconds without a line, one line (``tracking: traces 400/1000
    (7s)``) from a daemon thread; nothing when tracking is quicker."""

    def __init__(self, every_s: float = PROGRESS_EVERY_S):
        self.every_s, self.step, self.done, self.total = every_s, "starting", 0, 0
        self._t0 = self._last = time.monotonic()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._tick, name="bench-tracking-progress", daemon=True)

    def __enter__(self) -> "TrackingProgress":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def begin(self, step: str, total: int = 0) -> None:
        with self._lock:
            self.step, self.done, self.total = step, 0, total

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n

    def line(self) -> str:
        with self._lock:
            count = f" {self.done}/{self.total}" if self.total else " …"
            return f"tracking: {self.step}{count} ({time.monotonic() - self._t0:.0f}s)"

    def _tick(self) -> None:
        while not self._stop.wait(min(0.25, self.every_s)):
            if time.monotonic() - self._last >= self.every_s:
                self._last = time.monotonic()
                print(self.line(), flush=True)


_SAID: set[str] = set()  # the failures said already (one cause, hit by several steps of one sweep, is said once)


def warn(what: str, err: BaseException) -> None:
    """Print that ``what`` failed (redacted), its effect, and that the records are unaffected; once per error."""
    text = redact(str(err))  # an error may quote a tracking URI's user:password@
    reason = f"{type(err).__name__}: {text.splitlines()[0][:300] if text else ''}"
    if reason in _SAID:
        return
    _SAID.add(reason)
    print(f"tracking: {what} failed ({reason}); so it is not logged to MLflow, nor what else fails for this reason "
          f"(said once); the run's records are unaffected: `bench track` logs them once MLflow works",
          file=sys.stderr, flush=True)
