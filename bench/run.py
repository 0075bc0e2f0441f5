"""A run: one params file opened and validated, with its scenarios, its selected cells and its folder.

`open_run` is what notebooks and `bench sweep` call first. It validates everything that
can be validated without a model call (params, scenarios, template placeholders,
cells, run folder), so a mistake stops the run before anything is spent.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import paths
from .errors import ParamsError
from .llm import LLM, Limits
from .params import Cell, Sweep, load_sweep
from .preflight import preflight
from .records import Scenario
from .scenarios import build, write_scenarios
from .store import RunStore


@dataclass
class Run:
    """Everything a stage needs to know about one sweep run."""

    sweep: Sweep
    params_path: Path
    root: Path
    dir: Path
    scenarios: list[Scenario]
    cells: list[Cell]

    @property
    def store(self) -> RunStore:
        """Return the run's store (all shards merged when reading)."""
        return RunStore(self.dir)

    def describe(self) -> str:
        """Return a short human summary of the grid."""
        s = self.sweep
        n = len(self.cells) * len(self.scenarios) * s.samples
        return (f"sweep {s.name}: {len(self.cells)} cells ({len(s.models)} models × {len(s.prompts)} prompts"
                f"{', filtered' if len(self.cells) < len(s.cells()) else ''}) × {len(self.scenarios)} scenarios"
                f" × {s.samples} samples = {n} candidates; run folder {self.dir}")


def open_run(params: str | Path, cells: Any = None, run_dir: str | Path | None = None) -> Run:
    """Return the validated Run of a params file (no model is called); raise ParamsError on any mistake."""
    root = paths.project_root()
    sweep, params_path = load_sweep(paths.resolve(params, root))
    scenarios = build(sweep, params_path, root)
    folder = paths.resolve(run_dir, root) if run_dir else paths.run_dir(sweep.name, root)
    return Run(sweep, params_path, root, folder, scenarios, select_cells(sweep, cells))


def select_cells(sweep: Sweep, cells: Any) -> list[Cell]:
    """Return the cells named by ``cells`` (None = all; a list, or a JSON/YAML/comma-separated string).

    A cell is named ``model_id/prompt_id@version``; ``model_id`` alone or ``*/prompt_id@version``
    select a row or a column of the grid.
    """
    every = sweep.cells()
    if cells is None or cells == "" or cells == []:
        return every
    names = _as_list(cells)
    chosen, unknown = [], []
    for name in names:
        hits = [c for c in every if _matches(c, name)]
        (chosen.extend(hits) if hits else unknown.append(name))
    if unknown:
        raise ParamsError(f"unknown cell(s) {', '.join(map(repr, unknown))} for sweep {sweep.name}; "
                          f"cells are: {', '.join(c.key for c in every)}")
    return list({c.key: c for c in chosen}.values())


def _as_list(cells: Any) -> list[str]:
    if isinstance(cells, str):
        text = cells.strip()
        parsed = yaml.safe_load(text) if text.startswith("[") else [p.strip() for p in text.split(",")]
        return [str(x) for x in parsed]
    return [str(x) for x in cells]


def _matches(cell: Cell, name: str) -> bool:
    model, _, prompt = name.partition("/")
    return (model in ("*", cell.model.id)) and (not prompt or prompt in ("*", cell.prompt.key))


def make_llm(run: Run, max_concurrency: int | None = None) -> LLM:
    """Return the seam client for this run: the params' limits (or an override of the cap) and the shared cache."""
    lim = run.sweep.limits
    cap = int(max_concurrency) if max_concurrency else lim.max_concurrency
    return LLM(Limits(max_concurrency=cap, timeout_s=lim.timeout_s, retries=lim.retries),
               cache=str(paths.cache_path(run.root)))


def prepare(run: Run) -> None:
    """Check every model of the run (preflight), write its scenarios.jsonl and a copy of each judge's
    rubric (so reviews and reports of this run know the exact scales it was graded on); nothing is called."""
    specs = [c.model.spec() for c in run.cells] + [j.spec() for j in run.sweep.judges]
    preflight(specs)
    RunStore(run.dir).ensure_writable()
    write_scenarios(run.dir, run.scenarios)
    from .judging import load_judges  # noqa: PLC0415
    from .rubrics import snapshot_rubric  # noqa: PLC0415

    for judge in load_judges(run):
        snapshot_rubric(judge.rubric, run.dir)


async def run_collect(run: Run, *, max_concurrency: int | None = None, shard: str | None = None,
                      progress: str = "auto", judge: bool = False):
    """Run the collect stage for the run's cells; return its CollectResult.

    ``judge=True`` pipelines the judges of the params file: each new candidate is graded
    as it arrives, in the same event loop and under the same cap (what `bench sweep` does),
    so the wall time is close to max(collect, judge) rather than their sum.
    """
    from .collect import collect  # noqa: PLC0415

    prepare(run)
    llm = make_llm(run, max_concurrency)
    try:
        if not (judge and run.sweep.judges):
            return await collect(run.sweep, run.dir, run.scenarios, run.cells, llm, shard=shard or None,
                                 progress=progress)
        return await _collect_and_judge(run, llm, shard or None, progress)
    finally:
        await llm.aclose()


async def _collect_and_judge(run: Run, llm: LLM, shard: str | None, progress: str):
    from .collect import collect  # noqa: PLC0415
    from .judging import JudgeStream, load_judges  # noqa: PLC0415
    from .records import Judgment  # noqa: PLC0415
    from .store import BatchWriter  # noqa: PLC0415

    judges = load_judges(run)
    store = RunStore(run.dir, shard=shard)
    writer = BatchWriter(store)
    stream = JudgeStream(run, llm, judges, writer.add, store.done_ids(Judgment))
    writer_task = asyncio.ensure_future(writer.run())
    try:
        result = await collect(run.sweep, run.dir, run.scenarios, run.cells, llm, shard=shard, progress=progress,
                               sink=stream.feed)
        await stream.drain()
    finally:
        writer.stop()
        await writer_task
        writer.flush()
    return result


def cells_json(cells: list[Cell]) -> str:
    """Return cell keys as a JSON list (how `bench sweep` passes cells to papermill)."""
    return json.dumps([c.key for c in cells])


async def run_judge(run: Run, *, judges=None, max_concurrency: int | None = None, shard: str | None = None,
                    progress: str = "auto"):
    """Run the judge stage on the run's stored candidates (no collecting); return its JudgeResult.

    ``judges``: judge ids to run (None = every judge of the params file). Re-judging with a
    new judge or a new rubric version grades everything again under new ids; unchanged
    judgments are skipped.
    """
    from .judging import judge_stage, load_judges  # noqa: PLC0415

    chosen = load_judges(run, judges)
    preflight([j.entry.spec() for j in chosen])
    llm = make_llm(run, max_concurrency)
    try:
        return await judge_stage(run, llm, chosen, shard=shard or None, progress=progress)
    finally:
        await llm.aclose()
