"""Tracking survives kills: `bench track` SIGKILLed while MLflow makes the run folder's store (as the store file
appears, a tenth of the way, and halfway through its migrations) leaves a store the next `bench track` logs to.

Before the fix the store was made in place: a kill mid-migration left a half-made ``mlflow.db`` and every later
run printed ``OperationalError … table … already exists`` and logged nothing (still exiting 0). A store an older
bench left half-made, and a tracking server that refuses, are tracked in-process (bench.testing.in_process).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.testing import grids
from bench.testing.grids import started
from bench.testing.in_process import command, run_stages

MADE_BYTES = 950_000  # an MLflow 3 sqlite store once made (its migrations write it up from 0)


def test_a_store_killed_while_being_made_is_usable_next_time(tmp_path, fake):
    params = grids.grid(tmp_path / "t.yaml", fake.url, name="t", topics=2)
    assert grids.sweep(tmp_path, params).returncode == 0
    run_dir = tmp_path / "runs" / "t"
    for at in (0, MADE_BYTES // 10, MADE_BYTES // 2):  # readiness signals: how far the store file has grown
        for path in set(run_dir.glob("*mlflow*")):  # the store, its artifacts and state (dot files too)
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        with started(tmp_path, "track", str(run_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
            deadline = time.monotonic() + 120
            while (size := being_made(run_dir)) is None or size < at:
                assert proc.poll() is None, f"`bench track` ended before its store reached {at} bytes"
                assert time.monotonic() < deadline, f"no store reached {at} bytes in 120 s"
                time.sleep(0.005)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        again = grids.bench(tmp_path, "track", str(run_dir))
        said = again.stdout + again.stderr
        assert again.returncode == 0 and "logged to MLflow" in said, f"killed at {at} bytes: {said[-2000:]}"
        assert "OperationalError" not in said and "failed" not in said, said[-2000:]
        assert said.count("was left half-made") <= 1, said  # a store set aside is said once


def being_made(run_dir: Path) -> int | None:
    """The size of the store file being made (bench's temporary one, or ``mlflow.db`` itself), None before."""
    sizes = []
    for path in [run_dir / "mlflow.db", *run_dir.glob(".mlflow.db.*.tmp")]:
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:  # not there, or published (renamed) meanwhile
            continue
    return max(sizes) if sizes else None


def test_a_half_made_store_an_older_bench_left_is_set_aside_and_made_anew(tmp_path, fake):
    params = grids.grid(tmp_path / "t.yaml", fake.url, name="t", topics=2)
    assert run_stages(tmp_path, params).returncode == 0
    run_dir = tmp_path / "runs" / "t"
    made_in_place = ("from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore as S; "
                     f"S('sqlite:///{run_dir / 'mlflow.db'}', '{(run_dir / 'mlartifacts').as_uri()}')")
    proc = subprocess.Popen([sys.executable, "-c", made_in_place], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # the store made in place, as MLflow itself makes it
    try:
        deadline = time.monotonic() + 120
        while (size := being_made(run_dir)) is None or size < MADE_BYTES // 10:
            assert proc.poll() is None and time.monotonic() < deadline, "the store was made before the kill"
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    again = command(tmp_path, "track", str(run_dir))
    said = again.stdout + again.stderr
    assert again.returncode == 0 and "logged to MLflow" in said and "failed" not in said, said[-2000:]
    assert said.count("was left half-made") == 1 and len(list(run_dir.glob("mlflow.db.half-made-*"))) >= 1, said


def test_a_tracking_failure_is_said_once_with_its_effect(tmp_path, fake):
    with socket.socket() as s:  # a port nothing listens on: every MLflow call is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = grids.grid(tmp_path / "t.yaml", fake.url, name="t", topics=2)
    done = run_stages(tmp_path, params, track=True, MLFLOW_TRACKING_URI=f"http://127.0.0.1:{port}",
                      MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5")
    failures = [line for line in (done.stdout + done.stderr).splitlines() if "tracking:" in line and "failed" in line]
    assert done.returncode == 0 and len(failures) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "not logged to MLflow" in failures[0] and "records are unaffected" in failures[0], failures
