"""What a running sweep has done so far, as the metrics of its live MLflow run (bench.tracking.live): answers
and judgments done and failed, and each stage's spend as bench.core.spend counts it, read from the run folder."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from bench.core.records import Usage
from bench.core.spend import paid_cost
from bench.core.store import RunStore
from bench.core.tally import Counts, Planned, StoreTally

STAGE_KINDS = (("collect", "candidate"), ("judge", "judgment"))  # a stage and the records it writes


@dataclass
class _Followed:
    inode: int = -1
    offset: int = 0  # bytes counted: every complete line before it
    usd: float = 0.0  # what those lines paid


@dataclass
class StageSpend:
    """USD paid per stage in one run folder, read incrementally (only complete lines; a file rewritten in place,
    not appended to, is read again from its start)."""

    run_dir: Path
    _files: dict[Path, _Followed] = field(default_factory=dict, init=False)

    def refresh(self) -> dict[str, float]:
        """Read what was appended since the last refresh; return the USD paid so far per stage."""
        store = RunStore(Path(self.run_dir))
        out = {}
        for stage, kind in STAGE_KINDS:
            out[stage] = sum(self._read(path) for path in store.files(kind))
        return out

    def _read(self, path: Path) -> float:
        try:
            st = path.stat()
        except FileNotFoundError:
            return 0.0
        f = self._files.setdefault(path, _Followed())
        if st.st_ino != f.inode or st.st_size < f.offset:  # replaced or cut back: count it again
            self._files[path] = f = _Followed(inode=st.st_ino)
        if st.st_size == f.offset:
            return f.usd
        with open(path, "rb") as fh:
            fh.seek(f.offset)
            data = fh.read(st.st_size - f.offset)
        end = data.rfind(b"\n") + 1  # a line still being written is counted once it is whole
        f.usd += sum(_line_cost(line) for line in data[:end].split(b"\n") if line.strip())
        f.offset += end
        return f.usd


def _line_cost(line: bytes) -> float:
    """Return what one record line paid (its model's and its simulated user's requests; an unknown price: 0)."""
    try:
        rec = json.loads(line)
        usd = 0.0
        for key, by in (("usage", "model"), ("simulator_usage", "simulator")):
            if isinstance(rec.get(key), dict):
                usd += paid_cost(Usage.model_validate(rec[key]), rec.get("turns"), by) or 0.0
        return usd
    except (ValueError, ValidationError, AttributeError, TypeError):  # not a record: RunStore's readers skip it too
        return 0.0


@dataclass
class SweepProgress:
    """The counters a live MLflow run logs: per stage, planned (when known), done, failed and USD paid."""

    run_dir: Path
    planned: Planned | None = None

    def __post_init__(self) -> None:
        self.tally = StoreTally(Path(self.run_dir))
        self.spend = StageSpend(Path(self.run_dir))

    def metrics(self) -> dict[str, float]:
        """Return ``progress.<stage>.{planned,done,failed,cost_usd}`` and ``progress.cost_usd``, read anew."""
        self.tally.refresh()
        plan = self.planned
        counts = {"collect": _total(self.tally.by_model(plan.cells if plan else None).values()),
                  "judge": _total(self.tally.by_judge(plan.rubrics if plan else None).values())}
        usd = self.spend.refresh()
        out: dict[str, float] = {}
        for stage, c in counts.items():
            out[f"progress.{stage}.done"] = c.done
            out[f"progress.{stage}.failed"] = c.failed
            out[f"progress.{stage}.cost_usd"] = round(usd[stage], 9)
        if plan is not None:
            out["progress.collect.planned"] = sum(plan.per_model.values())
            if plan.judgments is not None:
                out["progress.judge.planned"] = plan.judgments
        out["progress.cost_usd"] = round(sum(usd.values()), 9)
        return out


def _total(groups) -> Counts:
    total = Counts()
    for c in groups:
        total.merge(c)
    return total
