"""`bench sweep`: execute the stage notebooks with papermill over a params grid.

The grid's cells are split into executions: one for the whole grid (default: one event
loop, one cap), N side by side (``--jobs N``), or one per cell (``--per-cell``, at most
``--jobs`` at a time). The sweep's concurrency cap is divided among the executions that
run at once, so the sweep as a whole never exceeds it. Each execution appends to its
own shard of the run store and saves its executed notebook under
``runs/<sweep>/notebooks/``; a failed execution is reported with that path and does not
stop the others. Everything is resumable: a second sweep makes zero model calls.

Each model's and judge's own caps (``max_concurrency``, ``rpm``, ``tpm``) are never
divided or multiplied: when executions run side by side, the driver serves them from one
lease server (bench.models.ratelimit) that every kernel reaches through BENCH_LIMITS_ADDRESS.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from bench.models.local import manager as local
from bench.core import paths
from bench.models import ratelimit
from bench.core.errors import BenchError
from bench.config.params import Cell
from bench.core.progress import MARK, STREAM_ENV
from bench.core.records import utc_now
from bench.pipeline import Run, open_run, prepare, shown_path

STAGES = {"collect": "01_collect.ipynb", "judge": "02_judge.ipynb"}


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

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.shard}" if self.shard else self.stage


def plan_executions(run: Run, stage: str, jobs: int, per_cell: bool) -> list[Execution]:
    """Return the executions of a stage: one, ``jobs`` groups of cells, or one per cell."""
    cells = run.cells
    if per_cell:
        groups = [[c] for c in cells]
        shards = [_slug(c.key) for c in cells]
    elif jobs <= 1 or len(cells) <= 1:  # a pair dataset has no cells: one execution judges it
        groups, shards = [cells], [None]
    else:
        n = min(jobs, len(cells))
        groups = [cells[i::n] for i in range(n)]
        shards = [f"job{i + 1}" for i in range(n)]
    out = []
    for group, shard in zip(groups, shards):
        ex = Execution(stage, group, shard)
        ex.notebook = run.dir / "notebooks" / f"{Path(STAGES[stage]).stem}{'.' + shard if shard else ''}.ipynb"
        out.append(ex)
    return out


def _slug(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in key).replace("@", "-")


@dataclass
class SweepResult:
    """What a sweep did: its run folder and every execution with its exit code (0 = success)."""

    run_dir: Path
    executions: list[Execution]
    run: Run | None = None
    started: str = ""  # ISO time the sweep started


def run_sweep(run: Run | str, *, jobs: int = 1, per_cell: bool = False, cells=None,
              only_stage: str | None = None, run_dir: str | None = None) -> SweepResult:
    """Run the sweep's stages; return the run folder and every execution with its exit code.

    The caller holds the run folder's lock (bench.core.runlock) for as long as it writes there.
    """
    threading.Thread(target=_import_papermill, daemon=True).start()  # 2 s of imports, overlapped with prep
    started = utc_now()  # items that fail from now on are asked again by the next sweep, not by this one
    run = run if isinstance(run, Run) else open_run(run, cells=cells, run_dir=run_dir)
    check_stage(run, only_stage)  # a stage in the wrong order: one line saying what to run instead
    print(run.describe(), flush=True)
    prepare(run)  # preflight + scenarios.jsonl: nothing is spent on a run that cannot finish
    stages = [only_stage] if only_stage else [s for s in STAGES if (s != "judge" or run.sweep.judges)
                                              and (s != "collect" or run.sweep.collects)]
    for stage in stages:
        if stage not in STAGES:
            raise BenchError(f"unknown stage {stage!r}; stages are: {', '.join(STAGES)}")
    done: list[Execution] = []
    with _shared_local_server(run), _shared_limits(run, jobs, per_cell):
        for stage in stages:
            if failed := [e.name for e in done if e.returncode != 0]:  # a later stage would work on a partial run
                print(f"{stage}: not started, because {', '.join(failed)} failed (see the notebook named below); "
                      f"fix it and run the sweep again", flush=True)
                break
            if stage == "judge" and only_stage is None and _judged_during_collect(run, started):
                print("judge: nothing pending (every candidate was graded as it arrived)", flush=True)
                continue
            done += _run_stage(run, stage, jobs, per_cell, started)
    return SweepResult(run.dir, done, run, started)


def check_stage(run: Run, stage: str | None) -> None:
    """Refuse (BenchError: one line, exit code 2) a stage that has nothing to work on yet, saying what to run.

    ``--only-stage judge`` before anything was collected would grade nothing, render an empty
    report and log an empty MLflow run; it says instead that nothing has been collected and how.
    """
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
                         f"(see README, Judging), or collect only with: {_command(run, 'collect')}")
    if stage == "judge" and run.sweep.collects and not _collected(run):
        raise BenchError(f"nothing has been collected in {shown_path(run.dir)} yet, so there is nothing to judge; "
                         f"collect first with: {_command(run, 'collect')} (or run both stages, judging each "
                         f"answer as it arrives: {_command(run, None)})")


def _collected(run: Run) -> bool:
    """Return True if the run folder holds at least one successful answer of the run's cells."""
    from bench.core.records import Candidate  # noqa: PLC0415

    keys = {c.key for c in run.cells}
    return any(c.ok and f"{c.model_id}/{c.prompt_id}@{c.prompt_version}" in keys
               for c in run.store.latest(Candidate).values())


def _command(run: Run, stage: str | None) -> str:
    """Return the `bench sweep` command of this run (its cells and run folder) for ``stage`` (None: every stage)."""
    from bench.core.outcome import retry_command  # noqa: PLC0415

    cells = ",".join(c.key for c in run.cells) if len(run.cells) < len(run.sweep.cells()) else None
    folder = shown_path(run.dir) if run.dir != paths.run_dir(run.sweep.name, run.root) else None
    return retry_command(shown_path(run.params_path), cells=cells, run_dir=folder, only_stage=stage)


def _judged_during_collect(run: Run, started: str) -> bool:
    from bench.judge.stage import pending_judgments  # noqa: PLC0415

    return run.sweep.collects and pending_judgments(run, failed_since=started) == 0


def _import_papermill() -> None:
    import papermill  # noqa: F401, PLC0415


def _run_stage(run: Run, stage: str, jobs: int, per_cell: bool, started: str | None = None) -> list[Execution]:
    executions = plan_executions(run, stage, jobs, per_cell)
    for ex in executions:
        ex.failed_since = started
    cap = run.sweep.limits.max_concurrency
    parallel = max(1, min(jobs if per_cell else len(executions), len(executions), cap))
    share = max(1, cap // parallel)  # the sweep as a whole never exceeds the cap
    print(f"{stage}: {len(executions)} execution(s), {parallel} at a time, cap {share} each", flush=True)
    sem = threading.Semaphore(parallel)
    prepare_driver()
    stop = threading.Event()
    threads = [threading.Thread(target=_guarded, args=(sem, run, ex, share, stop), daemon=True) for ex in executions]
    for t in threads:
        t.start()
    try:  # events, not Thread.join: a join interrupted by Ctrl-C marks a running thread as stopped (bpo-45274)
        for ex in executions:
            ex.finished.wait()
    except KeyboardInterrupt:  # Ctrl-C: the kernels (in their own sessions) did not get it; stop them cleanly
        _stop(executions, stop)
        raise
    return executions


def _stop(executions: list[Execution], stop: threading.Event, grace_s: float = 30.0) -> None:
    """Interrupt every running execution and wait (at most ``grace_s``; a second Ctrl-C: not at all) for it to end.

    An interrupted stage cancels its requests, writes what was answered and ends its cell;
    papermill then saves the executed notebook and shuts the kernel down. No execution
    starts any more. A kernel still starting ignores SIGINT, so it is sent again until the
    execution ends; whatever is left dies with the driver (PR_SET_PDEATHSIG).
    """
    stop.set()
    deadline = time.monotonic() + grace_s
    try:
        while time.monotonic() < deadline and (running := [ex for ex in executions if not ex.finished.is_set()]):
            for ex in running:
                _interrupt_kernel(ex)
            running[0].finished.wait(timeout=1.0)
    except KeyboardInterrupt:
        pass


def _guarded(sem: threading.Semaphore, run: Run, ex: Execution, cap: int, stop: threading.Event | None = None) -> None:
    try:
        with sem:
            if stop is None or not stop.is_set():  # an interrupted sweep starts no further execution
                _execute(run, ex, cap, stop)
    finally:
        ex.finished.set()


def _execute(run: Run, ex: Execution, cap: int, stop: threading.Event | None = None) -> None:
    """Run one papermill execution in this thread (papermill is imported once per sweep, not per execution).

    Each execution still gets its own kernel process; its cell output is streamed to the
    terminal prefixed with the execution's name.
    """
    import papermill as pm  # noqa: PLC0415 (2 s of imports: paid once by the driver)

    threading.current_thread().name = ex.name
    ex.notebook.parent.mkdir(parents=True, exist_ok=True)
    params = {"params": str(run.params_path), "cells": [c.key for c in ex.cells], "run_dir": str(run.dir),
              "max_concurrency": cap, "shard": ex.shard, "progress": "text"}
    if ex.stage == "collect":
        params["judge"] = bool(run.sweep.judges)  # pipelined: judging consumes candidates as they arrive
    else:
        params["failed_since"] = ex.failed_since
    t0 = time.monotonic()
    try:
        pm.execute_notebook(str(run.root / "notebooks" / STAGES[ex.stage]), str(ex.notebook), parameters=params,
                            kernel_name="python3", log_output=True, progress_bar=False, cwd=str(run.root),
                            kernel_manager_class=kernel_manager_class(ex, stop))
        ex.returncode = 0
    except Exception as err:  # the executed notebook (saved by papermill) shows the failing cell
        ex.returncode = 1
        ex.error = f"{type(err).__name__}: {first_line(err)}"
    ex.seconds = time.monotonic() - t0


def kernel_manager_class(execution: Execution | None = None, stop: threading.Event | None = None) -> type:
    """Return a kernel manager whose kernels talk over unix sockets and are SIGKILLed when the driver dies.

    Jupyter starts kernels in their own session; killed with the driver, a kernel would go on
    calling models for a second or so until it noticed, and pay for replies nobody records.
    For a sweep's ``execution``: its kernel marks the lines meant for the terminal (bench.core.progress),
    is remembered on the execution (so an interrupt reaches it), and is not started once ``stop`` is set.
    """
    from jupyter_client.manager import AsyncKernelManager  # noqa: PLC0415

    from bench.models.local.server import die_with_parent  # noqa: PLC0415

    class DieWithDriver(AsyncKernelManager):
        def __init__(self, *args: Any, **kw: Any) -> None:
            # unix sockets next to the connection file, readable by this user only, instead of loopback
            # TCP that any local user can reach (and that makes ipykernel warn about it on every start)
            kw.setdefault("transport", "ipc")
            name = uuid.uuid4().hex
            kw.setdefault("ip", os.path.join(_ipc_dir(), name))  # one socket prefix per kernel
            # the connection file (it holds the kernel's HMAC key) goes there too, not loose in /tmp
            kw.setdefault("connection_file", os.path.join(_ipc_dir(), f"kernel-{name}.json"))
            super().__init__(*args, **kw)

        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:  # jupyter_client interrupts every kernel it shuts down; papermill shuts one
                return  # down after its last cell, so ipykernel would only log "KeyboardInterrupt caught in kernel."
            await super()._async_interrupt_kernel()

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            kw.setdefault("preexec_fn", die_with_parent(os.getpid(), signal.SIGKILL))
            if execution is not None:
                if stop is not None and stop.is_set():
                    raise BenchError("the sweep was interrupted before this execution started")
                kw["env"] = {**(kw.get("env") or os.environ), STREAM_ENV: "1"}
                execution.kernel = self
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return DieWithDriver


def _interrupt_kernel(ex: Execution) -> None:
    """Send SIGINT to an execution's kernel if it runs: its stage stops, saves what it has, and the cell fails."""
    process = getattr(getattr(ex.kernel, "provisioner", None), "process", None)
    if process is not None and process.poll() is None:
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGINT)


@functools.cache
def _ipc_dir() -> str:
    """Return a private (0700) folder for the kernels' sockets and connection files, removed at exit.

    Its name carries the driver's PID, so the folders a killed sweep left behind are removed
    when the next sweep starts (they hold the kernels' HMAC keys).
    """
    _remove_stale_kernel_dirs()
    path = tempfile.mkdtemp(prefix=f"{KERNEL_DIR_PREFIX}{os.getpid()}-")
    atexit.register(shutil.rmtree, path, True)
    return path


KERNEL_DIR_PREFIX = "bench-kernels-"


def _remove_stale_kernel_dirs() -> int:
    """Remove this user's kernel folders whose sweep is gone (killed before its exit handler ran)."""
    removed = 0
    for folder in Path(tempfile.gettempdir()).glob(f"{KERNEL_DIR_PREFIX}*"):
        pid = folder.name.removeprefix(KERNEL_DIR_PREFIX).split("-", 1)[0]
        try:
            if folder.stat().st_uid != os.getuid() or (pid.isdigit() and local.pid_alive(int(pid))):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


    return True


def first_line(err: Exception) -> str:
    """Return the last meaningful line of an error (papermill's ends with the failing cell's exception)."""
    lines = [ln for ln in str(err).splitlines() if ln.strip() and not set(ln.strip()) <= {"-"}]
    return lines[-1][:300] if lines else ""


class _PrefixedLog(logging.Handler):
    """Prints bench's own lines of papermill's streamed cell output as ``[execution] line`` (the thread's name).

    The terminal shows progress, not notebook output: of a cell's stdout only the lines bench
    marked for it (bench.core.progress.MARK: progress lines, a stage's one-line result) are shown;
    tables and other output stay in the executed notebook. Warnings and errors (a cell's
    stderr, papermill's own warnings) are always shown.
    """

    SKIP = ("Executing Cell", "Ending Cell", "Executing notebook with kernel", "Input Notebook", "Output Notebook",
            "Working directory", "Executing notebook")

    def emit(self, record: logging.LogRecord) -> None:
        loud = record.levelno >= logging.WARNING
        for line in record.getMessage().rstrip().splitlines():
            if line.startswith(MARK):
                print(f"[{record.threadName}] {line[len(MARK):]}", flush=True)
            elif loud and line.strip() and not line.startswith(self.SKIP):
                print(f"[{record.threadName}] {line}", flush=True)


def prepare_driver() -> None:
    for key, value in (("LITELLM_LOCAL_MODEL_COST_MAP", "True"), ("MLFLOW_DISABLE_TELEMETRY", "true"),
                       ("PYDEVD_DISABLE_FILE_VALIDATION", "1")):
        os.environ.setdefault(key, value)  # inherited by every kernel
    log = logging.getLogger("papermill")
    if not any(isinstance(h, _PrefixedLog) for h in log.handlers):
        log.addHandler(_PrefixedLog())
        log.setLevel(logging.INFO)
        log.propagate = False


class _shared_local_server:
    """Start the embedded model once in the driver and share it with every execution (one model loaded)."""

    def __init__(self, run: Run):
        self.models = sorted({c.model.model for c in run.cells if local.is_local(c.model.model)}
                             | {j.model for j in run.sweep.judges if local.is_local(j.model)})
        self.owned = False

    def __enter__(self) -> "_shared_local_server":
        if self.models and not os.environ.get("BENCH_LOCAL_API_BASE"):
            if len(self.models) > 1:
                raise BenchError(f"a sweep can use one local model at a time; this one names {self.models}")
            endpoint = local.ensure(self.models[0])
            os.environ["BENCH_LOCAL_API_BASE"] = endpoint.api_base
            self.owned = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            os.environ.pop("BENCH_LOCAL_API_BASE", None)
            local.shutdown()


class _shared_limits:
    """Serve every model's caps from the driver when executions run side by side (one lease server per sweep).

    Each kernel inherits BENCH_LIMITS_ADDRESS and takes a lease per request, so a judge's
    ``max_concurrency: 3`` stays 3 under ``--jobs 3``, and ``rpm``/``tpm`` windows span
    every execution (also consecutive ones: ``--per-cell``, or collect then judge).
    """

    def __init__(self, run: Run, jobs: int, per_cell: bool):
        entries = [c.model for c in run.cells] + list(run.sweep.judges)
        capped = any(e.max_concurrency or e.rpm or e.tpm for e in entries)
        several = len(plan_executions(run, "collect", jobs, per_cell)) > 1
        windows = any(e.rpm or e.tpm for e in entries)  # a window spans the collect and judge executions too
        self.wanted = ((capped and several) or windows) and not os.environ.get(ratelimit.ADDRESS_ENV)
        self.server: ratelimit.LeaseServer | None = None

    def __enter__(self) -> "_shared_limits":
        if self.wanted:
            self.server = ratelimit.LeaseServer()
            os.environ[ratelimit.ADDRESS_ENV] = self.server.start()  # inherited by every kernel started later
            print("model caps: one lease server for all executions (max_concurrency, rpm, tpm hold sweep-wide)",
                  flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            os.environ.pop(ratelimit.ADDRESS_ENV, None)
            self.server.stop()


def print_executions(executions: list[Execution]) -> int:
    """Print one line per execution and return the sweep's exit code (1 if any execution failed)."""
    failed = [e for e in executions if e.returncode != 0]
    for ex in executions:
        status = "ok" if ex.returncode == 0 else f"FAILED ({ex.error}): see {ex.notebook}"
        print(f"  {ex.name}: {status} [{ex.seconds:.1f}s]")
    return 1 if failed else 0
