"""`bench sweep --jobs` and `--per-cell`: executions side by side, each in a kernel of its own told the run by
papermill parameters, under one lease server that holds the sweep's cap; what they record in executions.jsonl, and
what a reader of the run folder sees while they write (ClusterProgress).

One `--jobs 3` sweep of six cells with a judge, watched while it runs (its kernels, its progress), then a
`--per-cell` re-run of one model's cells, read by every test here.
"""

from __future__ import annotations

import collections
import io
import re
import socket
import subprocess
from types import SimpleNamespace

import psutil
import pytest

from bench.core.executions import read_attempts
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.estimate import planned_per_model, planned_progress
from bench.run import open_run
from bench.sweep.cluster import ClusterProgress
from bench.testing import grids
from bench.testing.grids import started, sweep, sweep_args
from tests.sweep.test_kernels import alive, kernels, parameters
from tests.sweep.test_sweep import N_CELLS, N_SCENARIOS, six_cell_grid

CAP = 6
ANSWERS = N_CELLS * N_SCENARIOS
DISTINCT = ANSWERS - 2 * 15  # prompt q@v1 ignores {n}: 15 requests per model answer two candidates each


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, fake_server):
    """`bench sweep --jobs 3` (150 ms a reply), its kernels and the progress read from its run folder recorded as it
    runs; then `bench sweep --per-cell --jobs 2 --cells m1` of the same folder."""
    tmp = tmp_path_factory.mktemp("jobs")
    fake_server.reset()
    fake_server.configure(latency_ms=150)
    params = six_cell_grid(tmp / "grid.yaml", fake_server.url, cap=CAP,
                           judges=[grids.judge("grader", fake_server.url, name="fake-judge")])
    run = open_run(params, run_dir=tmp / "runs" / "t")
    out = io.StringIO()
    progress = ClusterProgress.for_run(run, mode="text", every_s=0, heartbeat_s=3600, out=out)
    seen: dict[int, set[str]] = {}  # every kernel seen under the driver, with the BENCH_* names of its environment
    with started(tmp, *sweep_args(params, "--jobs", "3"), stderr=subprocess.STDOUT) as proc:
        while True:  # the driver's wait loop: update, look for kernels, wait a little for the sweep to end
            progress.update()
            for pid in kernels(proc.pid) - set(seen):
                try:
                    seen[pid] = {k for k in psutil.Process(pid).environ() if k.startswith("BENCH_")}
                except psutil.Error:  # gone meanwhile: counted, its environment unknown
                    seen[pid] = set()
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                continue
        log = proc.communicate(timeout=60)[0]
    final = progress.close()
    first = SimpleNamespace(returncode=proc.returncode, stdout=log, stats=fake_server.stats(),
                            attempts=read_attempts(tmp / "runs" / "t"))
    per_cell = sweep(tmp, params, "--per-cell", "--jobs", "2", "--cells", "m1")
    stats = fake_server.stats()
    fake_server.reset()
    return SimpleNamespace(tmp=tmp, run=run, first=first, per_cell=per_cell, stats=stats, kernels=seen,
                           progress=out.getvalue().splitlines(), final=final, env=grids.env(tmp))


def test_jobs_split_the_cap_so_the_sweep_never_exceeds_it(jobs):
    assert jobs.first.returncode == 0, jobs.first.stdout[-3000:]
    stats = jobs.first.stats
    assert stats["peak_in_flight"] <= CAP  # the lease server holds limits.max_concurrency across the executions
    assert stats["by_model"]["fake-a"] + stats["by_model"]["fake-b"] == DISTINCT  # each answer asked once
    assert f"collect: 3 execution(s), 3 at a time, cap {CAP} across all of them" in jobs.first.stdout
    done = collections.Counter(c.id for c in RunStore(jobs.run.dir).read(Candidate) if c.ok)
    assert len(done) == ANSWERS and set(done.values()) == {1}
    assert len(RunStore(jobs.run.dir).done_ids(Judgment)) == ANSWERS  # graded as they arrived


def test_per_cell_writes_one_notebook_per_cell(jobs):
    assert jobs.per_cell.returncode == 0, jobs.per_cell.stdout[-3000:] + jobs.per_cell.stderr[-3000:]
    notebooks = sorted(p.name for p in (jobs.run.dir / "notebooks").iterdir())
    assert notebooks == ["01_collect.job1.ipynb", "01_collect.job2.ipynb", "01_collect.job3.ipynb",
                         "01_collect.m1_p-v1.ipynb", "01_collect.m1_p-v2.ipynb", "01_collect.m1_q-v1.ipynb"]
    assert "collect: 3 execution(s), 2 at a time" in jobs.per_cell.stdout
    assert jobs.stats["requests"] == jobs.first.stats["requests"]  # everything was done: nothing asked again


def test_each_execution_starts_its_own_kernel_told_the_run_by_parameters_and_none_outlives_it(jobs):
    assert "collect.job1: ok" in jobs.first.stdout and "collect.job3: ok" in jobs.first.stdout
    assert len(jobs.kernels) == 3, jobs.kernels  # three executions, three kernel processes: nothing shared
    assert not alive(set(jobs.kernels))
    driver = {k for k in jobs.env if k.startswith("BENCH_")}
    assert all(names <= driver for names in jobs.kernels.values()), jobs.kernels  # no BENCH_* channel of its own
    for job in ("job1", "job2", "job3"):
        given = parameters(jobs.run.dir / "notebooks" / f"01_collect.{job}.ipynb")
        assert str(given["lease_server"]).startswith("unix:") and given["sweep_cap"] == CAP, given
        assert given["lock_held"] is True and given["progress"] == "sweep" and given["shard"] == job, given
        assert given["run_dir"] == str(jobs.run.dir) and given["batch"] is False and given["judge"] is True, given


def test_a_local_sweep_records_each_execution_with_its_worker_and_host(jobs):
    lines = jobs.first.attempts
    assert sorted(a["name"] for a in lines) == ["collect.job1", "collect.job2", "collect.job3"]
    assert sorted(c for a in lines for c in a["cells"]) == sorted(c.key for c in jobs.run.cells)
    for a in lines:
        assert a["stage"] == "collect" and a["status"] == "ok" and a["attempt"] == 1
        assert a["hostname"] == socket.gethostname() and a["worker"].startswith("local:")
        assert len(a["cells"]) == 2 and a["cell"] is None and a["started"] <= a["ended"]  # "cell": one cell's only
    assert len({a["worker"] for a in lines}) == 1  # one driver process: one worker
    again = read_attempts(jobs.run.dir)  # the re-run appends its own attempts (nothing to do, still ran)
    assert again[:3] == lines and len(again) == 6
    assert sorted(a["cell"] for a in again[3:]) == ["m1/p@v1", "m1/p@v2", "m1/q@v1"] and all(
        a["cells"] == [a["cell"]] and a["status"] == "ok" for a in again[3:])
    assert len({a["worker"] for a in again[3:]} - {lines[0]["worker"]}) == 1  # the re-run's driver


def test_a_two_execution_sweep_followed_from_its_run_folder(jobs):
    run = jobs.run
    assert planned_per_model(run) == {"m1": ANSWERS // 2, "m2": ANSWERS // 2}
    planned = planned_progress(run)
    assert planned.judgments == ANSWERS and planned.cells == {c.key for c in run.cells}
    assert planned.rubrics == {("grader", "tip-v1@1")}  # rubrics/tip-v1.md: id tip-v1, version 1
    final = jobs.final
    assert final.startswith(f"collect {ANSWERS}/{ANSWERS} (100%) · m1 60/60 · m2 60/60 · judged {ANSWERS}/{ANSWERS} "
                            f"(100%) · failed 0"), final
    counts = [tuple(int(n) for n in re.match(rf"collect (\d+)/{ANSWERS} .* judged (\d+)/{ANSWERS}", ln).groups())
              for ln in jobs.progress]
    assert counts == sorted(counts) and len(set(counts[:-1])) == len(counts) - 1  # forward, a line per change,
    assert jobs.progress[-1] == final  # and close's final line
    assert any(0 < answers < ANSWERS for answers, _ in counts), counts  # seen while the executions were writing
    shards = [p for p in RunStore(run.dir).files(Candidate) if p.name != "candidates.jsonl"]
    assert len(shards) == 3, shards  # each execution its own shard
