"""`bench status`: every state of a run read from its folder alone, checked against the JSON schema, through sweeps on
the fake provider and hand-written folders. A sweep in the background, killed with -9, then resumed:
tests/sweep/test_kill_resume.py."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time

import jsonschema
import pytest

from bench.core.executions import ExecutionAttempt, local_marker, record_attempt
from bench.core.runlock import run_lock
from bench.core.sweeps import FILE, record_end, record_start
from bench.monitor import SCHEMA, run_state, status, watch
from bench.core.runlock import lock_holder
from bench.testing import grids
from bench.testing.grids import ROOT, env, started, sweep_args
from bench.testing.in_process import command, run_stages
from tests.repo import parameterized_copy
from tests.sweep.test_budget import LONG, write as budget_grid
from tests.sweep.test_kill_resume import running_with_progress


def checked(run_dir, state):
    """Return the status document of ``run_dir``, valid against the schema and in ``state``."""
    doc = status(run_dir).doc
    jsonschema.validate(doc, SCHEMA)
    assert doc["state"] == state, json.dumps(doc, indent=1)[:3000]
    return doc


def judged(tmp_path, url, topics=12, cap=2):
    return grids.grid(tmp_path / "g.yaml", url, topics=topics, judges=[grids.judge("grader", url)],
                      limits={"max_concurrency": cap, "timeout_s": 10, "retries": 0})


def wait_for(predicate, proc, what, budget_s=120):
    """Poll ``predicate`` (a readiness signal) until it returns something true; fail if ``proc`` ends first."""
    deadline = time.monotonic() + budget_s
    while not (got := predicate()):
        assert proc.poll() is None, f"the sweep ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {budget_s}s"
        time.sleep(0.05)
    return got


def test_a_sweep_with_failed_items_reads_failed_with_exit_3(tmp_path, fake):
    fake.configure(rate_500=1.0)
    params = grids.grid(tmp_path / "g.yaml", fake.url, topics=3,
                        limits={"max_concurrency": 2, "timeout_s": 10, "retries": 0})
    result = run_stages(tmp_path, params)
    assert result.returncode == 3, result.log
    doc = checked(tmp_path / "runs" / "g", "failed")
    assert doc["exit_code"] == 3 and doc["items"] == [
        {"stage": "collect", "id": "m1", "planned": 3, "done": 3, "failed": 3, "in_flight": 0}]
    assert "items still failed" in doc["reason"]
    assert "FAILED: exit 3" in command(tmp_path, "status", "g").stdout  # a sweep's name names its run folder too


def test_ctrl_c_reads_interrupted_with_exit_130(tmp_path, fake):
    fake.configure(latency_ms=300)
    params = judged(tmp_path, fake.url)
    run_dir = tmp_path / "runs" / "g"
    with started(tmp_path, *sweep_args(params)) as proc:
        wait_for(lambda: running_with_progress(run_dir), proc, "a running status with done > 0")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    assert proc.returncode == 130
    doc = checked(run_dir, "interrupted")
    assert doc["exit_code"] == 130 and "Ctrl-C" in doc["reason"]


def test_a_budget_stop_reads_interrupted_with_exit_4_and_the_spend_against_the_budget(tmp_path, fake):
    params = budget_grid(tmp_path / "b.yaml", fake.url, topics=2, budget=0.2)
    assert run_stages(tmp_path, params).returncode == 0  # short replies first: the estimate lets the next one start
    budget_grid(params, fake.url, topics=12, budget=0.2)
    fake.configure(replies=[{"match": "One tip", "content": LONG}])
    assert run_stages(tmp_path, params).returncode == 4
    doc = checked(tmp_path / "runs" / "b", "interrupted")
    assert doc["exit_code"] == 4 and "budget" in doc["reason"]
    spend = doc["spend"]
    assert spend["budget_usd"] == 0.2 and 0 < spend["usd"] <= 0.2 + 1e-9 and spend["fraction"] <= 1.0
    assert "of budget $0.2000" in str(status(tmp_path / "runs" / "b"))


# -- hand-written folders: what the ledger and the lock say, without a sweep -----------------------------------

def test_a_start_with_no_end_is_running_while_its_driver_lives_and_crashed_once_it_is_gone(tmp_path):
    record_start(tmp_path, command="bench sweep p.yaml", budget_usd=None, stages=["collect"])
    with run_lock(tmp_path):  # this process is the driver: alive, holding the lock
        assert checked(tmp_path, "running")["lock"] == {**lock_holder(tmp_path), "held": True, "pid": os.getpid()}
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    line = json.loads((tmp_path / FILE).read_text())
    (tmp_path / FILE).write_text(json.dumps({**line, "sweep": "dead", "pid": int(gone.stdout)}) + "\n")
    assert "its driver (pid" in checked(tmp_path, "crashed")["reason"]


def test_a_driver_on_another_host_is_taken_at_its_word_and_the_reason_says_it_cannot_be_probed(tmp_path):
    line = {"event": "start", "sweep": "s1", "pid": 1, "host": "elsewhere.example", "started": "2026-01-01T00:00:00",
            "command": "bench sweep p.yaml", "budget_usd": None, "stages": ["collect"]}
    (tmp_path / FILE).write_text(json.dumps(line) + "\n")
    (tmp_path / ".lock").write_text(json.dumps({"host": "elsewhere.example", "pid": 1, "since": "x", "command": "c"}))
    doc = checked(tmp_path, "running")
    assert "cannot be probed" in doc["reason"] and doc["lock"]["held"] is None
    assert "cannot be probed" in doc["lock"]["how"] and socket.gethostname() != "elsewhere.example"
    record_end(tmp_path, "s1", 0)
    assert checked(tmp_path, "finished")["exit_code"] == 0


def test_the_schema_rejects_a_document_without_its_state_or_with_an_unknown_one(tmp_path):
    record_start(tmp_path, command="c", budget_usd=1.0, stages=["collect"])
    record_end(tmp_path, json.loads((tmp_path / FILE).read_text())["sweep"], 4)
    doc = checked(tmp_path, "interrupted")
    for broken in ({k: v for k, v in doc.items() if k != "state"}, {**doc, "state": "paused"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, SCHEMA)
    assert run_state(tmp_path).exit_code == 4


def test_a_folder_that_is_no_run_is_refused_with_one_line(tmp_path):
    out = command(tmp_path, "status", str(tmp_path))
    assert out.returncode == 2 and "is it a run folder" in out.stderr, out.stderr


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_watch_redraws_in_place_on_a_terminal_and_stops_when_the_sweep_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # lines are cut at the terminal's width: a long tmp_path (xdist) cut the state
    sweep_id = record_start(tmp_path, command="c", budget_usd=None, stages=["collect"])
    looks = []

    def seen(st):  # the second look finds the sweep ended
        looks.append(st.state)
        if len(looks) == 1:
            record_end(tmp_path, sweep_id, 0)

    screen = Terminal()
    with run_lock(tmp_path):
        assert watch(tmp_path, every_s=0.01, stream=screen, seen=seen) == 0
    assert looks == ["running", "finished"]
    first, second = screen.getvalue().split("\x1b[", 1)
    assert "RUNNING" in first and second.startswith(f"{first.count(chr(10))}F\x1b[J") and "FINISHED" in second


def test_the_status_notebook_passes_nbval_on_a_run_going_on_elsewhere(tmp_path):
    run_dir = tmp_path / "runs" / "elsewhere"
    run_dir.mkdir(parents=True)
    record_start(run_dir, command="bench sweep p.yaml", budget_usd=None, stages=["collect"])
    with run_lock(run_dir):  # held by this process while the notebook looks: a run going on elsewhere
        nb = parameterized_copy(ROOT / "notebooks" / "05_status.ipynb", tmp_path / "05_status.ipynb",
                                run_dir=str(run_dir))
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", str(nb)],
                             cwd=tmp_path, env=env(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:]


def test_a_folder_written_before_sweeps_jsonl_is_read_from_its_executions_and_open_attempts(tmp_path):
    record_attempt(tmp_path, ExecutionAttempt("collect", "collect", [], "2026-01-01T00:00:00", "2026-01-01T00:01:00",
                                              "interrupted"))
    doc = checked(tmp_path, "interrupted")
    assert doc["sweep"] is None and doc["exit_code"] is None and "executions.jsonl" in doc["reason"]
    marker = local_marker(tmp_path, ExecutionAttempt("judge", "judge", [], "2026-01-01T00:02:00", "", "running"), "s")
    assert marker is not None and checked(tmp_path, "crashed")["executions"][-1]["status"] == "lost"
