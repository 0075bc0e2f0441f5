"""A params file's stages run in the test's own process: what `bench sweep` runs, without its kernels or interpreter.

:func:`run_stages` is :func:`bench.testing.grids.sweep` for a test whose subject is not the command line: the
driver's preparation, the stages as a collect execution runs them, and the end of `bench sweep --no-report
--no-track`; it returns the run folder, the sweep's exit code and what was printed. :func:`command` runs another
command in-process through ``bench.cli.main``. What only the command does stays in its tests (docs/tests.md).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from bench.core.errors import BenchError, Halted
from bench.core.outcome import EXIT_FAILED_ITEMS, failures, retry_command, summary
from bench.cli import main
from bench.core.digests import supersede
from bench.core.records import utc_now
from bench.estimate import before_sweep
from bench.gates.command import sweep_gates
from bench.judge.judgments import pending_judgments
from bench.models.eventloop import run as run_loop
from bench.run import Run, open_run, shown_path
from bench.stage_runs import prepare, run_collect, run_judge
from bench.sweep.halts import spend_line, stopped_summary
from bench.testing.grids import ROOT

STAGES = ("collect", "judge")


@dataclass
class Finished:
    """A command run in this process, read as a finished subprocess is: its exit code and output."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def log(self) -> str:
        """The last of both outputs, for an assertion's message."""
        return self.stdout[-3000:] + self.stderr[-3000:]


@dataclass
class StagesRun(Finished):
    """What :func:`run_stages` did, read as a finished `bench sweep` is: its exit code, output and run folder."""

    run_dir: Path


@contextlib.contextmanager
def environment(tmp_path: Path, drop: Sequence[str] = (), **extra: str) -> Iterator[None]:
    """Set, for the block, what :func:`bench.testing.grids.env` gives a subprocess: runs and reports under
    ``tmp_path``, ``extra``; the variables of ``drop`` unset; the checkout as the working folder. Everything is put
    back on leaving. One block at a time: the environment, the working folder and the redirected output are the
    process's, so two threads running stages at once would share them (one run's folder taken for the other's)."""
    with _ONE_AT_A_TIME:
        yield from _environment(tmp_path, drop, **extra)


_ONE_AT_A_TIME = threading.RLock()


def _environment(tmp_path: Path, drop: Sequence[str] = (), **extra: str) -> Iterator[None]:
    saved = dict(os.environ)
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.chdir(ROOT))  # where a bench subprocess of the kit runs: relative paths alike
    for name in drop:
        os.environ.pop(name, None)
    os.environ.update({"BENCH_RUNS": str(tmp_path / "runs"), "BENCH_REPORTS": str(tmp_path / "reports"), **extra})
    try:
        with stack:
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_stages(tmp_path: Path, params: Path | str, *, stages: Sequence[str] = STAGES, cells: str | None = None,
               run_dir: str | Path | None = None, dry_run: bool = False, supersede: bool | None = None,
               max_concurrency: int | None = None, drop: Sequence[str] = (), **extra: str) -> StagesRun:
    """Run ``stages`` of ``params`` in this process, as `bench sweep PARAMS --no-report --no-track` would; return
    the run folder, the sweep's exit code and what was printed.

    ``stages``: ``("collect",)`` is ``--only-stage collect`` (answers only), ``("judge",)`` ``--only-stage judge``;
    both (the default) collect with the judges grading each answer as it arrives, then grade what is left, each
    item asked once. ``cells``, ``run_dir``, ``dry_run`` and ``supersede`` are the command's options; ``drop`` and
    ``extra`` change the environment for the run, as :func:`bench.testing.grids.sweep`'s do. A bench error (a
    refusal: exit 2, a ``Halted``: its exit code) is printed to stderr as the command prints it.
    """
    out, err = io.StringIO(), io.StringIO()
    with environment(tmp_path, drop, **extra), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        folder = Path(run_dir) if run_dir is not None else None
        try:
            run = open_run(str(params), cells=cells, run_dir=str(run_dir) if run_dir is not None else None,
                           dry_run=dry_run, supersede=supersede)
            folder = run.dir
            retry = retry_command(str(params), cells=cells, run_dir=str(run_dir) if run_dir is not None else None)
            code = _run(run, stages, max_concurrency, f"{retry} --dry-run" if dry_run else retry)
        except BenchError as error:
            print(f"bench sweep: error: {error}", file=err)
            code = error.exit_code if isinstance(error, Halted) else 2
    return StagesRun(code, out.getvalue(), err.getvalue(), folder or tmp_path / "runs")


def command(tmp_path: Path, *args: str, drop: Sequence[str] = (), **extra: str) -> Finished:
    """Run ``bench ARGS`` in this process (``bench.cli.main``), in the environment :func:`run_stages` runs in;
    return its exit code and output, as :func:`bench.testing.grids.bench` returns them from a subprocess.

    For the commands that start no kernel (validate, estimate, gate, compare, status…) in a test whose subject is
    what they say, not the command line (its tests run ``python -m bench``).
    """
    out, err = io.StringIO(), io.StringIO()
    with environment(tmp_path, drop, **extra), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))  # the command's parser and its one message per bench error
        except SystemExit as end:  # argparse: a usage error (2) or --help (0), as the command exits
            code = end.code if isinstance(end.code, int) else 0 if end.code is None else 1
    return Finished(code, out.getvalue(), err.getvalue())


def _run(run: Run, stages: Sequence[str], max_concurrency: int | None, retry: str) -> int:
    """Run the stages on an opened run as the sweep's driver does; return the sweep's exit code (0, 3: items
    failed, 4: a budget stop, 5: a gate failed).

    First what the driver does before any execution: the run prepared (preflight, scenarios.jsonl, rubrics), the
    estimate printed and held to ``limits.budget_usd`` (the pilot sent when needed: BudgetReached before anything
    more is sent), a ``--supersede`` logged. Then the stages; at the end the failure summary, the spend line and
    a budget stop's closing lines (``retry``: the command that asks again), then the gates, as the sweep prints them.
    """
    print(run.describe(), flush=True)
    started = utc_now()  # what fails from now on is asked again by the next run, not by this one
    only = stages[0] if len(stages) == 1 else None
    judging = "judge" in stages and bool(run.sweep.judges)
    collected = "collect" in stages and run.sweep.collects
    changed = prepare(run, judges=judging, log_supersede=False)  # the stages prepare again, as a kernel does
    before_sweep(run, only_stage=only, groups=[[c.key for c in run.cells]], changed=changed)
    supersede(run.dir, changed, shown_path(run.params_path))
    halted: Halted | None = None
    try:
        if collected:
            run_loop(run_collect(run, max_concurrency=max_concurrency, progress="text", judge=judging))
        if judging and pending_judgments(run, failed_since=started):
            run_loop(run_judge(run, max_concurrency=max_concurrency, progress="text", failed_since=started))
        elif judging and collected:  # as the sweep says it (bench.sweep.driver)
            print("judge: nothing pending (every candidate was graded as it arrived)", flush=True)
    except Halted as stop:  # stopped on purpose (the budget reached): the summary says what is left
        halted = stop
        print(f"STOPPED ({type(stop).__name__}): {stop}", flush=True)
    code = halted.exit_code if halted is not None else 0
    if groups := failures(run.dir, run.sweep.limits.max_attempts):
        print(summary(groups, retry, run.sweep.limits.max_attempts), flush=True)
        code = code or EXIT_FAILED_ITEMS
    if spent := spend_line(run):
        print(spent, flush=True)
    if halted is not None:
        print(stopped_summary(run, [SimpleNamespace(halted=type(halted).__name__)], retry), flush=True)
    if run.sweep.gates is not None and judging and not run.dry_run:
        code = code or sweep_gates(run)
    return code
