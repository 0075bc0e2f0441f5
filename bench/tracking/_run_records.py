"""A run's answers and judgments as tracking reads them: once, the latest record per id, each answer's cell,
each rubric's hash, and when each cell (and the sweep) started and ended."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore, latest_of


def epoch_ms(iso: str) -> int:
    """Return a record's ``created_at`` (ISO 8601) as milliseconds since the epoch."""
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


class RunRecords:
    """A run's answers and judgments, read once: the latest record per id, each answer's cell, record times."""

    def __init__(self, run_dir: Path):
        store = RunStore(run_dir)
        every_candidate, every_judgment = store.read(Candidate), store.read(Judgment)
        self.candidates, self.judgments = latest_of(every_candidate), latest_of(every_judgment)
        self.cell = {c.id: c.cell for c in self.candidates.values()}
        firsts: dict[str, Any] = {}  # the first judgment of each rubric hash, in file order
        for j in every_judgment:
            firsts.setdefault(j.rubric_hash, j)
        self.rubric_hashes = {j.rubric_key: j.rubric_hash for j in firsts.values()}
        self._times: dict[str | None, list[int]] = {}
        for r in [*every_candidate, *every_judgment]:
            ms = epoch_ms(r.created_at)
            ids = [r.id] if isinstance(r, Candidate) else r.candidate_ids  # a pairwise judgment: both answers' cells
            for key in {None, *(self.cell[i] for i in ids if i in self.cell)}:
                span = self._times.setdefault(key, [ms, ms])
                span[0], span[1] = min(span[0], ms), max(span[1], ms)

    def start_ms(self, cell: str | None) -> int:
        """Return the time of the first record (every attempt counts) of a cell, or of the sweep (None)."""
        return self._times.get(cell, [int(time.time() * 1000)] * 2)[0]

    def end_ms(self, cell: str | None) -> int:
        """Return the time of the last record of a cell, or of the sweep (None)."""
        return self._times.get(cell, [int(time.time() * 1000)] * 2)[1]
