"""The papermill executions of a stage: planned over the grid's cells, run side by side under one cap, stopped cleanly.

An execution reaches the run only through its papermill parameters; a failed one is reported with its saved
notebook and stops no other; one whose kernel raised ``Halted`` is reported as stopped with its ``exit_code``."""

from __future__ import annotations

import contextlib
import functools
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.config.params import Cell
from bench.core.executions import ExecutionAttempt, close_abandoned, local_marker, record_attempt
from bench.core.outcome import failed_by_cell
from bench.core.processes import remove_stale_folders
from bench.core.records import utc_now
from bench.core.progress import every_for
from bench.kernels import (KERNEL_ARGUMENTS, first_line, interrupt_kernel, kernel_manager_class, papermill,
                           prepare_driver)
from bench.models.ratelimit import LeaseServer
from bench.run import Link, Run
from bench.stage_runs import DRAIN_S, lost_in
from bench.sweep.halts import halted_exit_code

STAGES = {"collect": "01_collect.ipynb", "judge": "02_judge.ipynb"}
CLUSTER_FOLDER = "bench-dask-"  # + the driver's pid: a local:N cluster's certificate and logs (bench.sweep.cluster)
GRACE_S = DRAIN_S + 20.0  # the most a first Ctrl-C waits for the executions to end (each stage drains DRAIN_S)
HURRY_S = 5.0  # the most a second Ctrl-C waits for them to save what they have and end


@dataclass
class Execution:
    """One papermill execution of a stage notebook over some cells."""

    stage: str
    cells: list[Cell]
    shard: str | None
    notebook: Path = field(default=Path())
    returncode: int | None = None
    seconds: float = 0.0
    error: str = ""
    failed_since: str | None = None  # the sweep's start: what failed since is asked again by the next sweep
    kernel: Any = None  # its kernel manager, once the kernel is started (an interrupt is sent to it)
    finished: threading.Event = field(default_factory=threading.Event)  # set when its thread is done
    attempts: list[dict] = field(default_factory=list)  # a cluster sweep's attempts of it (bench.sweep.cluster.remote)
    halted: str = ""  # the Halted its kernel raised (e.g. BudgetReached): stopped on purpose, not crashed
    told: int = 0  # the Ctrl-Cs its kernel was sent (interrupt_kernel)
    lost: int = 0  # the replies in flight its interrupted stage gave up (a second Ctrl-C)

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.shard}" if self.shard else self.stage


def close_leftovers(run: Run, sweep: str) -> None:
    """Close what a killed driver left (the caller holds the run lock): its unrecorded attempts, recorded as lost, and
    this user's private temporary folders whose owner is dead."""
    LeaseServer.remove_stale()
    remove_stale_folders(CLUSTER_FOLDER)
    if closed := close_abandoned(run.dir, sweep):
        print(f"{closed} execution attempt(s) a stopped sweep never recorded are now recorded as lost "
              f"(executions.jsonl)", flush=True)


def plan_executions(run: Run, stage: str, jobs: int, per_cell: bool, by_cell_name: bool = False) -> list[Execution]:
    """Return the executions of a stage: one, ``jobs`` groups of cells (``group_cells``), or one per cell.
    With ``by_cell_name``, one-cell groups are named by their cell; other groups are ``job1``, ``job2``…"""
    cells = run.cells
    if per_cell:
        groups = [[c] for c in cells]
    elif jobs <= 1 or len(cells) <= 1:  # a pair dataset has no cells: one execution judges it
        groups = [cells]
    else:
        groups = group_cells(cells, jobs)
    if len(groups) == 1 and not per_cell:
        shards: list[str | None] = [None]
    elif per_cell or (by_cell_name and all(len(g) == 1 for g in groups)):
        shards = list(_unique([_slug(g[0].key) for g in groups]))
    else:
        shards = [f"job{i + 1}" for i in range(len(groups))]
    out = []
    for group, shard in zip(groups, shards):
        ex = Execution(stage, group, shard)
        ex.notebook = run.dir / "notebooks" / f"{Path(STAGES[stage]).stem}{'.' + shard if shard else ''}.ipynb"
        out.append(ex)
    return out


def group_cells(cells: list[Cell], n: int) -> list[list[Cell]]:
    """Deal ``cells`` into at most ``n`` groups, each model's cells in turn across them.
    Groups differ by at most one cell and mix models, so an execution keeps several endpoints busy at once."""
    n = max(1, min(n, len(cells)))
    by_model: dict[str, list[Cell]] = {}
    for c in cells:
        by_model.setdefault(c.model.id, []).append(c)
    groups: list[list[Cell]] = [[] for _ in range(n)]
    dealt = 0
    # the model that needs longest at its cap first: its cells are the ones spread most evenly over the slots
    for model_cells in sorted(by_model.values(), key=lambda mc: -len(mc) / (mc[0].model.max_concurrency or 1e9)):
        for c in model_cells:
            groups[dealt % n].append(c)
            dealt += 1
    return groups


def _unique(names: list[str]) -> list[str]:
    """Return ``names`` with a repeat suffixed ``-2``, ``-3``… (two cell keys can slug alike: a/b_c, a_b/c)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def _slug(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in key).replace("@", "-")


def run_stage(run: Run, stage: str, jobs: int, per_cell: bool, started: str | None = None,
              link: Link | None = None) -> list[Execution]:
    """Run a stage's executions, ``parallel`` at a time, to their end; return them. ``link``: what the driver
    shares with every execution (its lease server, the sweep's cap, the run lock it holds: bench.sweep.shared)."""
    sweep = secrets.token_hex(6)  # this stage's id in the open records of its attempts
    close_leftovers(run, sweep)
    link = link or Link(lock_held=True)
    executions = plan_executions(run, stage, jobs, per_cell)
    for ex in executions:
        ex.failed_since = started
    cap = run.sweep.limits.max_concurrency
    parallel = max(1, min(jobs if per_cell else len(executions), len(executions), cap))
    if link.sweep_cap and parallel > 1:  # the lease server holds the cap for all of them at once
        share = cap
        print(f"{stage}: {len(executions)} execution(s), {parallel} at a time, cap {cap} across all of them",
              flush=True)
    else:
        share = max(1, cap // parallel)  # the sweep as a whole never exceeds the cap
        print(f"{stage}: {len(executions)} execution(s), {parallel} at a time, cap {share} each", flush=True)
    sem = threading.Semaphore(parallel)
    prepare_driver()
    stop = threading.Event()  # set by a Ctrl-C: no execution starts any more
    for ex in executions:
        threading.Thread(target=_guarded, args=(sem, run, ex, notebook_parameters(run, ex, link, share), stop, sweep),
                         daemon=True).start()
    try:  # events, not Thread.join: a join interrupted by Ctrl-C marks a running thread as stopped (bpo-45274)
        while running := [ex for ex in executions if not ex.finished.is_set()]:
            hear_ctrl_c()  # again: MLflow's thread may have imported polars since
            running[0].finished.wait(timeout=POLL_S)
    except KeyboardInterrupt:  # Ctrl-C: the kernels (in their own sessions) did not get it; stop them cleanly
        raise _stop(executions, stop) from None
    return executions


def notebook_parameters(run: Run, ex: Execution, link: Link, cap: int | None) -> dict[str, Any]:
    """Return the papermill parameters of ``ex``'s stage notebook: the run, ``cap``, shard, progress and ``link``.
    Never a secret: the executed notebook keeps them."""
    params = {"params": str(run.params_path), "grid_cells": [c.key for c in ex.cells], "run_dir": str(run.dir),
              "dry_run": run.dry_run, "batch": run.batch, "supersede": run.supersede, "max_concurrency": cap,
              "shard": ex.shard, "progress": "sweep", "progress_every_s": every_for(sys.stdout),
              "lease_server": link.lease_server, "sweep_cap": link.sweep_cap, "shared_budget": link.shared_budget,
              "lock_held": link.lock_held}
    if ex.stage == "collect":
        params["judge"] = bool(run.sweep.judges)  # pipelined: judging consumes candidates as they arrive
    else:
        params["failed_since"] = ex.failed_since
    return params


POLL_S = 0.25  # the longest a Ctrl-C waits for the driver to hear it, whatever a library did to SIGINT


def hear_ctrl_c() -> None:
    """Let Ctrl-C end the driver's waits at once: drop SA_RESTART from polars' SIGINT handler (pola-rs/polars#21739)."""
    signal.siginterrupt(signal.SIGINT, True)


class SweepInterrupted(KeyboardInterrupt):
    """A sweep's Ctrl-C once its executions were stopped: the replies in flight they gave up (``lost``), the
    executions still running when the driver stopped waiting (``running``: their requests in flight die with them),
    and whether a second Ctrl-C asked to stop at once (``hurried``: the driver then waits for nothing else)."""

    def __init__(self, lost: int = 0, running: list[str] | None = None, hurried: bool = False) -> None:
        super().__init__()
        self.lost, self.running, self.hurried = lost, running or [], hurried


def stop_in_two(tell: Callable[[int, float], None]) -> bool:
    """Stop a sweep's executions after a Ctrl-C, in two steps; return whether a second Ctrl-C came.

    First a SIGINT each: stages send nothing new and save what is in flight (GRACE_S in all). A second: stages give
    up what is in flight. A third waits no more (the kernels die with the driver)."""
    hear_ctrl_c()
    print(f"Ctrl-C: no new request is sent; the requests in flight finish and are saved (at most {DRAIN_S:.0f}s); "
          f"Ctrl-C again to stop at once and lose them", flush=True)
    try:
        tell(1, GRACE_S)
        return False
    except KeyboardInterrupt:
        print("Ctrl-C again: stopping at once; the replies still in flight are lost", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            tell(2, HURRY_S)
        return True


def _stop(executions: list[Execution], stop: threading.Event) -> SweepInterrupted:
    """Start no execution any more and stop the running ones (:func:`stop_in_two`); return the interrupt to raise."""
    stop.set()
    hurried = stop_in_two(functools.partial(_tell, executions))
    return SweepInterrupted(sum(ex.lost for ex in executions),
                            [ex.name for ex in executions if not ex.finished.is_set()], hurried)


def _tell(executions: list[Execution], times: int, grace_s: float) -> None:
    """Interrupt each running execution's kernel until told ``times`` times; wait at most ``grace_s`` for all to end."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (running := [ex for ex in executions if not ex.finished.is_set()]):
        for ex in running:
            if ex.told < times and interrupt_kernel(ex):
                ex.told += 1
        running[0].finished.wait(timeout=POLL_S)


def _guarded(sem: threading.Semaphore, run: Run, ex: Execution, params: dict[str, Any], stop: threading.Event,
             sweep: str = "") -> None:
    """Run ``ex`` in this thread once it has a slot of ``sem``, unless the sweep was stopped."""
    try:
        with sem:
            if not stop.is_set():  # an interrupted sweep starts no further execution
                _execute(run, ex, params, stop, sweep)
    finally:
        ex.finished.set()


def _execute(run: Run, ex: Execution, params: dict[str, Any], stop: threading.Event, sweep: str = "") -> None:
    """Run one papermill execution in this thread, streaming its marked output prefixed with its name."""
    pm = papermill()  # imported once by the driver

    threading.current_thread().name = ex.name
    ex.notebook.parent.mkdir(parents=True, exist_ok=True)
    t0, started = time.monotonic(), utc_now()
    cells = [c.key for c in ex.cells]
    marker = local_marker(run.dir, ExecutionAttempt(ex.stage, ex.name, cells, started, "", "running"), sweep)
    try:
        pm.execute_notebook(str(run.root / "notebooks" / STAGES[ex.stage]), str(ex.notebook), parameters=params,
                            kernel_name="python3", log_output=True, progress_bar=False, cwd=str(run.root),
                            kernel_manager_class=kernel_manager_class(ex, stop), extra_arguments=KERNEL_ARGUMENTS,
                            shutdown_kernel="immediate")
        ex.returncode = 0
    except Exception as err:  # the executed notebook (saved by papermill) shows the failing cell
        stopped(ex, err)
    ex.seconds = time.monotonic() - t0
    status = "ok" if ex.returncode == 0 else "interrupted" if ex.halted or stop.is_set() else "failed"
    record_attempt(run.dir, ExecutionAttempt(ex.stage, ex.name, cells, started, utc_now(), status))
    if marker is not None:
        marker.unlink(missing_ok=True)  # recorded: nothing is left open


def stopped(ex: Execution, err: BaseException) -> None:
    """Set an execution's return code and error from what its notebook raised: a Halted's own exit code, else 1."""
    ename = getattr(err, "ename", None)  # papermill's PapermillExecutionError: the kernel's exception class
    code = halted_exit_code(ename)
    ex.lost = lost_in(str(getattr(err, "evalue", "") or ""))  # an interrupted stage's line: replies it gave up
    if code is None:
        ex.returncode, ex.error = 1, f"{type(err).__name__}: {first_line(err)}"
    else:
        ex.returncode, ex.halted = code, str(ename)
        ex.error = f"{ename}: {' '.join(str(getattr(err, 'evalue', '') or first_line(err)).split())}"


def crashed(executions: list[Execution]) -> list[Execution]:
    """Return the executions that failed (a crash), not those that stopped on purpose (a Halted)."""
    return [e for e in executions if e.returncode != 0 and not e.halted]


def print_executions(executions: list[Execution], run_dir: Path | None = None) -> int:
    """Print one line per execution; return 1 if any crashed, else the first halted one's code, else 0.
    "ok" only when none of its own cells' items is failed, else "finished, N item(s) failed"."""
    by_cell = failed_by_cell(run_dir) if run_dir is not None and any(e.returncode == 0 for e in executions) else {}
    for ex in executions:
        failed = _failed_items(ex, by_cell)
        status = ((f"finished, {failed} item(s) failed: see the summary below" if failed else "ok")
                  if ex.returncode == 0 else f"STOPPED ({ex.halted}): see the summary below" if ex.halted
                  else f"FAILED ({ex.error}): see {ex.notebook}")
        print(f"  {ex.name}: {status} [{ex.seconds:.1f}s]")
    if crashed(executions):
        return 1
    return next((int(e.returncode or 1) for e in executions if e.halted), 0)


def _failed_items(ex: Execution, by_cell: dict[str, dict[str, int]]) -> int:
    """Return the failed items an execution answers for (``failed_by_cell`` of its cells and stage)."""
    stages = ("collect", "judge") if ex.stage == "collect" else (ex.stage,)
    return sum(by_cell.get(c.key, {}).get(stage, 0) for c in ex.cells for stage in stages)
