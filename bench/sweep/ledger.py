"""A sweep's own lines in ``sweeps.jsonl`` (bench.core.sweeps): its start, what it plans, its end and exit code.

Start and plan are written as the stages start, the end before the lock goes; the plan (answers per cell,
judgments per judge) lets `bench status` measure progress from the run folder alone."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from bench.core.errors import BenchError, Halted
from bench.core.outcome import EXIT_BAD_INPUT, EXIT_CRASHED, EXIT_INTERRUPTED
from bench.core.sweeps import record_end, record_plan, record_start
from bench.judge.judgments import judgment_counts, load_judges
from bench.run import Run


@dataclass
class SweepLedger:
    """The ledger of one sweep: its id once its stages started (None before), and its end line's exit code."""

    run: Run
    command: str
    stages: list[str]
    sweep: str | None = None
    code: int = 0

    def begin(self) -> None:
        """Record the sweep's start and plan once nothing refused it (a refused sweep writes no line)."""
        if self.sweep is None:
            self.sweep = record_start(self.run.dir, command=self.command,
                                      budget_usd=self.run.sweep.limits.budget_usd, stages=self.stages)
            _record_plan(self, self.stages)

    def ended(self, code: int) -> int:
        """Set the sweep's exit code (written as the ledger closes); return it."""
        self.code = code
        return code

    def close(self, code: int) -> None:
        """Record the sweep's end with ``code``, if it started."""
        if self.sweep is not None:
            record_end(self.run.dir, self.sweep, code)


@contextlib.contextmanager
def sweep_ledger(run: Run, command: str, only_stage: str | None = None) -> Iterator[SweepLedger]:
    """Yield the sweep's ledger (:meth:`SweepLedger.begin` records its start and plan as its stages start); on leaving,
    record its end: ``ledger.code``, or what an exception means (Ctrl-C 130, a ``Halted`` its own code, a bench
    error 2, anything else 1). Call it holding the run lock."""
    s = run.sweep
    stages = [only_stage] if only_stage else [st for st, on in (("collect", s.collects), ("judge", s.judges)) if on]
    ledger = SweepLedger(run, command, stages)
    try:
        yield ledger
    except KeyboardInterrupt:
        ledger.close(EXIT_INTERRUPTED)
        raise
    except Halted as err:
        ledger.close(err.exit_code)
        raise
    except BenchError:
        ledger.close(EXIT_BAD_INPUT)
        raise
    except BaseException:
        ledger.close(EXIT_CRASHED)
        raise
    ledger.close(ledger.code)


def _record_plan(ledger: SweepLedger, stages: list[str]) -> None:
    """Record the answers planned per cell and judgments per judge; a plan not workable here is said and left out."""
    run = ledger.run
    try:
        each = len(run.scenarios) * run.sweep.samples  # collect plans every cell × scenario × sample
        cells = {c.key: each for c in run.cells} if "collect" in stages else {}
        judges = load_judges(run) if "judge" in stages else []
        per_judge: dict[str, int] = {}
        for judge in judges:
            per_judge[judge.entry.id] = per_judge.get(judge.entry.id, 0) + judgment_counts(run, [judge])[1]
    except (BenchError, OSError, ValueError) as err:
        warnings.warn(f"sweeps.jsonl: the plan of this sweep is not recorded ({err}); `bench status` shows its "
                      f"counts without totals", RuntimeWarning, stacklevel=2)
        return
    record_plan(run.dir, ledger.sweep, cells=cells, judges=per_judge,
                rubrics=[(j.entry.id, j.rubric.key) for j in judges])
