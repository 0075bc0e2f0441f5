"""What a stage did: the counters collect and judge both report, and their one-line summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass
class StageResult:
    """What a stage run did: planned items, skipped (already done), new successes and failures."""

    stage: ClassVar[str] = "stage"  # the summary line's first word
    noun: ClassVar[str] = ""  # what is counted, if the summary names it ("judgments")

    planned: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    calls: int = 0  # requests actually sent (retries included); cache hits are not calls
    wall_s: float = 0.0
    exhausted: int = 0  # failed items not asked again: they reached limits.max_attempts
    calls_of: str = ""  # what ``calls`` counts beyond the stage's own (a pipelined collect: "answers and their grades")

    def __str__(self) -> str:
        gave_up = f", {self.exhausted} not asked again (limits.max_attempts reached)" if self.exhausted else ""
        planned = f"{self.planned} {self.noun} planned" if self.noun else f"{self.planned} planned"
        of = f" ({self.calls_of})" if self.calls_of else ""
        return (f"{self.stage}: {planned}, {self.skipped} already done, {self.done} new, "
                f"{self.failed} failed{gave_up}, {self.calls} model calls{of}, {self.wall_s:.1f}s")
