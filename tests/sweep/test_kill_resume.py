"""A sweep killed with -9 mid-way, then resumed: what `bench status`, the run lock and the live MLflow run say of it
while it runs, once it is dead and as the next sweep resumes it; nothing lost, nothing asked twice but what was in
flight.

One story on the command line, read by every test here: `bench sweep` of one model × two prompts with a judge,
slow replies (500 ms), watched until its live MLflow run has grown, then killed with -9; resumed by a second
`bench sweep` (followed by `bench status --watch`), behind which a third sweep queues with ``--wait``.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import socket
import subprocess
import time
from types import SimpleNamespace

import jsonschema
import pytest

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.core.sweeps import FILE as SWEEPS
from bench.monitor import SCHEMA, status
from bench.monitor.counts import LEFT_OPEN
from bench.testing import grids
from bench.testing.grids import started, sweep_args
from bench.testing.in_process import command, run_stages
from bench.tracking.live import mark_crashed
from tests.sweep.test_sweep import wait_until_no_kernel_writes
from tests.tracking.test_live_run import client, done, running, wait_for

TOPICS, NS = 8, 8
ANSWERS = 2 * TOPICS * NS  # prompt q ignores {n}: its NS candidates of a topic ask one request
DISTINCT = TOPICS * NS + TOPICS
CAP = 2
LIVE = {"BENCH_MLFLOW_LIVE_S": "1"}  # a progress batch every second (10 s by default)


def params_file(tmp, url):
    return grids.grid(tmp / "k.yaml", url, name="k", models=[grids.model("m1", url, name="fake-a")],
                      prompts=[grids.prompt("p", "Q {topic} {n}"), grids.prompt("q", "{topic}?", system="be brief")],
                      scenarios=grids.generate(topic=[f"t{i}" for i in range(TOPICS)], n=list(range(1, NS + 1))),
                      judges=[grids.judge("grader", url, name="fake-judge")],
                      limits={"max_concurrency": CAP, "timeout_s": 10, "retries": 0})


def running_with_progress(run_dir):
    try:
        doc = status(run_dir).doc
    except Exception:  # the run folder is not there yet
        return None
    return doc if doc["state"] == "running" and sum(s["done"] for s in doc["stages"]) > 0 else None


def started_sweeps(run_dir) -> int:
    """Return how many sweeps of the run folder have started (its sweeps.jsonl's start lines, whole ones)."""
    try:
        lines = (run_dir / SWEEPS).read_text().splitlines()
    except OSError:
        return 0
    events = []
    for line in lines:
        try:
            events.append(json.loads(line)["event"])
        except (ValueError, KeyError):  # a line being written
            continue
    return events.count("start")


@pytest.fixture(scope="module")
def story(tmp_path_factory, fake_server):
    tmp = tmp_path_factory.mktemp("kill")
    run_dir = tmp / "runs" / "k"
    fake_server.reset()
    fake_server.configure(latency_ms=500)
    params = params_file(tmp, fake_server.url)
    seen = SimpleNamespace(tmp=tmp, run_dir=run_dir, params=params)
    with started(tmp, *sweep_args(params, track=True), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 **LIVE) as proc:
        seen.pid = proc.pid
        seen.running = wait_for("a running status with done > 0", lambda: running_with_progress(run_dir), proc)
        seen.status_json = command(tmp, "status", str(run_dir), "--json")
        seen.second = command(tmp, *sweep_args(params))  # the folder is locked by the running sweep
        seen.run_id = wait_for("RUNNING run", lambda: running(run_dir), proc)
        c = client(run_dir)
        seen.first_done = wait_for("progress metric above 0", lambda: done(c, seen.run_id), proc)
        seen.grown = wait_for("a larger progress metric",
                              lambda: done(c, seen.run_id) > seen.first_done and done(c, seen.run_id), proc)
        seen.live_while_running = c.get_run(seen.run_id).info.status
        seen.marked_while_running = mark_crashed(run_dir)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_until_no_kernel_writes(tmp)  # the kernel dies with the driver (PR_SET_PDEATHSIG)
    seen.crashed = status(run_dir).doc
    seen.partial = len(RunStore(run_dir).done_ids(Candidate))
    seen.executions_after_kill = (run_dir / "executions.jsonl").exists()
    seen.live_after_kill = c.get_run(seen.run_id).info.status
    seen.marked = [mark_crashed(run_dir), mark_crashed(run_dir)]
    seen.live_marked = c.get_run(seen.run_id).info

    fake_server.configure(latency_ms=50)
    t0 = time.monotonic()
    with (tmp / "resumed.log").open("w") as log, (tmp / "watch.log").open("w") as watched, \
            started(tmp, *sweep_args(params, track=True), stdout=log, stderr=subprocess.STDOUT, **LIVE) as resumed:
        wait_for("the second sweep's start", lambda: started_sweeps(run_dir) == 2, resumed)
        with started(tmp, "status", str(run_dir), "--watch", "--every", "0.2", stdout=watched) as watcher:
            seen.waiter = run_stages(tmp, params, wait=True)  # queued behind the resumed sweep
            resumed.wait(timeout=300)
            seen.elapsed = time.monotonic() - t0
            seen.watcher = watcher.wait(timeout=120), watcher.stderr.read()
    seen.resumed = resumed.returncode, (tmp / "resumed.log").read_text()
    seen.watched = (tmp / "watch.log").read_text()
    seen.stats = fake_server.stats()
    fake_server.reset()
    return seen


def checked(doc: dict, state: str) -> dict:
    jsonschema.validate(doc, SCHEMA)
    assert doc["state"] == state, json.dumps(doc, indent=1)[:3000]
    return doc


def test_bench_status_reads_a_running_sweep(story):
    doc = checked(story.running, "running")
    assert doc["sweep"]["pid"] == story.pid and doc["lock"] == {**doc["lock"], "held": True, "pid": story.pid}
    planned = {(r["stage"], r["id"]): r["planned"] for r in doc["items"]}
    assert planned == {("collect", "m1"): ANSWERS, ("judge", "grader"): ANSWERS}
    assert any(ex["status"] == "running" and ex["worker"] == f"local:{story.pid}" for ex in doc["executions"])
    assert sum(s["in_flight"] for s in doc["stages"]) > 0 and doc["rate"]["per_minute"] > 0
    cli = story.status_json
    assert cli.returncode == 0, cli.log
    assert checked(json.loads(cli.stdout), "running")["sweep"]["pid"] == story.pid


def test_a_second_sweep_of_the_same_run_folder_refuses_naming_the_holder(story):
    second = story.second
    assert second.returncode == 2, second.log
    lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "is being written by another sweep" in lines[0]
    assert f"host {socket.gethostname()}, PID {story.pid}, since 20" in lines[0] and "--wait" in lines[0]


def test_the_live_run_grows_while_the_sweep_runs_and_is_marked_killed_once_its_driver_is_dead(story):
    assert 0 < story.first_done < story.grown < ANSWERS
    assert story.live_while_running == "RUNNING" and story.marked_while_running is False  # its driver holds the lock
    assert story.live_after_kill == "RUNNING"  # nobody said otherwise yet
    assert story.marked == [True, False]  # once only
    assert story.live_marked.status == "KILLED"


def test_bench_status_reads_a_killed_sweep_as_crashed(story):
    doc = checked(story.crashed, "crashed")
    assert f"pid {story.pid}" in doc["reason"] and "stale lock" in doc["reason"], doc["reason"]
    assert doc["lock"]["held"] is False and doc["exit_code"] is None and doc["rate"]["eta_s"] is None
    assert all(s["in_flight"] == 0 for s in doc["stages"])
    assert any(a["status"] == "lost" and a.get("reason") == LEFT_OPEN for ex in doc["executions"]
               for a in ex["attempts"]), doc["executions"]  # as the next sweep will record it
    assert not story.executions_after_kill  # the killed driver recorded nothing


def test_the_resumed_sweep_gives_every_candidate_exactly_once_and_counts_what_it_asked_again(story):
    code, out = story.resumed
    assert code == 0, out[-3000:]  # the killed holder left no stuck lock
    assert 0 < story.partial < ANSWERS
    store = RunStore(story.run_dir)
    ok = collections.Counter(c.id for c in store.read(Candidate) if c.ok)
    assert len(ok) == ANSWERS and set(ok.values()) == {1}  # nothing lost, nothing twice
    assert len(store.done_ids(Judgment)) == ANSWERS
    # every answer paid for is kept, except those in flight at the kill (at most the cap)
    repeats = story.stats["by_model"]["fake-a"] - DISTINCT
    assert 0 <= repeats <= CAP
    if repeats:  # the resumed sweep gives an upper bound of what it asked again
        said = re.search(r"up to (\d+) request\(s\) were in flight when an execution stopped", out)
        assert said and int(said.group(1)) >= repeats, out[-2000:]


def test_the_next_sweep_records_the_killed_execution_as_lost(story):
    _, out = story.resumed
    assert "recorded as lost" in out, out[-3000:]
    lines = [json.loads(ln) for ln in (story.run_dir / "executions.jsonl").read_text().splitlines()]
    lost = [a for a in lines if a["status"] == "lost"]
    assert len(lost) == 1 and f"pid {story.pid} on" in lost[0]["reason"], lost
    assert lost[0]["worker"] == f"local:{story.pid}"
    assert {a["status"] for a in lines if a not in lost} == {"ok"}  # the resumed sweep's, and the waiter's
    assert not list((story.run_dir / "attempts").glob("*.json"))  # nothing left open


def test_wait_queues_behind_the_holder(story):
    waiter = story.waiter
    assert waiter.returncode == 0 and "waiting for run folder" in waiter.stderr, waiter.log
    events = [json.loads(ln) for ln in (story.run_dir / SWEEPS).read_text().splitlines()]
    starts = [e for e in events if e["event"] == "start"]
    ends = {e["sweep"]: e for e in events if e["event"] == "end"}
    assert len(starts) == 3 and starts[0]["sweep"] not in ends  # killed, resumed, waiter
    assert ends[starts[1]["sweep"]]["ended"] <= starts[2]["started"]  # it started once the holder was done


def test_watch_follows_the_resumed_sweep_to_its_end(story):
    code, err = story.watcher
    assert code == 0 and "\x1b[" not in story.watched, err  # a pipe gets plain lines, ending by themselves
    lines = story.watched.splitlines()
    assert lines[-1].split(" · ")[1] == "finished" and f"collect {ANSWERS}/{ANSWERS}" in lines[-1], story.watched
    doc = checked(status(story.run_dir).doc, "finished")
    assert doc["exit_code"] == 0 and doc["sweep"]["sweeps"] == 3
    assert [(s["stage"], s["planned"], s["done"], s["failed"]) for s in doc["stages"]] == \
        [("collect", ANSWERS, ANSWERS, 0), ("judge", ANSWERS, ANSWERS, 0)]


def test_the_resumed_sweep_is_a_new_live_run_finished_with_its_exit_code(story):
    c = client(story.run_dir)
    exp = c.get_experiment_by_name("bench/k")
    first, second = c.search_runs([exp.experiment_id], filter_string="tags.`bench.level` = 'sweep'",
                                  order_by=["start_time"])
    assert first.info.run_id == story.run_id and first.info.status == "KILLED"
    assert first.data.tags["bench.ended"] == "crashed" and "bench.exit_code" not in first.data.tags
    assert second.info.status == "FINISHED" and second.data.tags["bench.exit_code"] == "0"
    assert second.data.metrics["progress.collect.done"] == ANSWERS and second.data.metrics["answers.n"] == ANSWERS
    assert second.data.metrics["progress.collect.planned"] == ANSWERS and "progress.cost_usd" in second.data.metrics
    children = c.search_runs([exp.experiment_id], filter_string="tags.`bench.level` = 'cell'")
    assert children and all(r.data.tags["mlflow.parentRunId"] == second.info.run_id for r in children)
    history = c.get_metric_history(second.info.run_id, "progress.collect.done")
    assert history[-1].value == ANSWERS and [m.value for m in history] == sorted(m.value for m in history)
    assert len(history) <= story.elapsed / 1 + 2 < ANSWERS  # one batch a second at most, never one per answer
    assert [m.step for m in history] == sorted(m.step for m in history)  # step: seconds since the sweep started
    assert history[-1].step <= story.elapsed
