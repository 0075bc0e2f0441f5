"""A params file's stages run in the test's own process: what `bench sweep` runs, without its kernels or interpreter.

:func:`run_stages` is :func:`bench.testing.grids.sweep` for a test whose subject is not the command line (the
command's preparation, lock, ledger, live run and end around stages run as their notebooks run them);
:func:`command` runs another command through ``bench.cli.main`` (docs/tests.md).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.cli import main
from bench.core.digests import supersede
from bench.core.errors import BenchError, Halted
from bench.core.executions import ExecutionAttempt, local_marker, record_attempt
from bench.core.records import utc_now
from bench.core.runlock import run_lock
from bench.estimate import before_sweep
from bench.gates.command import check_baseline
from bench.judge.judgments import pending_judgments
from bench.models.eventloop import run as run_loop
from bench.run import Link, Run, open_run, shown_path
from bench.stage_runs import prepare, run_collect, run_judge
from bench.sweep.command import SweepRequest, finish, gates_skipped, summarize
from bench.sweep.driver import SweepResult, check_stage
from bench.sweep.executions import Execution, close_leftovers
from bench.sweep.ledger import sweep_ledger
from bench.sweep.shared import SharedLimits, SharedLocalServer
from bench.testing.grids import ROOT
from bench.tracking.live import live_run

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
    """Set, for the block, what :func:`bench.testing.grids.env` gives a subprocess (runs and reports under
    ``tmp_path``, ``extra``, ``drop`` unset, the checkout as working folder), all put back on leaving. One block at
    a time: the environment, working folder and redirected output are the process's."""
    with _ONE_AT_A_TIME, contextlib.chdir(ROOT):  # where a bench subprocess of the kit runs: relative paths alike
        saved = dict(os.environ)
        for name in drop:
            os.environ.pop(name, None)
        os.environ.update({"BENCH_RUNS": str(tmp_path / "runs"), "BENCH_REPORTS": str(tmp_path / "reports"), **extra})
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)


_ONE_AT_A_TIME = threading.RLock()


def run_stages(tmp_path: Path, params: Path | str, *, stages: Sequence[str] = STAGES, cells: str | None = None,
               run_dir: str | Path | None = None, dry_run: bool = False, supersede: bool | None = None,
               max_concurrency: int | None = None, report: bool = False, track: bool = False,
               junit: str | Path | None = None, wait: bool = False, drop: Sequence[str] = (),
               **extra: str) -> StagesRun:
    """Run ``stages`` of ``params`` here as `bench sweep PARAMS` would (``--no-report --no-track`` unless asked);
    return the run folder, exit code and output. Keywords are the command's options and environment; a bench error
    is printed as the command prints it (exit 2, a ``Halted``: its code), any other exception raised."""
    out, err = io.StringIO(), io.StringIO()
    folder = None if run_dir is None else str(run_dir)
    request = SweepRequest(str(params), cells=cells, run_dir=folder, only_stage=stages[0] if len(stages) == 1 else None,
                           wait=wait, report=report, track=track, dry_run=dry_run, supersede=bool(supersede),
                           junit=None if junit is None else str(junit))
    with environment(tmp_path, drop, **extra), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        shown = Path(folder) if folder is not None else tmp_path / "runs"
        try:
            run = open_run(request.params, cells=cells, run_dir=folder, dry_run=dry_run, supersede=bool(supersede))
            shown = run.dir
            code = _sweep(run, request, max_concurrency)
        except BenchError as error:
            print(f"bench sweep: error: {error}", file=sys.stderr)
            code = error.exit_code if isinstance(error, Halted) else 2
    return StagesRun(code, out.getvalue(), err.getvalue(), shown)


def command(tmp_path: Path, *args: str, drop: Sequence[str] = (), **extra: str) -> Finished:
    """Run ``bench ARGS`` here (``bench.cli.main``) in :func:`run_stages`'s environment; return code and output."""
    out, err = io.StringIO(), io.StringIO()
    with environment(tmp_path, drop, **extra), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))  # the command's parser and its one message per bench error
        except SystemExit as end:  # argparse: a usage error (2) or --help (0), as the command exits
            code = end.code if isinstance(end.code, int) else 0 if end.code is None else 1
    return Finished(code, out.getvalue(), err.getvalue())


def _sweep(run: Run, req: SweepRequest, max_concurrency: int | None) -> int:
    """What ``bench.sweep.command.sweep_command`` does with an opened run; return the exit code."""
    if not gates_skipped(req):
        check_baseline(run.sweep.gates, run.params_path)
    with run_lock(run.dir, wait=req.wait), \
            sweep_ledger(run, req.retry(only_stage=req.only_stage), req.only_stage) as ledger, \
            live_run(run, enabled=req.track) as live:
        result = _stages(run, req.only_stage, max_concurrency, lambda: (ledger.begin(), live.begin()))
        code, report = finish(result, req, None, live)
        code = summarize(run, result, req, code, report)
        return ledger.ended(live.ended(code))


def _stages(run: Run, only: str | None, cap: int | None, on_start: Callable[[], None]) -> SweepResult:
    """What ``bench.sweep.driver.run_sweep`` does, each stage one in-process execution (:func:`_execute`) instead of
    a kernel: checked, prepared, estimated, then run in order; a stage after one that stopped does not start."""
    started = utc_now()  # what fails from now on is asked again by the next sweep, not by this one
    check_stage(run, only)
    print(run.describe(), flush=True)
    changed = prepare(run, log_supersede=False)
    before_sweep(run, only_stage=only, groups=[[c.key for c in run.cells]], changed=changed)
    supersede(run.dir, changed, shown_path(run.params_path))
    on_start()
    stages = [only] if only else [s for s in STAGES if (s != "judge" or run.sweep.judges)
                                  and (s != "collect" or run.sweep.collects)]
    done: list[Execution] = []
    with SharedLocalServer(run), SharedLimits(run, 1, False) as limits:
        for stage in stages:  # the driver's lines (bench.sweep.driver._run_stages)
            if halted := [e for e in done if e.halted]:
                print(f"{stage}: not started, because {halted[0].name} stopped ({halted[0].halted}): "
                      f"see the summary at the end", flush=True)
                break
            if stage == "judge" and only is None and run.sweep.collects and not pending_judgments(
                    run, failed_since=started):
                print("judge: nothing pending (every candidate was graded as it arrived)", flush=True)
                continue
            done.append(_execute(run, stage, limits.link, cap, started))
    return SweepResult(run.dir, done, run, started)


def _execute(run: Run, stage: str, link: Link, cap: int | None, started: str) -> Execution:
    """Run ``stage`` as its notebook does in a kernel, recorded as the driver records it; a ``Halted`` stops it."""
    sweep = secrets.token_hex(6)
    close_leftovers(run, sweep)  # what a killed sweep left open, as each stage of the driver closes it
    ex = Execution(stage, list(run.cells), None, failed_since=started)
    cells, at, t0 = [c.key for c in ex.cells], utc_now(), time.monotonic()
    marker = local_marker(run.dir, ExecutionAttempt(stage, ex.name, cells, at, "", "running"), sweep)
    kernel = open_run(str(run.params_path), cells=cells, run_dir=str(run.dir), dry_run=run.dry_run, batch=run.batch,
                      supersede=run.supersede, lease_server=link.lease_server, sweep_cap=link.sweep_cap,
                      shared_budget=link.shared_budget, lock_held=link.lock_held)
    try:
        run_loop(run_collect(kernel, max_concurrency=cap, progress="text", judge=bool(run.sweep.judges))
                 if stage == "collect" else
                 run_judge(kernel, max_concurrency=cap, progress="text", failed_since=started))
        ex.returncode = 0
    except Halted as stop:
        ex.returncode, ex.halted, ex.error = stop.exit_code, type(stop).__name__, f"{type(stop).__name__}: {stop}"
    finally:
        ex.seconds = time.monotonic() - t0
        status = "ok" if ex.returncode == 0 else "interrupted" if ex.halted else "failed"
        record_attempt(run.dir, ExecutionAttempt(stage, ex.name, cells, at, utc_now(), status))
        if marker is not None:
            marker.unlink(missing_ok=True)
    return ex
