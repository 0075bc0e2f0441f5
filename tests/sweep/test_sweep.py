"""`bench sweep` end to end: papermill executions against the fake provider, resume, jobs, failures."""

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.grids import ROOT, bench, env, started, sweep, sweep_args
from tests.repo import parameterized_copy

N_CELLS, N_SCENARIOS = 6, 20


def six_cell_grid(path, url, cap=6, q_user="{topic}?"):
    """Write the grid: two models × three prompts (N_CELLS cells) × N_SCENARIOS generated scenarios."""
    return grids.grid(path, url, name="t",
                      models=[grids.model("m1", url, name="fake-a", params={"max_tokens": 8}),
                              grids.model("m2", url, name="fake-b")],
                      prompts=[grids.prompt("p", "Q {topic} {n}"),
                               grids.prompt("p", "Question about {topic} number {n}", version="v2"),
                               grids.prompt("q", q_user, system="be brief")],
                      scenarios=grids.generate(topic=["a", "b", "c", "d", "e"], n=[1, 2, 3, 4]),
                      limits={"max_concurrency": cap, "timeout_s": 10, "retries": 3})


@pytest.fixture
def grid(tmp_path, fake):
    def make(cap=6):
        return six_cell_grid(tmp_path / "grid.yaml", fake.url, cap)
    return make


def successes(tmp_path):
    recs = [c for c in RunStore(tmp_path / "runs" / "t").read(Candidate) if c.ok]
    return collections.Counter(c.id for c in recs)


def test_sweep_collects_every_candidate_then_resumes_with_zero_calls(tmp_path, fake, grid):
    params = grid()
    first = sweep(tmp_path, params)
    assert first.returncode == 0, first.stdout + first.stderr
    done = successes(tmp_path)
    assert len(done) == N_CELLS * N_SCENARIOS and set(done.values()) == {1}
    # prompt q@v1 ignores {n}: 30 candidates ask exactly what another asks, and one request answers both
    distinct = {(c.model, json.dumps(c.messages)) for c in RunStore(tmp_path / "runs" / "t").read(Candidate)}
    assert len(distinct) == N_CELLS * N_SCENARIOS - 2 * 15
    assert fake.stats()["requests"] == len(distinct)
    assert (tmp_path / "runs/t/notebooks/01_collect.ipynb").exists()
    again = sweep(tmp_path, params)
    assert again.returncode == 0 and fake.stats()["requests"] == len(distinct)
    assert "0 new" in again.stdout and "0 model calls" in again.stdout
    out = bench(tmp_path, "validate", str(params))
    total = next(ln.split() for ln in out.stdout.splitlines() if ln.startswith("total "))
    assert total[1:] == ["120", "120", "0", "0", "0"], out.stdout  # items, done, requests, cached, to send


def test_jobs_split_the_cap_so_the_sweep_never_exceeds_it(tmp_path, fake, grid):
    fake.configure(latency_ms=150)
    result = sweep(tmp_path, grid(cap=6), "--jobs", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    stats = fake.stats()
    assert stats["peak_in_flight"] <= 6
    assert stats["requests"] == N_CELLS * N_SCENARIOS - 2 * 15  # q@v1 asks 15 requests twice per model: sent once
    notebooks = sorted(p.name for p in (tmp_path / "runs/t/notebooks").iterdir())
    assert notebooks == ["01_collect.job1.ipynb", "01_collect.job2.ipynb", "01_collect.job3.ipynb"]
    assert len(successes(tmp_path)) == N_CELLS * N_SCENARIOS


def test_per_cell_writes_one_notebook_per_cell(tmp_path, fake, grid):
    result = sweep(tmp_path, grid(), "--per-cell", "--jobs", "2", "--cells", "m1")
    assert result.returncode == 0, result.stdout + result.stderr
    notebooks = sorted(p.name for p in (tmp_path / "runs/t/notebooks").iterdir())
    assert notebooks == ["01_collect.m1_p-v1.ipynb", "01_collect.m1_p-v2.ipynb", "01_collect.m1_q-v1.ipynb"]
    assert len(successes(tmp_path)) == 3 * N_SCENARIOS


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


def test_kill_9_mid_sweep_then_resume_gives_every_candidate_exactly_once(tmp_path, fake, grid):
    fake.configure(latency_ms=60)
    params = grid(cap=4)
    store = tmp_path / "runs/t/candidates.jsonl"
    with started(tmp_path, *sweep_args(params), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not store.exists() or store.read_bytes().count(b"\n") < 20):
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_until_no_kernel_writes(tmp_path)  # the kernel dies with the driver (PR_SET_PDEATHSIG)
    partial = len(successes(tmp_path))
    assert 20 <= partial < N_CELLS * N_SCENARIOS
    resumed = sweep(tmp_path, params)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    done = successes(tmp_path)
    assert len(done) == N_CELLS * N_SCENARIOS and set(done.values()) == {1}  # nothing lost, nothing twice
    # every request paid for an answer we kept, except those in flight at the kill (at most the cap)
    distinct = N_CELLS * N_SCENARIOS - 2 * 15  # q@v1 ignores {n}: one request answers two candidates
    # paid twice: what was in flight at the kill (up to the cap) plus at most one cache commit group
    repeats = fake.stats()["requests"] - distinct
    assert 0 <= repeats <= 2 * 4
    if repeats:  # the resumed sweep gives an upper bound of what it asked again
        said = re.search(r"up to (\d+) request\(s\) were in flight when an execution stopped", resumed.stdout)
        assert said and int(said.group(1)) >= repeats, resumed.stdout[-2000:]


def test_a_failed_execution_is_reported_and_the_others_finish(tmp_path, fake, grid):
    params = grid()
    blocker = tmp_path / "runs/t/candidates.job1.jsonl"
    blocker.parent.mkdir(parents=True)
    blocker.symlink_to(tmp_path / "no-such-folder" / "x")  # job1 cannot append: its execution fails
    result = sweep(tmp_path, params, "--jobs", "2")
    assert result.returncode == 1
    assert "collect.job1: FAILED" in result.stdout and "01_collect.job1.ipynb" in result.stdout
    assert "collect.job2: ok" in result.stdout
    lines = (tmp_path / "runs/t/candidates.job2.jsonl").read_bytes().splitlines()
    assert len({Candidate.model_validate_json(ln).id for ln in lines}) == 3 * N_SCENARIOS
    # job1's replies were paid for: they are kept in a rescue file that readers merge, never asked again
    assert len(RunStore(tmp_path / "runs/t").done_ids(Candidate)) == N_CELLS * N_SCENARIOS


def test_a_crashed_stage_stops_judging_reporting_and_tracking(tmp_path, fake):
    params = grids.grid(tmp_path / "g.yaml", fake.url, topics=3, judges=[grids.judge("grader", fake.url)])
    blocker = tmp_path / "runs/g/candidates.jsonl"
    blocker.parent.mkdir(parents=True)
    blocker.mkdir()  # the collect execution cannot append: it crashes
    result = bench(tmp_path, "sweep", str(params), "--only-stage", "collect")
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "collect: FAILED" in result.stdout and "report and tracking: skipped, the run is incomplete" in result.stdout
    assert not (tmp_path / "reports/g").exists() and "tracking: logged" not in result.stdout  # its live MLflow run
    # ends FAILED with its progress only (tests/tracking/test_live_run.py)
    prompts = [{"id": "p", "version": "v1", "user": "One tip about {topic}."},
               {"id": "q", "version": "v1", "user": "Another tip about {topic}."}]
    both = grids.grid(tmp_path / "h.yaml", fake.url, name="h", topics=3, prompts=prompts,
                      judges=[grids.judge("grader", fake.url)])
    (tmp_path / "runs/h/candidates.job1.jsonl").mkdir(parents=True)  # one of two collect executions crashes
    two = bench(tmp_path, "sweep", str(both), "--jobs", "2")
    assert two.returncode == 1, two.stdout[-2000:]
    assert "judge: not started, because collect.job1 failed" in two.stdout and "collect.job2: ok" in two.stdout
    assert not (tmp_path / "runs/h/notebooks/02_judge.job1.ipynb").exists()
    assert not (tmp_path / "reports/h").exists() and "tracking: logged" not in two.stdout


def test_bad_params_stop_before_any_call(tmp_path, fake):
    bad = six_cell_grid(tmp_path / "bad.yaml", fake.url, cap=4, q_user="{topic} {mood}?")
    result = sweep(tmp_path, bad)
    assert result.returncode == 2 and "{mood}" in result.stderr and "q@v1" in result.stderr
    assert fake.stats()["requests"] == 0


def test_collect_notebook_runs_under_nbval(tmp_path, fake, grid):
    target = parameterized_copy(ROOT / "notebooks/01_collect.ipynb", tmp_path / "01_collect.ipynb",
                                params=str(grid()), grid_cells=["m1/p@v1"], progress="text")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                             str(target)], cwd=ROOT, env=env(tmp_path), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert fake.stats()["requests"] == N_SCENARIOS


def judged_grid(tmp_path, url, topics=4, cap=8):
    """One model, one prompt, ``topics`` scenarios, one judge: what the terminal of a pipelined sweep shows."""
    return grids.grid(tmp_path / "g.yaml", url, topics=topics, judges=[grids.judge("grader", url)],
                      limits={"max_concurrency": cap, "timeout_s": 10, "retries": 0})


def test_the_terminal_shows_progress_and_stage_lines_not_notebook_output(tmp_path, fake):
    """Of the notebooks' output, only bench's own lines reach the terminal: no table rows, no 'Empty DataFrame'."""
    params = judged_grid(tmp_path, fake.url)
    first = sweep(tmp_path, params)  # 01_collect, judging as answers arrive
    judged = sweep(tmp_path, params, "--only-stage", "judge")  # 02_judge
    for out in (first, judged):
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "Empty DataFrame" not in out.stdout and "Traceback" not in out.stdout + out.stderr
        for line in out.stdout.splitlines():  # "[execution] line": a progress line or a stage's one-line result
            if line.startswith("["):
                name, _, rest = line.partition("] ")
                assert name in ("[collect", "[judge") and rest.startswith(("collect: ", "judge: ", "judging: ")), \
                    out.stdout
    assert re.search(r"^\[collect\] collect: 4/4 \(100%\) \| m1 4/4 \| failed 0 \|", first.stdout, re.M), first.stdout
    assert re.search(r"^\[collect\] judge: 4/4 \(100%\) \| grader 4/4 \| failed 0 \|", first.stdout, re.M)
    assert "[collect] collect: 4 planned, 0 already done, 4 new, 0 failed" in first.stdout
    assert "[judge] judge: 4 judgments planned, 4 already done, 0 new, 0 failed" in judged.stdout
    assert "  collect: ok [" in first.stdout and "  judge: ok [" in judged.stdout  # one line per execution
    assert first.stdout.splitlines()[0].startswith("sweep g: 1 cells")  # the plan first


def test_judging_before_anything_was_collected_says_how_to_collect(tmp_path, fake):
    """--only-stage judge on an empty run folder: one line saying what to run, exit code 2, no report, no MLflow."""
    params = judged_grid(tmp_path, fake.url)
    out = bench(tmp_path, "sweep", str(params), "--only-stage", "judge")  # report and tracking on
    assert out.returncode == 2 and out.stdout == "", out.stdout + out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "nothing has been collected in " in lines[0], out.stderr
    assert f"collect first with: bench sweep {params} --only-stage collect" in lines[0]
    assert not (tmp_path / "reports").exists() and not list(tmp_path.rglob("mlflow.db"))
    assert fake.stats()["requests"] == 0
