"""`bench sweep` from start to end: the run folder locked, the stages run, the report, MLflow, the summary.

Exit codes (docs/sweeps.md): 0, 1 (a crash), 2 (bad input), 3 (items failed), 4 (budget reached),
5 (a gate failed) or 130 (Ctrl-C)."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import tracking  # its track_run loads polars on first use, not at import
from bench.core.errors import BenchError, ParamsError
from bench.core.outcome import (EXIT_CRASHED, EXIT_FAILED_ITEMS, EXIT_INTERRUPTED, failures, repeats_since,
                                retry_command, summary)
from bench.core.runlock import run_lock
from bench.gates.command import check_baseline, sweep_gates
from bench.models.batches import summary_line
from bench.core.progress import configure
from bench.run import Run, open_run, shown_path
from bench.stage_runs import interrupted_line, lost_clause
from bench.report.render import render_report
from bench.sweep.cluster import ClusterSession, ClusterStages, cluster_address  # the one place that chooses
from bench.sweep.driver import SweepResult, run_sweep
from bench.sweep.executions import crashed, print_executions
from bench.sweep.halts import spend_line, stopped_summary
from bench.sweep.ledger import sweep_ledger
from bench.tracking.live import LiveRun, live_run

@dataclass
class SweepRequest:
    """What `bench sweep` was asked to do (the command line, parsed)."""

    params: str
    cells: str | None = None
    run_dir: str | None = None
    jobs: int = 1
    per_cell: bool = False
    only_stage: str | None = None
    wait: bool = False
    report: bool = True
    track: bool = True
    dry_run: bool = False
    cluster: str | None = None  # --cluster (else $DASK_SCHEDULER_ADDRESS): a Dask scheduler, or local:N
    batch: bool = False  # --batch: every model and judge through its provider's Batch API
    supersede: bool = False  # --supersede: a cell, judge or rubric version edited under its name sets aside its records
    junit: str | None = None  # --junit FILE: the params file's gates as JUnit XML
    progress_every_s: float | None = None  # --progress-every S: seconds between progress lines (else by terminal)
    cluster_wait_s: float | None = None  # --cluster-wait S: how long to try reaching the scheduler and a worker

    def retry(self, **override: Any) -> str:
        """Return the command that resumes this sweep."""
        kw = {"cells": self.cells, "run_dir": self.run_dir, "jobs": self.jobs, **override}
        command = retry_command(self.params, **kw)
        command += f" --cluster {self.cluster}" if self.cluster else ""
        command += " --batch" if self.batch else ""  # --supersede is not repeated: it is recorded in the run folder
        return f"{command} --dry-run" if self.dry_run else command


def sweep_command(req: SweepRequest) -> int:
    """Run a sweep to its end (report, MLflow, the failure summary); return its exit code (130 on Ctrl-C)."""
    if req.dry_run:
        print("dry run: every model and judge is answered in-process by dry/<id> (no server, no cost)", flush=True)
    configure(every_s=req.progress_every_s)  # the driver's lines, and its executions' (a papermill parameter)
    run = open_run(req.params, cells=req.cells, run_dir=req.run_dir, dry_run=req.dry_run, batch=req.batch,
                   supersede=req.supersede)  # a changed content is refused before any call (run_sweep)
    if req.junit and run.sweep.gates is None:
        raise ParamsError(f"{run.params_path}: --junit writes the gates' results, and this file has no gates: "
                          f"section (docs/gates.md)")
    if not gates_skipped(req):  # a gate's missing baseline is refused before anything is spent
        check_baseline(run.sweep.gates, run.params_path)
    said = False
    try:
        with run_lock(run.dir, wait=req.wait), \
                sweep_ledger(run, req.retry(only_stage=req.only_stage), req.only_stage) as ledger, \
                live_run(run, enabled=req.track) as live:  # sweeps.jsonl; the parent MLflow run, from the stages' start
            address = cluster_address(req.cluster)
            with ClusterSession(address, run, req.cluster_wait_s) if address else contextlib.nullcontext() as session:
                cluster = ClusterStages(session) if session is not None else None  # else: kernels on this machine
                try:
                    result = run_sweep(run, jobs=req.jobs, per_cell=req.per_cell, only_stage=req.only_stage,
                                       cluster=cluster, on_start=lambda: (ledger.begin(), live.begin()))
                except KeyboardInterrupt as ctrl_c:  # said as the executions end: the MLflow run still being made
                    said = _say(_interrupted(run, req, ctrl_c))  # (its first store) or a cluster closing may take a while
                    raise
                code, report = finish(result, req, cluster, live)
            code = summarize(run, result, req, code, report)
            return ledger.ended(live.ended(code))  # the MLflow run's end, then the ledger's, before the lock goes
    except KeyboardInterrupt as ctrl_c:  # Ctrl-C: one line, no report; the live MLflow run ends KILLED
        said = said or _say(_interrupted(run, req, ctrl_c))
        return EXIT_INTERRUPTED


def _say(line: str) -> bool:
    print(line, file=sys.stderr, flush=True)
    return True


def _interrupted(run: Run, req: SweepRequest, ctrl_c: KeyboardInterrupt) -> str:
    """Return the line a Ctrl-C ends a sweep with: what was saved, the replies in flight a second Ctrl-C gave up
    (bench.sweep.executions.SweepInterrupted), what is left, how to resume."""
    resume = "resume with: " + req.retry(only_stage=req.only_stage)
    lost = lost_clause(getattr(ctrl_c, "lost", 0))
    if running := getattr(ctrl_c, "running", []):  # their journals let the next sweep count what they had in flight
        lost += f"{lost and '; '}replies in flight in {', '.join(running)}, still stopping, may be lost"
    try:
        return interrupted_line(run, resume, lost=lost)
    except (Exception, KeyboardInterrupt):  # a second Ctrl-C, or a store that cannot be read: still one line
        return f"interrupted: what was answered is saved in {shown_path(run.dir)}; {lost and lost + '; '}{resume}"


def summarize(run: Run, result: SweepResult, req: SweepRequest, code: int, report: Path | None) -> int:
    """Print what an earlier stop made this sweep ask again, the failed items and the report's path; return the code."""
    if rerun := [ex for ex in result.executions if len(ex.attempts) > 1]:
        print(f"{len(rerun)} execution(s) ran more than once: " + "; ".join(_attempts_line(ex) for ex in rerun),
              flush=True)
    if repeats := repeats_since(result.run_dir, result.started):
        print(f"up to {repeats} request(s) were in flight when an execution stopped (an earlier run of this "
              f"folder, or a lost worker) and may have been asked again (paid twice)", flush=True)
    if batches := summary_line(result.run_dir, result.started):
        print(batches, flush=True)
    if groups := failures(result.run_dir, run.sweep.limits.max_attempts):
        print(summary(groups, req.retry(), run.sweep.limits.max_attempts), flush=True)
        code = code or EXIT_FAILED_ITEMS
    if spent := spend_line(run):  # replies over max_tokens, usages estimated, items paid twice: said, counted
        print(spent, flush=True)
    if halted := [ex for ex in result.executions if ex.halted]:  # the budget reached (exit 4): how to continue
        print(stopped_summary(run, halted, req.retry()), flush=True)
    code = _gates(run, result, req, code)
    if report is not None:
        print(f"report: {report}")  # the last line: where to look
    return code


def _gates(run: Run, result: SweepResult, req: SweepRequest, code: int) -> int:
    """Apply the params file's gates to the finished run; return 5 when one failed and the sweep's code was 0.
    Skipped after a crash, a collect-only sweep or a dry run."""
    if run.sweep.gates is None:
        return code
    if skipped := gates_skipped(req) or ("the run is incomplete (an execution failed)"
                                          if crashed(result.executions) else None):
        print(f"gates: skipped, {skipped}", flush=True)
        return code
    gated = sweep_gates(run, req.junit)  # printed (and written) whatever the code: the table is worth reading
    return code or gated


def gates_skipped(req: SweepRequest) -> str | None:
    """Return why this sweep applies no gate whatever happens (a dry run, a collect-only sweep), or None."""
    if req.dry_run:
        return "a dry run's grades are stand-ins"
    return "nothing was graded (--only-stage collect)" if req.only_stage == "collect" else None


def _attempts_line(ex: Any) -> str:
    """Return ``collect.x: attempt 1 lost with its worker tcp://…, attempt 2 ok on tcp://…``."""
    said = {"lost": "lost with its worker", "ok": "ok on", "failed": "failed on", "interrupted": "interrupted on"}
    return f"{ex.name}: " + ", ".join(f"attempt {a.get('attempt')} {said.get(a.get('status'), a.get('status'))} "
                                      f"{a.get('worker')}" for a in ex.attempts)


def finish(result: SweepResult, req: SweepRequest, cluster: ClusterStages | None = None,
            live: LiveRun | None = None) -> tuple[int, Path | None]:
    """Print each execution; render the report and log to MLflow (into the ``live`` run) unless an execution crashed."""
    code = print_executions(result.executions, result.run_dir)
    report = None
    if crashed(result.executions):  # the run is broken, and a report or an MLflow run would hide it (a budget
        # stop is not a crash: the run is partial, said so in the summary, and its report and MLflow run follow)
        print("report and tracking: skipped, the run is incomplete (an execution failed); "
              "they follow when a sweep ends without a crash", flush=True)
        return code, None
    if req.report:
        try:
            report = report_command(result.run_dir) if cluster is None else _report_on_cluster(cluster)
        except BenchError as err:
            print(f"report: FAILED ({err})", file=sys.stderr)
            return EXIT_CRASHED, None
    if req.track:
        track(result.run_dir, report, {e.name: f"stopped ({e.halted})" if e.halted else "ok"
                                       for e in result.executions}, live.parent() if live else None)
    return code, report


def _report_on_cluster(cluster: ClusterStages) -> Path:
    t0 = time.monotonic()
    print("report: rendering notebooks/03_analyze.ipynb on a cluster worker (no model is called) …", flush=True)
    path = cluster.report()
    print(f"report: rendered in {time.monotonic() - t0:.1f}s", flush=True)
    return path


def report_command(run_dir: Path, out: str | None = None, **options: Any) -> Path:
    """Render a run's report (``render_report``), saying so on the terminal (`bench report`, and a sweep's end)."""
    t0 = time.monotonic()
    print("report: rendering notebooks/03_analyze.ipynb (no model is called) …", flush=True)
    path = render_report(run_dir, out, **options)
    print(f"report: rendered in {time.monotonic() - t0:.1f}s", flush=True)
    return path


def track(run_dir: Path, report: Path | None, status: dict[str, str], parent: str | None = None) -> None:
    """Log a run to MLflow (into a sweep's live run ``parent``), saying where; never fails a sweep."""
    t0 = time.monotonic()
    if tracking.track_run(run_dir, status=status, report=report, parent=parent):
        print(f"tracking: logged to MLflow at {tracking.shown_uri(tracking.tracking_uri(run_dir))} in "
              f"{time.monotonic() - t0:.1f}s (see it with: bench ui {run_dir})", flush=True)
