"""A run's stages as a sweep's executions plan them, in the test's own process, or in a child process a test kills.

:func:`run_planned` is :func:`bench.testing.in_process.run_stages` split into the executions `--jobs N` or
`--per-cell` plans, for what depends on those groups (packs, their estimate) and not on the executions running side
by side; :func:`started_stages` runs ``run_stages`` in a child interpreter, for a test of what a ``kill -9`` leaves
(docs/tests.md, In-process or on the command line).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from bench.core.outcome import EXIT_FAILED_ITEMS, failures
from bench.core.records import utc_now
from bench.estimate import before_sweep
from bench.judge.judgments import pending_judgments
from bench.models.eventloop import run as run_loop
from bench.run import open_run
from bench.stage_runs import prepare, run_collect, run_judge
from bench.sweep.executions import plan_executions
from bench.testing.grids import ROOT, env
from bench.testing.in_process import Finished, environment

CHILD = ("import sys; from pathlib import Path; from bench.testing.in_process import run_stages; "
         "sys.exit(run_stages(Path(sys.argv[1]), sys.argv[2]).returncode)")


def run_planned(tmp_path: Path, params: Path | str, *, jobs: int = 1, per_cell: bool = False, **extra: str) -> Finished:
    """Run ``params`` in this process split into the executions `bench sweep --jobs JOBS` (or ``--per-cell``) plans
    (bench.sweep.executions.plan_executions): the estimate of those executions printed and held to the budget, then
    each one's cells collected in its own shard, graded as they arrive, then what is left graded; return the exit
    code (0, or 3: items failed) and what was printed.

    The command runs its executions side by side; here they run one after another: which answers share a packed
    call, and what the estimate predicts of it, do not depend on that (caps held across executions do: their tests
    run `bench sweep --jobs`)."""
    out, err = io.StringIO(), io.StringIO()
    with environment(tmp_path, (), **extra), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run = open_run(str(params))
        started, judging = utc_now(), bool(run.sweep.judges)
        print(run.describe(), flush=True)
        changed = prepare(run, judges=judging, log_supersede=False)
        collects = plan_executions(run, "collect", jobs, per_cell)
        before_sweep(run, groups=[[c.key for c in ex.cells] for ex in collects], changed=changed)
        grades = plan_executions(run, "judge", jobs, per_cell) if judging else []
        for ex in collects:
            part = open_run(str(params), cells=[c.key for c in ex.cells], run_dir=str(run.dir))
            run_loop(run_collect(part, shard=ex.shard, progress="text", judge=judging))
        for ex in grades if judging and pending_judgments(run, failed_since=started) else []:
            part = open_run(str(params), cells=[c.key for c in ex.cells], run_dir=str(run.dir))
            run_loop(run_judge(part, shard=ex.shard, progress="text", failed_since=started))
        code = EXIT_FAILED_ITEMS if failures(run.dir, run.sweep.limits.max_attempts) else 0
    return Finished(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def started_stages(tmp_path: Path, params: Path | str, **extra: str) -> Iterator[subprocess.Popen]:
    """Start ``run_stages`` of ``params`` in a child interpreter, in the environment a `bench` subprocess of the kit
    gets (:func:`bench.testing.grids.env`: ``extra`` added); yield the running process (its output discarded).

    For a test that kills a run for real (``kill -9``) and whose subject is what its folder and cache keep, not the
    command: no `bench` command or kernel is started around the stages. On leaving the block a child still running
    is killed (it starts no process of its own) and reaped."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(params)], cwd=ROOT,
                            env=env(tmp_path, **extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
