"""A run: one params file opened and validated, with its scenarios, its selected cells and its folder.

`open_run` is what notebooks and `bench sweep` call first. It validates everything that
can be validated without a model call (params, scenarios, template placeholders,
cells, run folder), so a mistake stops the run before anything is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bench.collect import CollectResult, answer_counts, collect
from bench.config.params import Cell, Sweep, load_sweep
from bench.config.rubrics import snapshot_rubric
from bench.config.scenarios import build, planned_count, write_scenarios
from bench.core import paths
from bench.core.digests import Digest, check_digests, supersede
from bench.core.errors import ParamsError
from bench.core.journal import Journal, settle
from bench.core.migrate import migrate_run
from bench.core.progress import Progress, _in_kernel, requests_on_the_wire, say
from bench.core.records import Judgment, Scenario
from bench.core.rescue import import_rescued
from bench.core.runlock import run_lock
from bench.core.store import RunStore
from bench.core.writer import BatchWriter, Halt
from bench.judge.grader import Judge
from bench.judge.stage import JudgeResult, judge_stage, judgment_counts, load_judges
from bench.judge.stream import JudgeStream
from bench.models.budget import Budget
from bench.models.cache import open_cache
from bench.models.client import LLM
from bench.models.dry import dry_model
from bench.models.genparams import param_problems
from bench.models.preflight import preflight


BATCH_ENV = "BENCH_BATCH"  # "1": every model and judge through its provider's Batch API (bench sweep --batch)
SUPERSEDE_ENV = "BENCH_SUPERSEDE"  # "1": a changed cell, judge or rubric version sets its earlier records aside


@dataclass
class Run:
    """Everything a stage needs to know about one sweep run."""

    sweep: Sweep
    params_path: Path
    root: Path
    dir: Path
    scenarios: list[Scenario]
    cells: list[Cell]
    dry_run: bool = False  # every model and judge answered by dry/<id> (bench sweep --dry-run)
    supersede: bool = False  # a changed cell, judge or rubric version supersedes its records (--supersede)

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


def open_run(params: str | Path, cells: Any = None, run_dir: str | Path | None = None, *,
             dry_run: bool = False, batch: bool | None = None, supersede: bool | None = None) -> Run:
    """Return the validated Run of a params file (no model is called); raise ParamsError on any mistake.

    ``dry_run`` swaps every model and judge for its ``dry/`` stand-in (see :func:`dry_sweep`): the whole
    pipeline runs at no cost, into ``runs/<name>-dry`` (a ``run_dir`` is refused: a dry run never
    writes where real results are). ``batch`` (default: ``$BENCH_BATCH``, which `bench sweep --batch` sets
    for its kernels) sends every model's and judge's requests through its provider's Batch API. ``supersede``
    (default: ``$BENCH_SUPERSEDE``; always for a dry run, which costs nothing) lets a stage give a cell, judge or
    rubric version of the run folder a new content, setting its earlier records aside (see :func:`check_contents`).
    """
    root = paths.project_root()
    sweep, params_path = load_sweep(paths.resolve(params, root))
    if (os.environ.get(BATCH_ENV) == "1" if batch is None else batch) and not dry_run:
        sweep = batched_sweep(sweep, params_path)
    if dry_run:
        if run_dir and Path(run_dir).name != dry_name(sweep.name):
            raise ParamsError(f"--dry-run writes to runs/{sweep.name}-dry, never to another run folder: "
                              f"drop --run-dir {run_dir}")
        sweep = dry_sweep(sweep, params_path)
    problems = param_problems([(f"models[{i}]", m) for i, m in enumerate(sweep.models)]
                              + [(f"judges[{i}]", j) for i, j in enumerate(sweep.judges)])
    if problems:
        raise ParamsError("\n".join(f"{params_path}: {p}" for p in problems))
    chosen = select_cells(sweep, cells)
    _check_size(sweep, len(chosen), planned_count(sweep), params_path)  # before a huge grid is built
    scenarios = build(sweep, params_path, root)
    _check_size(sweep, len(chosen), len(scenarios), params_path)  # a dataset's size is known once read
    folder = paths.resolve(run_dir, root) if run_dir else paths.run_dir(sweep.name, root)
    supersede = os.environ.get(SUPERSEDE_ENV) == "1" if supersede is None else supersede
    return Run(sweep, params_path, root, folder, scenarios, chosen, dry_run, bool(supersede or dry_run))


def batched_sweep(sweep: Sweep, params_path: Path) -> Sweep:
    """Return ``sweep`` with ``batch: true`` on every model and judge that has no ``batch:`` settings of its own."""
    data = sweep.model_dump(exclude_none=True)
    for axis in ("models", "judges"):
        for entry in data[axis]:
            entry["batch"] = entry.get("batch") or True
    try:
        return Sweep.model_validate(data)
    except ValidationError as err:  # cannot happen for a valid sweep; said plainly if it does
        raise ParamsError(f"{params_path}: --batch: {err}") from None


def dry_name(name: str) -> str:
    """Return the name of a sweep's dry run (its run folder, report and MLflow experiment): ``<name>-dry``."""
    return f"{name[:60]}-dry"


def dry_sweep(sweep: Sweep, params_path: Path) -> Sweep:
    """Return ``sweep`` with every model and judge answered in-process by ``dry/<id>`` (no server, no cost).

    Each entry's model string becomes ``dry/<its id>``, so entries that differ only in endpoint stay
    distinct; endpoints, keys, rate caps and prices are dropped (a dry reply needs none). Prompts,
    scenarios, rubrics and modes stay, so every stage, the report and tracking run as they will for real.
    The sweep is renamed ``<name>-dry``: its run folder, report and MLflow experiment never mix with real ones.
    """
    def dry(entry: Any) -> dict[str, Any]:
        data = entry.model_dump(exclude_none=True)
        for key in ("api_base", "api_key_env", "transport", "rpm", "tpm", "price", "batch"):
            data.pop(key, None)
        return {**data, "model": dry_model(entry.id)}

    data = sweep.model_dump(exclude_none=True)
    try:
        return Sweep.model_validate({**data, "name": dry_name(sweep.name), "models": [dry(m) for m in sweep.models],
                                     "judges": [dry(j) for j in sweep.judges]})
    except ValidationError as err:  # not expected: the real sweep validated; say which file, never a traceback
        raise ParamsError(f"{params_path}: --dry-run could not stand in for its models: {err}") from err


def _check_size(sweep: Sweep, cells: int, scenarios: int | None, params_path: Path) -> None:
    """Refuse a grid that plans more answers than ``limits.max_items`` (a typo must not plan 10^8 of them)."""
    if scenarios is None:
        return
    items = max(cells, 1) * scenarios * sweep.samples
    if items > sweep.limits.max_items:
        raise ParamsError(f"{params_path}: the grid plans {items:,} answers ({cells} cells × {scenarios:,} scenarios "
                          f"× {sweep.samples:,} samples), more than limits.max_items = {sweep.limits.max_items:,}; "
                          f"shrink it, or raise limits.max_items if you mean it")


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
    llm = LLM(lim.model_copy(update={"max_concurrency": cap}), cache=open_cache(root=run.root))  # file or shards
    llm.batch_dir = run.dir / "batches"  # the provider batches of batched models (bench.models.batches.ledger)
    llm.journal = Journal(run.dir)  # the requests on the wire (a file only once one is sent): see bench.core.journal
    if lim.budget_usd is not None:  # every paid request reserves its worst case first (bench.models.budget)
        llm.budget = Budget(lim.budget_usd, run.dir, shown_path(run.params_path))
    return llm


@contextlib.asynccontextmanager
async def _stage_llm(run: Run, max_concurrency: int | None) -> AsyncIterator[LLM]:
    """The seam client of one stage: counts what an earlier stop makes this run ask again, closes cleanly.

    First the leftover request journals of stopped runs are settled (their uncached
    requests are added to ``repeats.json``); at the end the cache is flushed, the sessions
    closed and this process's journal removed, unless the stage was interrupted (then
    requests may have been in flight: the journal stays for the next run to count).
    """
    llm = make_llm(run, max_concurrency)
    settle(run.dir, llm.cache)
    interrupted = False
    try:
        yield llm
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
        raise
    finally:
        await llm.aclose()
        llm.journal.close(keep=interrupted)


def prepare(run: Run, *, judges: bool = True, log_supersede: bool = True) -> list[tuple[Digest, str]]:
    """Check that no cell (nor judge and rubric version, when ``judges`` grade in this stage) changed content
    in the run folder (:func:`check_contents`) and every model of the run (preflight), write its scenarios.jsonl
    and a copy of each judge's rubric (so reviews and reports of this run know the exact scales it was graded
    on); nothing is called. Return the contents ``--supersede`` changes: logged here, or by the caller once
    nothing can stop the sweep before its first answer (``log_supersede=False``: the driver, whose budget
    check comes next), since a logged choice sets the earlier records aside from every analysis."""
    every = load_judges(run)
    changed = check_contents(run, every if judges else [])
    specs = [c.model.spec() for c in run.cells] + [j.spec() for j in run.sweep.judges]
    preflight(specs)
    RunStore(run.dir).ensure_writable()
    if log_supersede:
        supersede(run.dir, changed, shown_path(run.params_path))
    import_rescued(run.dir)  # records a full disk made an earlier run save outside the run folder
    rekey(run)
    write_scenarios(run.dir, run.scenarios)
    for judge in every:
        snapshot_rubric(judge.rubric, run.dir)
    return changed


def check_contents(run: Run, judges: list[Judge]) -> list[tuple[Digest, str]]:
    """Return the run's cells, ``judges`` and their rubric versions whose content differs from what the run folder
    holds under the same name, when ``run.supersede`` allows it; else raise ParamsError (exit 2, before any call)
    naming each, both digests and the two ways out (bench.core.digests)."""
    planned = [c.digest for c in run.cells] + [d for j in judges for d in j.digests]
    return check_digests(run.dir, planned, shown_path(run.params_path), supersede=run.supersede)


def rekey(run: Run) -> None:
    """Re-key records written before ids included the endpoint (see bench.core.migrate); says so when it did."""
    n = migrate_run(run.dir, {m.id: m for m in run.sweep.models}, {j.id: j for j in run.sweep.judges})
    if n:
        print(f"{run.dir}: re-keyed {n} records written before ids included the endpoint "
              f"(originals in {run.dir / '.schema1-backup'})", flush=True)


async def run_collect(run: Run, *, max_concurrency: int | None = None, shard: str | None = None,
                      progress: str = "auto", judge: bool = False) -> CollectResult:
    """Run the collect stage for the run's cells; return its CollectResult.

    ``judge=True`` pipelines the judges of the params file: each new candidate is graded
    as it arrives, in the same event loop and under the same cap (what `bench sweep` does),
    so the wall time is close to max(collect, judge) rather than their sum.
    """
    pipelined = bool(judge and run.sweep.judges)
    with _interrupts_say(run, answers=True, judges=pipelined, stage="run_collect"), run_lock(run.dir):
        prepare(run, judges=pipelined)
        async with _stage_llm(run, max_concurrency) as llm:
            if not pipelined:
                result = await collect(run.sweep, run.dir, run.scenarios, run.cells, llm, shard=shard or None,
                                       progress=progress)
            else:
                result = await _collect_and_judge(run, llm, shard or None, progress)
    if progress != "none":
        say(result)  # the stage's one line (what `bench sweep` shows in the terminal)
    return result


async def _collect_and_judge(run: Run, llm: LLM, shard: str | None, progress: str) -> CollectResult:
    judges = load_judges(run)
    store = RunStore(run.dir, shard=shard)
    halt = Halt()  # a failed write of either stage stops both from issuing calls
    writer = BatchWriter(store, halt=halt)
    # one bar per judge, its total growing as answers arrive; "judging" once collect is done and the rest is graded
    bar = Progress("judge", {j.entry.id: 0 for j in judges}, mode=progress, growing=True,
                   wire=requests_on_the_wire(llm))

    def emit(j: Judgment) -> None:
        writer.add(j)
        bar.update(j.judge_id, failed=not j.ok)

    stream = JudgeStream(run, llm, judges, emit, store.done_ids(Judgment), halt=halt, planned=bar.grow)
    writer_task = asyncio.ensure_future(writer.run())
    try:
        result = await collect(run.sweep, run.dir, run.scenarios, run.cells, llm, shard=shard, progress=progress,
                               sink=stream.feed, halt=halt)
        bar.phase("judging")
        await stream.drain()
    finally:
        await stream.settle(cancel=not halt)  # no grading outlives the session: paid ones finish, and are kept
        bar.close()
        writer.stop()
        await writer_task
        writer.flush()
    halt.check()  # one message for both stages: the error, what was saved where, what to do
    return result


def cells_json(cells: list[Cell]) -> str:
    """Return cell keys as a JSON list (how `bench sweep` passes cells to papermill)."""
    return json.dumps([c.key for c in cells])


async def run_judge(run: Run, *, judges: str | Iterable[str] | None = None, max_concurrency: int | None = None,
                    shard: str | None = None, progress: str = "auto", failed_since: str | None = None) -> JudgeResult:
    """Run the judge stage on the run's stored candidates (no collecting); return its JudgeResult.

    ``judges``: judge ids to run (None = every judge of the params file). Re-judging with a
    new judge or a new rubric version grades everything again under new ids; unchanged
    judgments are skipped; failures are asked again, except those that failed since ``failed_since``
    (`bench sweep` passes its start, so one sweep asks each item once).
    """
    chosen = load_judges(run, judges)
    preflight([j.entry.spec() for j in chosen])
    with _interrupts_say(run, answers=False, judges=chosen, stage="run_judge"), run_lock(run.dir):
        import_rescued(run.dir)
        rekey(run)
        supersede(run.dir, check_contents(run, chosen), shown_path(run.params_path))  # else refused: exit 2
        async with _stage_llm(run, max_concurrency) as llm:
            result = await judge_stage(run, llm, chosen, shard=shard or None, progress=progress,
                                       failed_since=failed_since)
    if progress != "none":
        say(result)  # the stage's one line (what `bench sweep` shows in the terminal)
    return result


class Interrupted(asyncio.CancelledError):
    """A stage stopped by an interrupt (Ctrl-C, JupyterLab's "Interrupt kernel"); its message is one line:
    what was saved, what is left and how to resume.

    A notebook shows that line instead of a traceback (IPython's ``_render_traceback_``). Being
    a CancelledError, it still cancels the task it ends (``asyncio.run`` turns it into KeyboardInterrupt).
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def interrupted_line(run: Run, resume: str, *, answers: bool = True, judges: bool | list[Judge] = True) -> str:
    """Return the one line an interrupt prints: answers and judgments saved (of planned), what is left, ``resume``.

    ``judges``: True (every judge of the params file), a list of bench.judge.Judge, or False (no judgments).
    """
    saved, left = [], []
    if answers and run.sweep.collects:
        done, planned = answer_counts(run.sweep, run.dir, run.scenarios, run.cells)
        saved.append(f"{done} of {planned} answers")
        left += [f"{planned - done} answers"] if planned > done else []
    judges = load_judges(run) if judges is True else judges or []
    if judges:
        done, planned = judgment_counts(run, judges)
        saved.append(f"{done} of {planned} judgments")
        left += [f"{planned - done} judgments"] if planned > done else []
    return (f"interrupted: {' and '.join(saved) or 'nothing'} saved in {shown_path(run.dir)}; "
            f"{' and '.join(left) or 'nothing'} left; {resume}")


def shown_path(path: Path) -> str:
    """Return ``path`` relative to the working directory when it lies under it (as a user would type it)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


@contextlib.contextmanager
def _interrupts_say(run: Run, *, answers: bool, judges: bool | list[Judge], stage: str) -> Iterator[None]:
    """Turn an interrupt of a stage into Interrupted: one line saying what was saved, what is left, how to resume."""
    try:
        yield
    except Interrupted:
        raise
    except (KeyboardInterrupt, asyncio.CancelledError):
        again = "run this cell again to resume" if _in_kernel() else f"call bench.{stage} again to resume"
        try:
            line = interrupted_line(run, again, answers=answers, judges=judges)
        except Exception:  # counting must never hide the interrupt itself
            line = f"interrupted: what was answered is saved in {shown_path(run.dir)}; {again}"
        raise Interrupted(line) from None
