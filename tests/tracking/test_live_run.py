"""A sweep's parent MLflow run is live: RUNNING with growing progress metrics while the sweep runs, then FINISHED,
FAILED or KILLED with the exit code as a tag; a driver killed with -9 leaves a run the next sweep marks KILLED.

The sweeps run against the loopback fake provider and are watched from here through MlflowClient on the run folder's
own store, or on a team tracking server (`mlflow server` on a throwaway PostgreSQL, on loopback); waits poll the
store until what is awaited shows up (no fixed sleep). A sweep killed or interrupted runs as `bench sweep` in a
subprocess; the others run in-process (bench.testing.in_process). The run growing, then killed with -9 and resumed
on its own store: tests/sweep/test_kill_resume.py; ending FAILED with exit code 3: tests/sweep/test_sweep.py; with
exit code 1: tests/sweep/test_exit_codes.py.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core.runlock import is_held, run_lock
from bench.testing import grids
from bench.testing.grids import started, sweep_args
from bench.testing.in_process import command, run_stages
from bench.testing.postgres import LoopbackPostgres
from bench.tracking.live import mark_crashed
from bench.tracking.mlflow_store import _import_mlflow
from bench.tracking.server import TrackingServer
from tests.sweep.test_sweep import wait_until_no_kernel_writes

TOPICS = 100  # answers of the sweep: at 300 ms each and 2 at a time, 15 s of progress to watch (a first sweep's
# live run appears after MLflow's import and its new store: up to ~13 s on a loaded two-core machine)
LIVE = {"BENCH_MLFLOW_LIVE_S": "1"}  # a progress batch every second (10 s by default)


def grid(tmp_path: Path, url: str, **overrides) -> Path:
    limits = {"max_concurrency": 2, "timeout_s": 10, "retries": 0, **overrides.pop("limits", {})}
    return grids.grid(tmp_path / "live.yaml", url, name="live", topics=overrides.pop("topics", TOPICS), limits=limits,
                      **overrides)


def store_rows(run_dir: Path) -> list[tuple[str, str]]:
    """Return (run id, status) of each run in the folder's store, read with sqlite3 alone: polled before the store
    has its tables, it never races the driver creating them, as a second MLflow client would."""
    db = run_dir / "mlflow.db"
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return con.execute("select run_uuid, status from runs").fetchall()
    except sqlite3.Error:  # its tables are being created
        return []


def wait_for(what: str, check, proc: subprocess.Popen | None = None, budget_s: float = 120):
    """Poll ``check`` until it returns something true; return it (fail naming ``what`` at the deadline, or once
    ``proc`` ended without it)."""
    deadline = time.monotonic() + budget_s
    while not (found := check()):
        assert proc is None or proc.poll() is None, f"the sweep ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} after {budget_s}s"
        time.sleep(0.05)
    return found


def client(run_dir: Path, uri: str | None = None):
    """Return a client of the folder's own store, or of the tracking server at ``uri``."""
    return _import_mlflow().MlflowClient(uri or f"sqlite:///{run_dir / 'mlflow.db'}")


def sweep_runs(run_dir: Path, uri: str | None = None, *, any_folder: bool = False) -> list:
    """Return the sweep runs of this folder (of any folder: ``any_folder``), oldest first."""
    c = client(run_dir, uri)
    exp = c.get_experiment_by_name("bench/live")
    runs = c.search_runs([exp.experiment_id], filter_string="tags.`bench.level` = 'sweep'", order_by=["start_time"])
    return [r for r in runs if any_folder or r.data.tags.get("bench.run_dir") == str(run_dir.resolve())]


def running(run_dir: Path, uri: str | None = None) -> str | None:
    """Return the id of this folder's RUNNING sweep run (read with sqlite3 alone on its own store: polled before
    the store has its tables, it never races the driver creating them), or None."""
    if uri is None:
        return next((r for r, s in store_rows(run_dir) if s == "RUNNING"), None)
    exp = client(run_dir, uri).get_experiment_by_name("bench/live")
    return next((r.info.run_id for r in sweep_runs(run_dir, uri) if r.info.status == "RUNNING"), None) if exp else None


def done(c, run_id: str) -> float:
    """Return the run's last ``progress.collect.done`` (0 before the first batch)."""
    return c.get_run(run_id).data.metrics.get("progress.collect.done", 0.0)


def test_a_sweep_refused_before_its_stages_start_creates_no_run(tmp_path, fake):
    price = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}  # the estimate passes the budget: nothing starts
    params = grid(tmp_path, fake.url, models=[grids.model("m1", fake.url, price=price)],
                  limits={"budget_usd": 0.001})
    result = command(tmp_path, "sweep", str(params), "--no-report", **LIVE)  # tracking on
    assert result.returncode == 4, result.log
    assert not (tmp_path / "runs/live/mlflow.db").exists()  # nothing started: no run, no store


def test_a_budget_reached_while_running_ends_the_run_killed_with_exit_code_4(tmp_path, fake):
    model = grids.model("m1", fake.url, price={"input_per_mtok": 1000.0, "output_per_mtok": 1000.0},
                        params={"max_tokens": 40})
    first = run_stages(tmp_path, grid(tmp_path, fake.url, models=[model], topics=2, limits={"budget_usd": 0.2}))
    assert first.returncode == 0, first.log  # short answers: the estimate expects them again
    fake.configure(replies=[{"match": "One tip", "content": " ".join(["word"] * 30)}])  # ten times longer
    stopped = run_stages(tmp_path, grid(tmp_path, fake.url, models=[model], topics=12, limits={"budget_usd": 0.2}),
                         track=True, **LIVE)
    assert stopped.returncode == 4 and "collect: STOPPED (BudgetReached)" in stopped.stdout, stopped.log
    (parent,) = sweep_runs(tmp_path / "runs/live")
    assert parent.info.status == "KILLED" and parent.data.tags["bench.exit_code"] == "4"
    assert parent.data.tags["bench.budget_usd"] == "0.2"
    assert 0 < parent.data.metrics["progress.cost_usd"] <= 0.2 and "answers.n" in parent.data.metrics




def kill_running_sweep(tmp_path: Path, params: Path, uri: str | None = None) -> str:
    """Start a sweep, wait until its live run has progress, kill its driver with -9; return the run's id."""
    run_dir = tmp_path / "runs/live"
    extra = {**LIVE, **({"MLFLOW_TRACKING_URI": uri} if uri else {})}
    with started(tmp_path, *sweep_args(params, track=True), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 **extra) as proc:
        run_id = wait_for("RUNNING run", lambda: running(run_dir, uri), proc)
        wait_for("progress", lambda: done(client(run_dir, uri), run_id), proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_until_no_kernel_writes(tmp_path)
    assert client(run_dir, uri).get_run(run_id).info.status == "RUNNING"  # nobody said otherwise yet
    return run_id


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[TrackingServer]:
    """A team's tracking server on loopback: `mlflow server` on a throwaway PostgreSQL, stopped by PID."""
    tmp = tmp_path_factory.mktemp("live-server")
    with LoopbackPostgres() as pg, (tmp / "server.log").open("w") as log, \
            TrackingServer(pg.uri, tmp / "artifacts", port=None, log=log) as srv:
        yield srv


def test_on_a_tracking_server_only_this_folder_s_crashed_run_is_marked(tmp_path, fake, server):
    uri = server.local_url
    c = client(tmp_path, uri)
    exp = c.get_experiment_by_name("bench/live")
    exp_id = exp.experiment_id if exp else c.create_experiment("bench/live")
    # a teammate's sweep of the same name, from another folder, running right now: never marked from here
    theirs = c.create_run(exp_id, tags={"bench.level": "sweep", "bench.live": "1", "bench.sweep": "live",
                                        "bench.run_dir": "/elsewhere/runs/live"}).info.run_id
    fake.configure(latency_ms=300)
    params = grid(tmp_path, fake.url)
    run_dir = tmp_path / "runs/live"
    crashed = kill_running_sweep(tmp_path, params, uri)
    assert not (run_dir / "mlflow.db").exists()  # everything went to the server
    fake.configure(latency_ms=0)
    resumed = run_stages(tmp_path, params, track=True, MLFLOW_TRACKING_URI=uri, **LIVE)  # the next sweep marks it
    assert resumed.returncode == 0, resumed.log
    first, second = sweep_runs(run_dir, uri)
    assert (first.info.run_id, first.info.status, first.data.tags["bench.ended"]) == (crashed, "KILLED", "crashed")
    assert second.info.status == "FINISHED" and second.data.tags["bench.exit_code"] == "0"
    assert second.data.metrics["progress.collect.done"] == TOPICS
    assert c.get_run(theirs).info.status == "RUNNING"


def test_the_lock_probe_tells_a_held_lock_from_a_released_one(tmp_path):
    assert not is_held(tmp_path)  # never locked: no lock file
    with run_lock(tmp_path):
        assert is_held(tmp_path)
    assert not is_held(tmp_path) and not mark_crashed(tmp_path)  # released; never tracked: nothing to mark
    assert not (tmp_path / "mlflow.db").exists()  # and no store created to find that out
