"""Kernels started ahead of need: a local sweep's first executions get their kernels while the driver prepares.

The driver's preparation (preflight, the estimate) takes a second or more, and a kernel about as long to start
and import what its notebook imports. So once the sweep knows its first stage's executions, the shared servers
their kernels need in their environment (bench.sweep.shared) are entered, and each execution that would start at
once gets its own thread: it starts the execution's kernel (on the thread that will run it: jupyter keeps one
event loop per thread) and parks. The driver then releases each thread with its execution, or cancels it (a
refused or interrupted sweep): its kernel is shut down, and nothing was recorded. One kernel per execution, as
without a head start: the executions share nothing but the time.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.kernels import end_kernel, kernel_manager_class, prepare_driver, start_kernel
from bench.run import Run
from bench.sweep.executions import Execution, plan_executions


class Parked:
    """One execution's thread: starts its kernel, then waits for the execution (or for none: then ends it)."""

    def __init__(self, ex: Execution, stop: threading.Event, cwd: str):
        self.ex = ex
        self.task: Callable[[Execution, Any], None] | None = None
        self.wake = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(stop, cwd), name=ex.name, daemon=True)

    def _run(self, stop: threading.Event, cwd: str) -> None:
        try:
            km = kernel_manager_class(self.ex, stop)(kernel_name="python3")
            with contextlib.suppress(Exception):  # cancelled first, or no kernel could start: papermill then
                start_kernel(km, cwd)  # starts it as without a head start, and reports why it cannot
            self.wake.wait()
            if self.task is None:
                end_kernel(km)
            else:
                self.task(self.ex, km=km)
        finally:
            self.done.set()


class Prestart:
    """A stage's executions, the first ``count`` of them parked on threads with their kernels starting."""

    def __init__(self, run: Run, executions: list[Execution], count: int):
        self.executions = executions
        self.stop = threading.Event()  # the stage's: set by a cancel or a Ctrl-C, no kernel starts any more
        self.parked = [Parked(ex, self.stop, str(run.root)) for ex in executions[:count]]

    def start(self) -> None:
        prepare_driver()  # the variables every kernel inherits, and papermill's log lines
        for p in self.parked:
            p.thread.start()

    def release(self, sem: threading.Semaphore, run_one: Callable[..., None]) -> list[Execution]:
        """Run ``run_one(ex, km=…, held=…)`` on each parked thread (``held``: a slot of ``sem`` was free and is
        taken for it here, so the executions whose kernels started run first); return those executions."""
        released, self.parked = self.parked, []
        for p in released:
            p.task = functools.partial(run_one, held=sem.acquire(blocking=False))
            p.wake.set()
        return [p.ex for p in released]

    def cancel(self, wait_s: float = 15.0) -> None:
        """End every kernel still parked and wait (at most ``wait_s``) until each is gone."""
        cancelled, self.parked = self.parked, []
        if not cancelled:
            return
        self.stop.set()
        for p in cancelled:
            p.wake.set()
        deadline = time.monotonic() + wait_s
        for p in cancelled:
            p.done.wait(max(0.0, deadline - time.monotonic()))


class SweepStart:
    """The shared servers of a local sweep and its first stage's kernels started ahead of need (a context).

    With a head start, the servers are entered at once (their lines held back until :meth:`open`, so a
    refused sweep prints what it always did); without one, at :meth:`open`, after the preparation, as before.
    Leaving the context cancels what is still parked, then leaves the servers.
    """

    def __init__(self, run: Run, servers: list[Any], stage: str | None, jobs: int, per_cell: bool):
        self.servers, self.stage = servers, stage
        self.early: Prestart | None = None
        if stage is not None and can_start_ahead(run, servers[0]):
            executions = plan_executions(run, stage, jobs, per_cell)
            # the executions run_stage starts at once (its ``parallel``)
            count = max(1, min(jobs if per_cell else len(executions), len(executions),
                               run.sweep.limits.max_concurrency))
            self.early = Prestart(run, executions, count)
        self._stack = contextlib.ExitStack()
        self._held = ""

    def __enter__(self) -> "SweepStart":
        if self.early is not None:
            lines = io.StringIO()
            try:
                with contextlib.redirect_stdout(lines):
                    for server in self.servers:
                        self._stack.enter_context(server)
            except BaseException:
                self._stack.close()
                raise
            self._held = lines.getvalue()
            self.early.start()
        return self

    def open(self) -> None:
        """Nothing refused the sweep: print the servers' lines held back, or enter the servers now."""
        if self.early is not None:
            print(self._held, end="", flush=True)
        else:
            for server in self.servers:
                self._stack.enter_context(server)

    def take(self, stage: str) -> Prestart | None:
        """Return the head start of ``stage`` (once), or None."""
        if self.early is None or stage != self.stage:
            return None
        early, self.stage = self.early, None
        return early

    def __exit__(self, *exc: object) -> None:
        try:
            if self.early is not None:
                self.early.cancel()
        finally:
            self._stack.__exit__(*exc)


def can_start_ahead(run: Run, model: Any) -> bool:
    """Whether a local sweep's kernels may start before its preparation.

    Not when the driver launches the embedded model first (a kernel needs its address; launched before the
    preflight, its own errors would replace the preflight's message), nor under ``limits.budget_usd`` (the lease
    server counts the run folder's spend when it starts: before the pilot, it would not count the pilot's).
    """
    launches = bool(getattr(model, "models", None)) and not os.environ.get("BENCH_LOCAL_API_BASE")
    return not launches and run.sweep.limits.budget_usd is None
