"""What each model has in flight on the fake provider: the count now, its peak, and every request's span, which
``GET /_admin/timeline`` returns as ``[model, start, end]`` (at most :data:`TIMELINE_MAX`; ``dropped``: older ones)."""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Any

TIMELINE_MAX = 500_000  # about 60 MB at most: a large benchmark's every request, a soak's memory bounded


class ModelLoad:
    """Requests in flight per body ``model``: the count, its peak, and the span of each finished request."""

    def __init__(self) -> None:
        self.in_flight: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.spans: deque[tuple[str, float, float]] = deque(maxlen=TIMELINE_MAX)
        self.finished = 0

    def begin(self, model: str) -> float:
        """Count one more request of ``model`` in flight; return when it began (for :meth:`end`)."""
        self.in_flight[model] += 1
        self.peak[model] = max(self.peak[model], self.in_flight[model])
        return time.time()

    def end(self, model: str, began: float) -> None:
        """Count the request that began at ``began`` as answered (or dropped) and keep its span."""
        self.in_flight[model] -= 1
        self.spans.append((model, began, time.time()))
        self.finished += 1

    def timeline(self) -> dict[str, Any]:
        """The spans, oldest first, as JSON-ready ``[model, start, end]`` lists, and how many were let go."""
        return {"spans": [list(s) for s in self.spans], "dropped": self.finished - len(self.spans)}
