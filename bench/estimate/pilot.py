"""The pilot: ``limits.pilot`` scenarios of each model's first cell collected and graded before a sweep under a
budget commits to the rest, when the verdict hangs on unobserved reply lengths (the rest may then exit 4)."""

from __future__ import annotations

from dataclasses import replace

from bench.config.params import Cell
from bench.config.scenarios import write_scenarios
from bench.core.spend import recorded_spend
from bench.estimate.cost import StageEstimate
from bench.models.budget import dollars
from bench.models.eventloop import run as run_loop
from bench.run import Run
from bench.stage_runs import run_collect, run_judge


def pilot_run(run: Run, stages: list[StageEstimate]) -> Run:
    """Return the Run of the pilot of ``stages``: the cells, the first ``limits.pilot`` scenarios (one sample
    each) and the judges that measure them (the module's docstring says which)."""
    judge_ids = {s.id for s in stages if s.stage == "judge"}
    judges = [j for j in run.sweep.judges if j.id in judge_ids]
    first = {}
    for cell in run.cells:
        first.setdefault(cell.model.id, cell)
    models = {s.id for s in stages if s.stage == "collect"}
    cells = [c for m, c in first.items() if m in models]
    simulated = {s.id for s in stages if s.stage == "simulator"}  # measured by a conversation of a cell of theirs
    cells += [next(c for c in run.cells if _simulator(c) == sid) for sid in simulated
              if any(_simulator(c) == sid for c in run.cells)]
    if judges and not cells:
        cells = list(first.values())[:1]
    every = {c.key: c for c in run.sweep.cells()}
    for judge in judges:
        if judge.baseline and judge.baseline in every:  # a pairwise judge grades a cell against its baseline
            cells += [every[judge.baseline], *[c for c in run.cells if c.key != judge.baseline][:1]]
    cells = list({c.key: c for c in cells}.values())
    sweep = run.sweep.model_copy(update={"samples": 1, "judges": judges})
    return replace(run, sweep=sweep, cells=cells, scenarios=run.scenarios[:run.sweep.limits.pilot])


def _simulator(cell: Cell) -> str | None:
    """Return the id of a cell's simulated user (None: its prompt has none)."""
    sim = cell.prompt.user_simulator
    return sim.id if sim is not None else None


def send_pilot(run: Run, stages: list[StageEstimate], only_stage: str | None = None) -> str:
    """Send the pilot of ``stages`` (collect, then the judges to measure); return what it sent and spent, in
    words, for the lines that follow. Raises BudgetReached when its own requests pass the budget."""
    pilot = pilot_run(run, stages)
    before = recorded_spend(run.dir).usd
    calls = 0
    print(f"pilot: sending the first {run.sweep.limits.pilot} answers per model to measure "
          f"({', '.join(f'{s.stage} {s.id}' for s in stages)}) before the rest is committed", flush=True)
    try:
        if pilot.cells and pilot.sweep.collects and only_stage != "judge":
            result = run_loop(run_collect(pilot, progress="none"))  # uvloop where installed
            calls += result.calls
            print(f"pilot: {result}", flush=True)
        if pilot.sweep.judges:
            result = run_loop(run_judge(pilot, progress="none"))
            calls += result.calls
            print(f"pilot: {result}", flush=True)
    finally:
        write_scenarios(run.dir, run.scenarios)  # the pilot's stages wrote its own few scenarios there
    spent = recorded_spend(run.dir).usd - before
    return f"{calls} model calls, {dollars(spent)} spent"
