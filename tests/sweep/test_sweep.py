"""`bench sweep` end to end: one sweep with a report and a live MLflow run read by several tests (its lines, its
failure summary, report and MLflow run), the collect notebook under nbval, Ctrl-C; what the stages do, in-process.

The other sweeps of the command line: tests/sweep/test_jobs.py (--jobs, --per-cell, the lease server),
test_kill_resume.py (kill -9, bench status, the run lock), test_exit_codes.py (a crashed execution, the nightly script).
"""

import collections
import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.outcome import EXIT_FAILED_ITEMS
from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.grids import ROOT, env, sweep
from bench.testing.in_process import command, run_stages
from bench.tracking.mlflow_store import _import_mlflow
from tests.repo import parameterized_copy

N_CELLS, N_SCENARIOS = 6, 20


def six_cell_grid(path, url, cap=6, q_user="{topic}?", judges=None):
    """Write the grid: two models × three prompts (N_CELLS cells) × N_SCENARIOS generated scenarios."""
    return grids.grid(path, url, name="t",
                      models=[grids.model("m1", url, name="fake-a", params={"max_tokens": 8}),
                              grids.model("m2", url, name="fake-b")],
                      prompts=[grids.prompt("p", "Q {topic} {n}"),
                               grids.prompt("p", "Question about {topic} number {n}", version="v2"),
                               grids.prompt("q", q_user, system="be brief")],
                      scenarios=grids.generate(topic=["a", "b", "c", "d", "e"], n=[1, 2, 3, 4]),
                      judges=judges, limits={"max_concurrency": cap, "timeout_s": 10, "retries": 3})


def successes(tmp_path):
    recs = [c for c in RunStore(tmp_path / "runs" / "t").read(Candidate) if c.ok]
    return collections.Counter(c.id for c in recs)


def wait_until_no_kernel_writes(tmp_path, budget_s=120):
    """Wait until no process of this test's runs folder is left (its kernels are gone)."""
    import psutil

    deadline = time.monotonic() + budget_s
    while True:
        alive = []
        for p in psutil.process_iter(["pid"]):
            try:
                if p.pid != os.getpid() and p.environ().get("BENCH_RUNS") == str(tmp_path / "runs"):
                    alive.append(p.pid)
            except (psutil.Error, OSError):
                continue
        if not alive:
            return
        assert time.monotonic() < deadline, f"processes of the killed sweep still alive: {alive}"
        time.sleep(0.05)


# -- one sweep on the command line, its report and live MLflow run on: what its terminal, report and run say ----

TOPICS = 4
TIMED = r" \| [\d.]+/s \| \d+:\d\d elapsed"  # a progress line's rate and time


@pytest.fixture(scope="module")
def swept(tmp_path_factory, fake_server):
    """`bench sweep` of one model × TOPICS scenarios with a judge, report and tracking on (a tracking progress line
    after 0.05 quiet seconds): the judge's replies are never grades (parse failures) and t0's answer never comes
    (HTTP 503), so it ends with failed items (exit 3); then `--only-stage judge` (the judge stage's own execution:
    those grades asked again, failed again)."""
    tmp = tmp_path_factory.mktemp("swept")
    fake_server.reset()
    fake_server.configure(replies=[{"match": "The response to grade:", "content": "no grade"},
                                   {"match": "about t0.", "status": 503}])
    params = grids.grid(tmp / "g.yaml", fake_server.url, name="endings", topics=TOPICS,
                        judges=[grids.judge("grader", fake_server.url)])
    first = sweep(tmp, params, report=True, track=True, BENCH_MLFLOW_LIVE_S="1", BENCH_TRACKING_PROGRESS_S="0.05")
    judged = sweep(tmp, params, "--only-stage", "judge")
    fake_server.reset()
    return tmp, params, first, judged


def test_the_terminal_shows_progress_and_stage_lines_not_notebook_output(swept):
    """Of the notebooks' output, only bench's own lines reach the terminal: no table rows, no 'Empty DataFrame'."""
    _, _, first, judged = swept
    for out in (first, judged):
        assert out.returncode == EXIT_FAILED_ITEMS, out.stdout[-3000:] + out.stderr[-3000:]
        assert "Empty DataFrame" not in out.stdout and "Traceback" not in out.stdout + out.stderr
        for line in out.stdout.splitlines():  # "[execution] line": a progress line or a stage's one-line result
            if line.startswith("["):
                name, _, rest = line.partition("] ")
                assert name in ("[collect", "[judge") and rest.startswith(("collect: ", "judge: ", "judging: ")), \
                    out.stdout
    assert re.search(rf"^\[collect\] collect: 4/4 \(100%\) \| m1 4/4 \| failed 1{TIMED}$", first.stdout, re.M), \
        first.stdout
    assert re.search(rf"^\[collect\] judge: 3/3 \(100%\) \| grader 3/3 \| failed 3{TIMED}$", first.stdout, re.M)
    assert "[collect] collect: 4 planned, 0 already done, 3 new, 1 failed" in first.stdout
    assert "[judge] judge: 3 judgments planned, 0 already done, 0 new, 3 failed" in judged.stdout
    assert "  collect: finished, 4 item(s) failed: see the summary below [" in first.stdout  # one line per execution
    assert "  judge: finished, 3 item(s) failed: see the summary below [" in judged.stdout
    assert first.stdout.splitlines()[0].startswith("sweep endings: 1 cells")  # the plan first


def test_tracking_says_what_it_is_doing_while_it_runs(swept):
    lines = swept[2].stdout.splitlines()
    progress = [ln for ln in lines if re.match(r"tracking: (reading the run|opening the MLflow store|runs \d+/\d+|"
                                               r"artifacts|traces \d+/\d+) .*\(\d+s\)$", ln)]
    logged = [n for n, ln in enumerate(lines) if ln.startswith("tracking: logged to MLflow")]
    assert progress and len(logged) == 1 and lines.index(progress[0]) < logged[0], swept[2].stdout


def test_failed_items_show_the_same_counts_in_the_terminal_report_and_mlflow(swept):
    tmp, params, out, _ = swept
    assert "4 item(s) failed:" in out.stdout
    table = {tuple(ln.split()[:3]): int(ln.split()[3]) for ln in out.stdout.splitlines()
             if ln.startswith(("collect ", "judge ")) and len(ln.split()) >= 4 and ln.split()[3].isdigit()}
    assert table == {("collect", "m1", "server"): 1, ("judge", "grader", "parse"): 3}
    assert f"bench sweep {params}" in out.stdout and out.stdout.rstrip().splitlines()[-1].startswith("report: ")

    report = (tmp / "reports/endings/index.html").read_text()
    start = report.index("Failed items")
    section = html.unescape(report[start:report.index("Leaderboard", start)])
    assert re.search(r"collect.{0,200}m1.{0,200}server.{0,200}>1<", section, re.S)
    assert re.search(r"judge.{0,200}grader.{0,200}parse.{0,200}>3<", section, re.S)

    (parent,) = sweep_runs(tmp / "runs/endings")
    m = parent.data.metrics
    assert m["failed_items"] == 4 and m["failed.collect.m1.server"] == 1 and m["failed.judge.grader.parse"] == 3
    assert parent.data.tags["bench.outcome"] == "failed items"
    assert parent.data.tags["bench.workers"] == "1"  # runs/endings/executions.jsonl: one local worker


def sweep_runs(run_dir: Path, level: str = "sweep") -> list:
    """Return the runs of a run folder's own MLflow store at ``level`` (sweep: its parent runs; cell), oldest first."""
    client = _import_mlflow().MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"bench/{run_dir.name}")
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`bench.level` = '{level}'",
                              order_by=["start_time"])


def test_items_still_failed_end_the_live_run_failed_with_exit_code_3_and_tracking_again_keeps_it(swept):
    tmp, _, _, _ = swept
    run_dir = tmp / "runs/endings"
    (parent,) = sweep_runs(run_dir)  # the end-of-sweep logging went into the live run: no second parent run
    assert parent.info.status == "FAILED" and parent.data.tags["bench.exit_code"] == "3"
    assert parent.data.metrics["progress.collect.failed"] == 1
    assert parent.data.metrics["progress.collect.done"] == TOPICS
    again = command(tmp, "track", str(run_dir))  # tracked again later: the same run, still saying how its sweep ended
    assert again.returncode == 0, again.log
    (tracked,) = sweep_runs(run_dir)
    assert (tracked.info.run_id, tracked.info.status, tracked.info.end_time) == (parent.info.run_id, "FAILED",
                                                                                 parent.info.end_time)


# -- what the stages do, in this process -------------------------------------------------------------------------

def test_sweep_collects_every_candidate_then_resumes_with_zero_calls(tmp_path, fake):
    params = six_cell_grid(tmp_path / "grid.yaml", fake.url)
    first = run_stages(tmp_path, params)
    assert first.returncode == 0, first.log
    done = successes(tmp_path)
    assert len(done) == N_CELLS * N_SCENARIOS and set(done.values()) == {1}
    # prompt q@v1 ignores {n}: 30 candidates ask exactly what another asks, and one request answers both
    distinct = {(c.model, json.dumps(c.messages)) for c in RunStore(tmp_path / "runs" / "t").read(Candidate)}
    assert len(distinct) == N_CELLS * N_SCENARIOS - 2 * 15
    assert fake.stats()["requests"] == len(distinct)
    again = run_stages(tmp_path, params)
    assert again.returncode == 0 and fake.stats()["requests"] == len(distinct)
    assert "0 new" in again.stdout and "0 model calls" in again.stdout
    out = command(tmp_path, "validate", str(params))
    total = next(ln.split() for ln in out.stdout.splitlines() if ln.startswith("total "))
    assert total[1:] == ["120", "120", "0", "0", "0"], out.stdout  # items, done, requests, cached, to send


def test_bad_params_stop_before_any_call(tmp_path, fake):
    bad = six_cell_grid(tmp_path / "bad.yaml", fake.url, cap=4, q_user="{topic} {mood}?")
    result = run_stages(tmp_path, bad)
    assert result.returncode == 2 and "{mood}" in result.stderr and "q@v1" in result.stderr
    assert fake.stats()["requests"] == 0


def test_judging_before_anything_was_collected_says_how_to_collect(tmp_path, fake):
    """--only-stage judge on an empty run folder: one line saying what to run, exit code 2, no report, no MLflow."""
    params = grids.grid(tmp_path / "g.yaml", fake.url, topics=4, judges=[grids.judge("grader", fake.url)])
    out = command(tmp_path, "sweep", str(params), "--only-stage", "judge")  # report and tracking on
    assert out.returncode == 2 and out.stdout == "", out.log
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "nothing has been collected in " in lines[0], out.stderr
    assert f"collect first with: bench sweep {params} --only-stage collect" in lines[0]
    assert not (tmp_path / "reports").exists() and not list(tmp_path.rglob("mlflow.db"))
    assert fake.stats()["requests"] == 0


def test_collect_notebook_runs_under_nbval(tmp_path, fake):
    target = parameterized_copy(ROOT / "notebooks/01_collect.ipynb", tmp_path / "01_collect.ipynb",
                                params=str(six_cell_grid(tmp_path / "grid.yaml", fake.url)), grid_cells=["m1/p@v1"],
                                progress="text")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                             str(target)], cwd=ROOT, env=env(tmp_path), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert fake.stats()["requests"] == N_SCENARIOS


def judged_grid(tmp_path, url, topics=4, cap=8):
    """One model, one prompt, ``topics`` scenarios, one judge: what the terminal of a pipelined sweep shows."""
    return grids.grid(tmp_path / "g.yaml", url, topics=topics, judges=[grids.judge("grader", url)],
                      limits={"max_concurrency": cap, "timeout_s": 10, "retries": 0})


