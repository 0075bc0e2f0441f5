"""What a Dask worker runs for a cluster sweep: the start-up probe, and one papermill execution attempt.

Each attempt claims its own number (``attempts/<execution>.<n>.json``, created exclusively), so no two workers
write the same file: attempt n > 1 appends to ``<shard>-a<n>``."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.executions import ATTEMPTS, attempt_files  # attempts/<execution>.<n>.json: one per attempt
from bench.core.records import utc_now
from bench.core.store import atomic_write
from bench.kernels import (KERNEL_ARGUMENTS, first_line, interrupt_kernel, kernel_manager_class, papermill,
                           prepare_driver)
from bench.report.render import render_report
from bench.sweep.halts import halted_exit_code
from bench.sweep.cluster.probe import Expected, check_worker
from bench.sweep.cluster.worker_secrets import kernel_secrets


@dataclass(frozen=True)
class Task:
    """One execution of a stage notebook, as sent to a worker (plain data: it travels through the scheduler)."""

    stage: str
    name: str  # collect.<cell>, judge.<cell>, collect
    shard: str | None
    cells: list[str]
    notebook_in: str  # the stage notebook to execute
    params: dict[str, Any]  # the notebook's papermill parameters, but for the shard (set per attempt)
    run_dir: str
    root: str
    expected: Expected  # what this worker must match (checked before each execution: workers may join late)
    sweep: str  # this sweep's id: its attempts are told from an earlier sweep's without comparing clocks
    stop: str  # the name of the sweep's distributed.Event that a Ctrl-C of the driver sets
    # for the kernel: the cache kind, where runs live (no secret: a task's arguments are kept by the scheduler and
    # shown to its clients; the token and keys come from the worker plugin)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    secrets: str = ""  # the worker plugin with the lease token and the keys (bench.sweep.cluster.worker_secrets)
    driver: str = ""  # pid <n> on <host>: who records this attempt (named if it never does: bench.core.executions)


def execute(task: Task) -> dict[str, Any]:
    """Run one attempt of an execution on this worker; return its provenance (ExecutionAttempt fields + more).
    A failing cell is an outcome (status ``failed``); anything else is recorded and raised, so Dask retries it."""
    pm = papermill()  # imported once per worker process

    worker = _worker_address()
    if task.stop and _event(task.stop).is_set():  # the sweep was interrupted before this task started
        return {"stage": task.stage, "name": task.name, "status": "interrupted", "worker": worker,
                "error": "the sweep was interrupted before this execution started"}
    if problem := check_worker(task.expected)["problem"]:  # a worker that joined after the sweep's check
        return {"stage": task.stage, "name": task.name, "status": "failed", "worker": worker,
                "error": f"worker {worker} ({socket.gethostname()}) {problem}"}
    prepare_driver()  # the variables every kernel inherits
    kernel = _KernelEnv({**task.env, **kernel_secrets(task.secrets)})  # the secrets: this kernel's environment only
    attempt, marker = _claim(Path(task.run_dir), task.name)
    shard = task.shard if attempt == 1 else f"{task.shard or 'all'}-a{attempt}"
    stem = Path(task.notebook_in).stem
    notebook = Path(task.run_dir) / "notebooks" / f"{stem}{'.' + shard if shard else ''}.ipynb"
    record = {"stage": task.stage, "name": task.name, "cells": task.cells, "started": utc_now(), "ended": "",
              "status": "running", "worker": worker, "hostname": socket.gethostname(), "attempt": attempt,
              "sweep": task.sweep, "driver": task.driver, "notebook": str(notebook), "error": "", "seconds": 0.0}
    atomic_write(marker, json.dumps(record).encode())
    notebook.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        _run_notebook(pm, task, {**task.params, "shard": shard}, notebook, kernel, record)
    except BaseException as err:
        record.update(status="failed", error=f"{type(err).__name__}: {first_line(err) or err}",
                      ended=utc_now(), seconds=round(time.monotonic() - t0, 3))
        atomic_write(marker, json.dumps(record).encode())
        raise
    record.update(ended=utc_now(), seconds=round(time.monotonic() - t0, 3))
    atomic_write(marker, json.dumps(record).encode())
    return record


def _run_notebook(pm: Any, task: Task, params: dict[str, Any], notebook: Path, kernel: "_KernelEnv",
                  record: dict[str, Any]) -> None:
    """Execute the stage notebook into ``notebook``; set ``record``'s status (a failed cell is an outcome).
    The kernel is killed once the notebook is saved: the stage's writes are durable by the end of its cell."""
    stopped = _watch_stop(task.stop, kernel)
    try:
        pm.execute_notebook(task.notebook_in, str(notebook), parameters=params, kernel_name="python3",
                            log_output=False, progress_bar=False, cwd=task.root,
                            kernel_manager_class=kernel_manager_class(kernel), extra_arguments=KERNEL_ARGUMENTS,
                            shutdown_kernel="immediate")
        record["status"] = "ok"
    except pm.PapermillExecutionError as err:  # a cell failed (or the sweep's Ctrl-C interrupted it)
        status = "interrupted" if stopped.is_set() else "failed"
        record.update(status=status, error=f"{type(err).__name__}: {first_line(err)}")
        if (code := halted_exit_code(err.ename)) is not None:  # stopped on purpose (the budget): bench.sweep.halts
            record.update(status="interrupted", halted=err.ename, exit_code=code, error=f"{err.ename}: {err.evalue}")
    finally:
        kernel.done.set()


def report_task(run_dir: str, out: str | None = None) -> str:
    """Render the run's report as a task on a cluster worker (no model call); return its path."""
    return str(render_report(Path(run_dir), out))


def claimed_attempts(run_dir: str | Path, name: str) -> list[dict[str, Any]]:
    """Return the attempts claimed for one execution (``attempts/<execution>.<n>.json``) in order."""
    out = [a for path, a in attempt_files(run_dir, f"{name}.*.json")
           if path.name.removeprefix(name + ".").removesuffix(".json").isdigit()]  # not <name>.job2's
    return sorted(out, key=lambda a: int(a.get("attempt", 0)))


def close_attempt(run_dir: str | Path, record: dict[str, Any]) -> None:
    """Write an attempt's final status into its file (the driver settled one its worker could not end)."""
    path = Path(run_dir) / ATTEMPTS / f"{record.get('name')}.{record.get('attempt')}.json"
    with contextlib.suppress(OSError):  # recorded in executions.jsonl all the same
        atomic_write(path, json.dumps(record).encode())


def _claim(run_dir: Path, name: str) -> tuple[int, Path]:
    """Claim the next attempt number of an execution (an exclusive create: two workers never get one number)."""
    folder = run_dir / ATTEMPTS
    folder.mkdir(parents=True, exist_ok=True)
    n = 1 + len(claimed_attempts(run_dir, name))
    while True:
        path = folder / f"{name}.{n}.json"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return n, path
        except FileExistsError:
            n += 1


def _worker_address() -> str:
    try:
        from distributed import get_worker  # noqa: PLC0415 (distributed: only on a worker, already imported there)

        return str(get_worker().address)
    except (ImportError, ValueError):  # not on a Dask worker (a direct call)
        return f"local:{os.getpid()}"


@dataclass
class _KernelEnv:
    """What kernel_manager_class needs of an execution: the variables its kernel gets (``env``)."""

    env: dict[str, str]
    kernel: Any = None  # its kernel manager, once started (what an interrupt is sent to)
    done: threading.Event = field(default_factory=threading.Event)


def _event(name: str) -> Any:
    from distributed import Event  # noqa: PLC0415 (distributed: only on a worker, already imported there)

    return Event(name)


def hurry_event(stop: str) -> str:
    """Return the name of the distributed.Event a second Ctrl-C of the driver sets (``stop``: the first's)."""
    return f"{stop}-now"


def _watch_stop(name: str, kernel: _KernelEnv) -> threading.Event:
    """Interrupt the execution's kernel once when the sweep's stop event is set, again when its hurry event is.
    Returns an event set once the stop was seen; the distributed.Events are made on the task's thread."""
    stopped = threading.Event()
    if not name:
        return stopped
    event, hurry = _event(name), _event(hurry_event(name))

    def watch() -> None:
        told = 0
        try:
            while not kernel.done.is_set() and not event.wait(timeout=1.0):
                pass
            while not kernel.done.is_set():
                stopped.set()
                if told < 1 + hurry.is_set() and interrupt_kernel(kernel):  # a kernel between cells ignores SIGINT:
                    told += 1  # sent once it listens
                kernel.done.wait(0.25)
        except Exception:  # the scheduler is gone: the worker stops on its own
            return

    threading.Thread(target=watch, name="bench-stop-watch", daemon=True).start()
    return stopped


def attempt_fields(record: dict[str, Any]) -> dict[str, Any]:
    """Return the ExecutionAttempt fields of an attempt record (what executions.jsonl holds)."""
    keys = ("stage", "name", "cells", "started", "ended", "status", "worker", "hostname", "attempt")
    return {k: record.get(k) for k in keys}

