"""A sweep's stages in order: collect (judging each answer as it arrives), then judge what is left.

Resumable; a stage with nothing to work on is refused saying what to run, and a crashed or halted stage stops
the stages after it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.core import paths
from bench.core.errors import BenchError
from bench.core.outcome import retry_command
from bench.core.records import Candidate, utc_now
from bench.judge.judgments import pending_judgments
from bench.estimate import before_sweep
from bench.core.digests import supersede
from bench.kernels import papermill
from bench.run import Run, open_run, shown_path
from bench.stage_runs import prepare
from bench.sweep.executions import STAGES, Execution, plan_executions, run_stage
from bench.sweep.shared import SharedLimits, SharedLocalServer


class RemoteStages(Protocol):
    """Stages run as tasks elsewhere (bench.sweep.cluster.ClusterStages): all the local path knows of them."""

    @property
    def loopback(self) -> bool:
        """Whether every worker is on this machine (then the driver serves them the embedded model)."""

    def slots(self) -> int:
        """Return how many executions run at once there (a group of cells per slot)."""

    def cache_folder(self) -> str:
        """Return the response cache the executions there read (the driver's estimate reads it too)."""

    def run_stage(self, stage: str, started: str) -> list[Execution]:
        """Run ``stage`` as one execution per group of cells, to its end; return them, as a local stage does."""


@dataclass
class SweepResult:
    """What a sweep did: its run folder and every execution with its exit code (0 = success)."""

    run_dir: Path
    executions: list[Execution]
    run: Run | None = None
    started: str = ""  # ISO time the sweep started


def run_sweep(run: Run | str, *, jobs: int = 1, per_cell: bool = False, cells=None,
              only_stage: str | None = None, run_dir: str | None = None,
              cluster: RemoteStages | None = None, on_start: Callable[[], None] | None = None) -> SweepResult:
    """Run the sweep's stages; return the run folder and every execution with its exit code.
    The caller holds the run lock; ``on_start`` is called once nothing refused the sweep."""
    threading.Thread(target=papermill, daemon=True).start()  # 0.3 s of imports, overlapped with prep
    started = utc_now()  # items that fail from now on are asked again by the next sweep, not by this one
    run = run if isinstance(run, Run) else open_run(run, cells=cells, run_dir=run_dir)
    check_stage(run, only_stage)  # a stage in the wrong order: one line saying what to run instead
    print(run.describe(), flush=True)
    stages = [only_stage] if only_stage else [s for s in STAGES if (s != "judge" or run.sweep.judges)
                                              and (s != "collect" or run.sweep.collects)]
    for stage in stages:
        if stage not in STAGES:
            raise BenchError(f"unknown stage {stage!r}; stages are: {', '.join(STAGES)}")
    model = SharedLocalServer(run) if cluster is None or cluster.loopback else contextlib.nullcontext()
    limits = SharedLimits(run, jobs, per_cell) if cluster is None else None
    changed = prepare(run, log_supersede=False)  # preflight + scenarios.jsonl: nothing spent on a run that fails
    executions = (plan_executions(run, "collect", jobs, per_cell) if cluster is None  # a cluster: a task per slot
                  else plan_executions(run, "collect", cluster.slots(), False, by_cell_name=True))
    before_sweep(run, only_stage=only_stage, groups=[[c.key for c in ex.cells] for ex in executions],
                 pilot=cluster is None, changed=changed, cache=cluster.cache_folder() if cluster else None)
    # the estimate (and pilot, not on a cluster): over limits.budget_usd is a BenchError before anything is sent
    supersede(run.dir, changed, shown_path(run.params_path))  # only now: a refused sweep sets nothing aside
    if on_start is not None:
        on_start()
    with model, limits or contextlib.nullcontext():  # the embedded model, the lease server: entered once prepared
        done = _run_stages(run, stages, jobs, per_cell, started, cluster, limits, only_stage)
    return SweepResult(run.dir, done, run, started)


def _run_stages(run: Run, stages: list[str], jobs: int, per_cell: bool, started: str, cluster: RemoteStages | None,
                limits: SharedLimits | None, only_stage: str | None) -> list[Execution]:
    """Run ``stages`` in order, each to its end; a stage after one that failed or stopped does not start."""
    done: list[Execution] = []
    for stage in stages:
        if halted := [e for e in done if e.halted]:  # e.g. the budget is reached: no paid call would start
            print(f"{stage}: not started, because {halted[0].name} stopped ({halted[0].halted}): "
                  f"see the summary at the end", flush=True)
            break
        if failed := [e.name for e in done if e.returncode != 0]:  # a later stage would work on a partial run
            print(f"{stage}: not started, because {', '.join(failed)} failed (see the notebook named below); "
                  f"fix it and run the sweep again", flush=True)
            break
        if (stage == "judge" and only_stage is None and run.sweep.collects
                and pending_judgments(run, failed_since=started) == 0):
            print("judge: nothing pending (every candidate was graded as it arrived)", flush=True)
            continue
        done += (cluster.run_stage(stage, started) if cluster is not None
                 else run_stage(run, stage, jobs, per_cell, started, limits.link if limits else None))
    return done


def check_stage(run: Run, stage: str | None) -> None:
    """Refuse (BenchError, exit 2) a stage that has nothing to work on yet, saying what to run first."""
    if stage is None:
        return
    if stage not in STAGES:
        raise BenchError(f"unknown stage {stage!r}; stages are: {', '.join(STAGES)}")
    params = shown_path(run.params_path)
    if stage == "collect" and not run.sweep.collects:
        raise BenchError(f"{params} has nothing to collect (its scenarios hold the responses to judge); "
                         f"judge them with: {_command(run, 'judge')}")
    if stage == "judge" and not run.sweep.judges:
        raise BenchError(f"{params} declares no judges, so there is nothing to judge; add one under `judges:` "
                         f"(see docs/judging.md), or collect only with: {_command(run, 'collect')}")
    if stage == "judge" and run.sweep.collects and not _collected(run):
        raise BenchError(f"nothing has been collected in {shown_path(run.dir)} yet, so there is nothing to judge; "
                         f"collect first with: {_command(run, 'collect')} (or run both stages, judging each "
                         f"answer as it arrives: {_command(run, None)})")


def _collected(run: Run) -> bool:
    """Return True if the run folder holds at least one successful answer of the run's cells."""
    keys = {c.key for c in run.cells}
    return any(c.ok and c.cell in keys
               for c in run.store.latest(Candidate).values())


def _command(run: Run, stage: str | None) -> str:
    """Return the `bench sweep` command of this run (its cells and run folder) for ``stage`` (None: every stage)."""
    cells = ",".join(c.key for c in run.cells) if len(run.cells) < len(run.sweep.cells()) else None
    folder = shown_path(run.dir) if run.dir != paths.run_dir(run.sweep.name, run.root) else None
    command = retry_command(shown_path(run.params_path), cells=cells, run_dir=None if run.dry_run else folder,
                            only_stage=stage)
    return f"{command} --dry-run" if run.dry_run else command
