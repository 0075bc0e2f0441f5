"""A stage of a sweep as Dask tasks: one per group of cells (a group per worker thread), the report as one more.

The driver waits showing progress, then records every attempt in ``executions.jsonl`` (``lost`` when its worker
died, ``interrupted`` by Ctrl-C), matched to this sweep by its id."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import time
import warnings
from concurrent.futures import CancelledError
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError
from bench.core.executions import ExecutionAttempt, driver_name, record_attempt
from bench.core.paths import reports_root
from bench.core.records import utc_now
from bench.core.runlock import run_lock
from bench.core.store import os_reason
from bench.run import Run
from bench.stage_runs import lost_in, prepare
from bench.sweep.cluster import remote
from bench.sweep.cluster.progress import ClusterProgress
from bench.sweep.cluster.session import ClusterLost, ClusterSession, cluster_address
from bench.sweep.executions import (POLL_S, STAGES, Execution, SweepInterrupted, close_leftovers, hear_ctrl_c,
                                    notebook_parameters, plan_executions, print_executions, stop_in_two)

RETRIES = 2  # a task that raised (its kernel died, the folder went away) runs again, on any worker
REPORT = "report/index.html"  # where a worker renders the report: in the run folder, which every worker shares


def run_on_cluster(run: Run, stage: str, cluster: str | None = None, *, judge: bool | None = None,
                   judges: list[str] | None = None) -> list[Execution]:
    """Run one stage of ``run`` as Dask tasks from a notebook, the run folder locked and the workers checked first.
    ``cluster``: a scheduler address or ``local:N`` (default ``$DASK_SCHEDULER_ADDRESS``); a failed execution raises."""
    address = cluster_address(cluster)
    if not address:
        raise BenchError(f"no cluster to run {stage} on: pass cluster='tcp://<scheduler>:8786' or 'local:N', "
                         f"or set DASK_SCHEDULER_ADDRESS")
    with run_lock(run.dir), ClusterSession(address, run) as session:
        prepare(run)
        executions = run_stage_on_cluster(session, stage, utc_now(), judge=judge, judges=judges)
    if print_executions(executions, run.dir):
        raise BenchError(f"{stage}: an execution failed on the cluster (its notebook is named above)")
    return executions


def run_stage_on_cluster(session: ClusterSession, stage: str, started: str, *, judge: bool | None = None,
                         judges: list[str] | None = None) -> list[Execution]:
    """Run a stage as Dask tasks, one per group of cells (a pair dataset: one task); return its executions."""
    run = session.run
    close_leftovers(run, session.sweep)  # what a killed driver left open
    executions: list[Execution] = []
    futures: dict[str, Any] = {}
    try:
        executions = _round_robin(plan_executions(session.run, stage, session.slots(), False, by_cell_name=True))
        submit_stage(session, executions, started, futures, judge=judge, judges=judges)
        print(f"{stage}: {len(executions)} execution(s) on the cluster at {session.address} "
              f"({len(session.workers)} worker(s)); cap {run.sweep.limits.max_concurrency} across all of them",
              flush=True)
        _wait(session, list(futures.values()), ClusterProgress.for_run(run))
    except KeyboardInterrupt:  # also during the submissions: every task submitted interrupts its kernel
        hurried = _stop(session, list(futures.values()))
        _settle_all(session, executions, futures, interrupted=True)
        raise SweepInterrupted(sum(lost_in(ex.error) for ex in executions),
                               [n for n, f in futures.items() if not f.done()], hurried) from None
    except ClusterLost:
        _settle_all(session, executions, futures, interrupted=False)
        raise
    _settle_all(session, executions, futures, interrupted=False)
    return executions


def submit_stage(session: ClusterSession, executions: list[Execution], started: str, futures: dict[str, Any], *,
                 judge: bool | None = None, judges: list[str] | None = None) -> None:
    """Submit one task per execution, in order (with fewer slots than cells, every model gets some), into
    ``futures`` (by execution name: a Ctrl-C mid-way still finds those submitted)."""
    for i, ex in enumerate(executions):
        task = _task(session, ex, started, judge, judges)
        futures[ex.name] = session.client.submit(remote.execute, task, key=f"bench-{ex.name}-{secrets.token_hex(4)}",
                                                 retries=RETRIES, pure=False, priority=len(executions) - i)


@dataclass
class ClusterStages:
    """A sweep's stages and its report as Dask tasks on one connected session: what `bench sweep --cluster`
    hands the local driver in place of its kernels (``bench.sweep.driver.RemoteStages``)."""

    session: ClusterSession

    @property
    def loopback(self) -> bool:
        """Whether every worker is on this machine (then the driver serves them the embedded model)."""
        return self.session.loopback

    def slots(self) -> int:
        """Return how many executions the cluster runs at once (its workers' threads)."""
        return self.session.slots()

    def cache_folder(self) -> str:
        """Return the workers' response cache (a folder: see ``ClusterSession.cache_folder``)."""
        return self.session.cache_folder()

    def run_stage(self, stage: str, started: str) -> list[Execution]:
        """Run ``stage`` as one task per group of cells; return its executions (see :func:`run_stage_on_cluster`)."""
        return run_stage_on_cluster(self.session, stage, started)

    def report(self) -> Path:
        """Render the run's report on a worker; return its copy on this machine (see :func:`report_on_cluster`)."""
        return report_on_cluster(self.session)


def report_on_cluster(session: ClusterSession) -> Path:
    """Render the run's report on a worker into the shared run folder; copy it to our reports folder, return that."""
    rendered = session.run.dir / REPORT
    future = session.client.submit(remote.report_task, str(session.run.dir), str(rendered), retries=RETRIES, pure=False)
    _wait(session, [future], None)
    try:
        future.result()
        target = reports_root() / session.run.dir.name / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rendered, target)
    except OSError as exc:
        raise BenchError(f"the report rendered on the cluster cannot be copied from {rendered} ({os_reason(exc)})")
    except Exception as exc:  # the task raised on every retry, or its worker was lost too often
        raise BenchError(f"the report could not be rendered on the cluster ({type(exc).__name__}: {exc})") from None
    return target


def _round_robin(executions: list[Execution]) -> list[Execution]:
    """Order executions one cell per model in turn (m1, m2, m3, m1, …), so the first ones to run cover every
    endpoint: a model's cap is shared by all its cells, so two of its cells at once gain nothing."""
    by_model: dict[str, list[Execution]] = {}
    for ex in executions:
        by_model.setdefault(ex.cells[0].model.id if len(ex.cells) == 1 else "", []).append(ex)
    queues = list(by_model.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def _task(session: ClusterSession, ex: Execution, started: str, judge: bool | None,
          judges: list[str] | None) -> remote.Task:
    run = session.run
    ex.failed_since = started
    params = notebook_parameters(run, ex, session.link(), run.sweep.limits.max_concurrency)
    params.pop("shard")  # set per attempt (remote.execute)
    if ex.stage == "collect":
        params["judge"] = bool(run.sweep.judges) if judge is None else judge
    else:
        params["judges"] = judges
    assert session.expected is not None
    return remote.Task(ex.stage, ex.name, ex.shard, [c.key for c in ex.cells],
                       str(run.root / "notebooks" / STAGES[ex.stage]), params, str(run.dir), str(run.root),
                       session.expected, session.sweep, session.stop, session.kernel_env(), session.secrets,
                       driver_name())


def _wait(session: ClusterSession, futures: list[Any], progress: ClusterProgress | None) -> None:
    """Wait for every task, showing progress; a scheduler that goes away ends the sweep with one message."""
    from distributed import wait  # noqa: PLC0415 (distributed: imported by the session already)

    pending, warned = futures, False
    try:
        while pending:
            hear_ctrl_c()  # again: MLflow's thread may have imported polars since
            try:
                wait(pending, timeout=POLL_S * 4, return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
            except (OSError, CancelledError):  # the comm to the scheduler broke, or the client gave up on it
                raise ClusterLost(_lost_message(session)) from None
            if any(f.status == "cancelled" for f in pending) or session.client.status in ("closing", "closed"):
                raise ClusterLost(_lost_message(session))
            pending = [f for f in pending if not f.done()]
            if progress is not None:
                try:
                    progress.update()
                except OSError as exc:  # the run folder is slow or flaky here: the tasks go on regardless
                    if not warned:
                        warned = True
                        warnings.warn(f"progress: cannot read {session.run.dir} ({os_reason(exc)})", RuntimeWarning,
                                      stacklevel=2)
    finally:
        if progress is not None:
            progress.close()


def _stop(session: ClusterSession, pending: list[Any]) -> bool:
    """Tell every task to stop its kernel (stop event, then hurry event: bench.sweep.executions.stop_in_two) and wait
    for them; return whether a second Ctrl-C came."""
    from distributed import Event, wait  # noqa: PLC0415 (distributed: imported by the session already)

    def tell(times: int, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        try:
            Event(session.stop if times == 1 else remote.hurry_event(session.stop), client=session.client).set()
            while (left := [f for f in pending if not f.done()]) and time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError):
                    wait(left, timeout=POLL_S)  # short: a Ctrl-C is heard between two
        except (OSError, CancelledError):  # the scheduler went away: nothing left to wait for
            pass

    return stop_in_two(tell)


def _lost_message(session: ClusterSession) -> str:
    return (f"the Dask scheduler at {session.address} went away mid-sweep; what was answered is saved in "
            f"{session.run.dir}; start a scheduler and run the same command again to resume")


def _settle_all(session: ClusterSession, executions: list[Execution], futures: dict[str, Any], *,
                interrupted: bool) -> None:
    for ex in executions:
        _settle(session, ex, futures.get(ex.name), interrupted)


def _settle(session: ClusterSession, ex: Execution, future: Any, interrupted: bool) -> None:
    """Fill an execution from its attempts and record each in executions.jsonl (a lost worker's included)."""
    attempts = [a for a in remote.claimed_attempts(session.run.dir, ex.name) if a.get("sweep") == session.sweep]
    ex.returncode, ex.error = 1, "interrupted" if interrupted else "not finished"
    if future is not None and future.done():
        try:
            last = future.result()
            ex.returncode = 0 if last["status"] == "ok" else int(last.get("exit_code") or 1)
            ex.error, ex.halted = last.get("error", ""), str(last.get("halted") or "")
        except Exception as err:  # every retry raised, or the task was lost too often (KilledWorker)
            ex.error = f"{type(err).__name__}: {err}"[:300]
    for i, a in enumerate(attempts):
        if a.get("status") == "running":  # its worker died under it (or it was still running at a Ctrl-C)
            a["status"] = "interrupted" if interrupted and i + 1 == len(attempts) else "lost"
            a["ended"] = attempts[i + 1]["started"] if i + 1 < len(attempts) else utc_now()
            remote.close_attempt(session.run.dir, a)  # no later sweep takes it for one its driver left open
        record_attempt(session.run.dir, ExecutionAttempt(**remote.attempt_fields(a)))
    if attempts:
        ex.notebook = Path(attempts[-1].get("notebook") or ex.notebook)
        ex.seconds = float(attempts[-1].get("seconds") or 0.0)
    ex.attempts = attempts
