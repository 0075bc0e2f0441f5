"""Kernels started ahead of need: a local sweep's first executions get their kernels while the driver prepares.

The driver's preparation (preflight, the estimate) takes a second or more, and a kernel about as long to start
and import what its notebook imports. So once the sweep knows its first stage's executions, the shared servers
their kernels need in their environment (bench.sweep.shared) are entered, and each execution that would start at
once gets its own thread: it starts the execution's kernel (on the thread that will run it: jupyter keeps one
event loop per thread) and parks. The driver then releases each thread with its execution, or cancels it (a
refused or interrupted sweep): its kernel is shut down, and nothing was recorded. One kernel per execution, as
without a head start: the executions share nothing but the time. The kernels `bench sweep` started as its
arguments parsed (bench.kernel_threads.start_early) are taken first; a new one starts only for an execution
beyond them.
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

from bench.kernel_threads import Prestart, end_unused
from bench.run import Run
from bench.sweep.executions import plan_executions


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
            self.early = Prestart(executions, count, str(run.root))
            end_unused(wait_s=0)  # kernels `bench sweep` started for more executions than the stage has
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
    return not launches_local_model(model) and run.sweep.limits.budget_usd is None


def launches_local_model(model: Any) -> bool:
    """Whether the driver launches the embedded model (``model``: its bench.sweep.shared.SharedLocalServer) once
    the preparation passed: a kernel or task started before then cannot be given its address at start."""
    return bool(getattr(model, "models", None)) and not os.environ.get("BENCH_LOCAL_API_BASE")
