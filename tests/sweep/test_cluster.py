"""`bench sweep --cluster` on a real Dask cluster on loopback: a scheduler and two workers, separate processes.

Every process binds 127.0.0.1 and is stopped by its PID (bench.testing.dask_cluster). The sweeps talk to
the loopback fake provider, which counts requests in flight per model: the caps must hold across both
workers; a worker SIGKILLed mid-sweep must leave the same records as a single-machine run. The sweeps whose
subject is the command (its report rendered on a worker, its warning, a worker or the scheduler lost, Ctrl-C)
run as `bench sweep`; the others run their driver in-process (bench.testing.in_process.command), their kernels on
the cluster's workers.
"""

from __future__ import annotations

import collections
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path

import psutil
import pytest

pytest.importorskip("distributed", reason="needs the 'cluster' extra: pip install -e '.[cluster]' (make setup does)")

from bench.core.records import Candidate, Judgment  # noqa: E402
from bench.core.store import RunStore  # noqa: E402
from bench.testing.dask_cluster import LoopbackDaskCluster  # noqa: E402
from bench.testing import grids  # noqa: E402
from bench.testing.grids import ROOT, generate, grid, judge, model, prompt  # noqa: E402
from bench.testing.in_process import command, run_stages  # noqa: E402
from bench.testing.processes import free_port  # noqa: E402
from bench.testing.terminal import Terminal  # noqa: E402
from tests.sweep.test_interrupt import requests_after  # noqa: E402

PROMPTS = [prompt("p", "Q {topic} {n}"), prompt("q", "{topic} {n}?", system="be brief")]
BUDGET_S = 600  # a loaded 2-core machine


sweep = partial(grids.sweep, report=True, timeout=BUDGET_S)  # the report unless --no-report


def started_sweep(tmp_path: Path, params: Path, *args: str, **popen) -> AbstractContextManager[subprocess.Popen]:
    """Start ``bench sweep PARAMS ARGS`` as :func:`sweep` runs it; kill what is left of it on leaving the block."""
    return grids.started(tmp_path, *grids.sweep_args(params, *args, report=True), **popen)


def cluster_grid(tmp_path: Path, url: str, topics: int = 5, *, name: str = "c", **overrides: object) -> Path:
    """Write ``<name>.yaml``: two capped models and a capped judge on ``topics`` × 2 scenarios; each of
    ``overrides`` replaces a top-level key."""
    models = [model("m1", url, name="fake-a", max_concurrency=2), model("m2", url, name="fake-b", max_concurrency=3)]
    judges = [judge("grader", url, name="fake-judge", max_concurrency=2)]
    keys = {"models": models, "prompts": PROMPTS, "judges": judges,
            "scenarios": generate(topic=[f"t{i}" for i in range(topics)], n=[1, 2]),
            "limits": {"max_concurrency": 6, "timeout_s": 20, "retries": 2}}
    return grid(tmp_path / f"{name}.yaml", url, name=name, **{**keys, **overrides})


def ids(run_dir: Path, kind: type) -> collections.Counter:
    return collections.Counter(r.id for r in RunStore(run_dir).read(kind) if r.ok)


def attempts(run_dir: Path) -> list[dict]:
    path = run_dir / "executions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def cluster():
    with LoopbackDaskCluster(2, nthreads=2) as c:
        yield c


@pytest.fixture(scope="module")
def local_ids(tmp_path_factory, fake_server):
    """The candidate and judgment ids of the same grid swept on this machine (no cluster, in-process)."""
    tmp = tmp_path_factory.mktemp("local")
    fake_server.reset()
    result = run_stages(tmp, cluster_grid(tmp, fake_server.url))
    assert result.returncode == 0, result.log
    LOCAL_REQUESTS.append(_answers_asked(fake_server.stats()))
    return ids(tmp / "runs" / "c", Candidate), ids(tmp / "runs" / "c", Judgment)


LOCAL_REQUESTS: list[int] = []  # the answers the local run of the grid asked the provider for


def _answers_asked(stats: dict) -> int:
    """The candidate requests (not the judge's: identical answers of two cells are judged once locally, from the
    response cache, but may be judged twice by executions running side by side on two workers)."""
    return stats["by_model"].get("fake-a", 0) + stats["by_model"].get("fake-b", 0)


def environ(proc: psutil.Process) -> bytes:
    try:
        return Path(f"/proc/{proc.pid}/environ").read_bytes()
    except OSError:
        return b""


def is_kernel(proc: psutil.Process) -> bool:
    try:
        return "ipykernel" in " ".join(proc.cmdline())
    except psutil.Error:
        return False


def test_caps_hold_across_two_workers_records_match_a_local_run_and_the_report_is_rendered_there(
        tmp_path, fake, cluster, local_ids):
    """`bench sweep --cluster` on a plain-TCP scheduler, watched while it runs: a one-line warning first, and the
    lease token its kernels hold in no task spec a client of the scheduler could read."""
    fake.configure(latency_ms=400)
    run_dir = tmp_path / "runs" / "c"
    with started_sweep(tmp_path, cluster_grid(tmp_path, fake.url), "--cluster", cluster.address) as proc:
        _wait_for_running_attempt(run_dir, cluster, proc)
        kernel = next(p for w in cluster.workers for p in psutil.Process(w.pid).children(recursive=True)
                      if is_kernel(p))
        token = re.search(rb"BENCH_LIMITS_TOKEN=([0-9a-f]+)", environ(kernel)).group(1)
        from distributed import Client

        with Client(cluster.address, timeout="30s") as client:
            # every task's spec as a client would get it, pickled on the scheduler (a lambda: sent by value)
            specs = client.run_on_scheduler(
                lambda dask_scheduler: [pickle.dumps(t.run_spec) for t in dask_scheduler.tasks.values()])
        assert specs and not [s for s in specs if token in s], "the lease token travels in a task spec"
        out, err = proc.communicate(timeout=BUDGET_S)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    warning = [ln for ln in err.splitlines() if "plain TCP" in ln]
    assert len(warning) == 1 and cluster.address in warning[0], err[-3000:]
    assert "lease token" in warning[0] and "provider keys" in warning[0] and "record" in warning[0]
    assert err.index(warning[0]) == 0  # the first thing the sweep says on stderr, before it connects
    stats = fake.stats()
    peaks = stats["peak_in_flight_by_model"]
    assert peaks["fake-a"] <= 2 and peaks["fake-b"] <= 3 and peaks["fake-judge"] <= 2, peaks
    assert stats["peak_in_flight"] <= 6  # limits.max_concurrency, across both workers together
    assert max(peaks.values()) >= 2  # the caps were reached, not trivially held
    cands, judged = ids(run_dir, Candidate), ids(run_dir, Judgment)
    assert (cands, judged) == local_ids and set(cands.values()) == {1}  # same ids, each once
    lines = attempts(run_dir)
    assert {a["stage"] for a in lines} == {"collect"}  # judged as answers arrived
    assert len(lines) == 4 and all(a["status"] == "ok" and a["attempt"] == 1 for a in lines)
    assert all(a["worker"].startswith("tcp://127.0.0.1:") for a in lines)
    assert {a["cell"] for a in lines} == {"m1/p@v1", "m1/q@v1", "m2/p@v1", "m2/q@v1"}
    report = (tmp_path / "reports" / "c" / "index.html").read_text()  # rendered by a worker task
    assert f"ran on {len({a['worker'] for a in lines})} worker(s) on 1 host(s)" in report

    # the same grid under another name: the workers answer it from their cache, and the driver's estimate says so
    # (it reads the folder the workers wrote)
    again = command(tmp_path, *grids.sweep_args(cluster_grid(tmp_path, fake.url, name="c2"), "--cluster",
                                                cluster.address))
    assert again.returncode == 0, again.log
    total = next(ln.split() for ln in again.stdout.splitlines() if ln.startswith("total "))
    assert total[3] == "0" and total[1] == total[2] != "0", again.stdout[-3000:]  # requests, cached, to send
    assert fake.stats()["requests"] == stats["requests"]


def test_an_rpm_window_holds_across_two_workers(tmp_path, fake, cluster):
    # rpm 4 per 1 s window, 0.4 s a request: four starts in any window means at most four requests ever in
    # flight at the provider. Two cells on two workers, each keeping its own window, would overlap bursts.
    fake.configure(latency_ms=400)
    params = grid(tmp_path / "r.yaml", fake.url, name="c", models=[model("m1", fake.url, name="fake-r", rpm=4)],
                  prompts=PROMPTS, scenarios=generate(topic=["a", "b", "c"], n=[1, 2, 3]),
                  limits={"max_concurrency": 8, "timeout_s": 20, "retries": 2, "rate_window_s": 1.0})
    result = command(tmp_path, *grids.sweep_args(params, "--cluster", cluster.address))
    assert result.returncode == 0, result.log
    stats = fake.stats()
    assert stats["by_model"] == {"fake-r": 18} and stats["peak_in_flight_by_model"]["fake-r"] <= 4
    assert len(attempts(tmp_path / "runs" / "c")) == 2  # two kernels, wherever Dask put them, shared one window


def test_a_lost_worker_reruns_its_execution_elsewhere_and_a_lost_scheduler_is_one_message(tmp_path, fake, local_ids):
    """On a cluster of two slots (2 workers × 1 thread): a worker SIGKILLed mid-sweep, whose execution (2 of the 4
    cells: both models) runs again on the other worker, asking again only what was in flight; then, on another such
    cluster, the scheduler SIGKILLed mid-way through a sweep: one line, and a re-run resumes it."""
    fake.configure(latency_ms=300)
    params = cluster_grid(tmp_path, fake.url, topics=10)  # 20 scenarios × 4 cells = 80 answers
    run_dir = tmp_path / "runs" / "c"
    gone = tmp_path / "gone"  # the second sweep's runs and response cache: nothing of the first's is cached there
    gone.mkdir()
    with LoopbackDaskCluster(2, nthreads=1) as c:
        with started_sweep(tmp_path, params, "--cluster", c.address, "--no-report", stderr=subprocess.STDOUT) as proc:
            victim, shard = _wait_for_running_attempt(run_dir, c, proc, records=10, with_shard=True)
            answered = _answers_in(run_dir, shard)  # written before the kill (more may be on their way)
            os.kill(victim.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=BUDGET_S)
    asked = _answers_asked(fake.stats())
    fake.configure(latency_ms=400)
    again = cluster_grid(gone, fake.url)
    with LoopbackDaskCluster(2, nthreads=1) as c:
        with started_sweep(gone, again, "--cluster", c.address, "--no-report") as lost:
            _wait_for_running_attempt(gone / "runs" / "c", c, lost)
            os.killpg(c.scheduler.pid, signal.SIGKILL)
            lost_out, lost_err = lost.communicate(timeout=BUDGET_S)
    assert proc.returncode == 0, out[-4000:]
    lines = [a for a in attempts(run_dir) if a["stage"] == "collect"]  # then judge: what the lost kernel left
    assert {a["name"] for a in lines} == {"collect.job1", "collect.job2"}, lines
    assert all(len(a["cells"]) == 2 and len({cell.split("/")[0] for cell in a["cells"]}) == 2 for a in lines)
    lost_attempts = [a for a in lines if a["status"] == "lost"]
    assert len(lost_attempts) == 1 and lost_attempts[0]["attempt"] == 1 and answered >= 10
    rerun = [b for b in lines if b["name"] == lost_attempts[0]["name"] and b["attempt"] > 1]
    assert rerun and rerun[-1]["status"] == "ok" and rerun[-1]["worker"] != lost_attempts[0]["worker"]
    assert "ran more than once" in out and "attempt 1 lost with its worker tcp://127.0.0.1:" in out
    cands, judged = ids(run_dir, Candidate), ids(run_dir, Judgment)
    assert len(cands) == 80 and set(cands.values()) == {1} and len(judged) == 80 and set(judged.values()) == {1}
    asked_twice = asked - 80
    # at most what the killed kernel had in flight (limits.max_concurrency 6 across the sweep), never the answers
    # it had already received: those are in the response cache, and its retry took them from there
    assert 0 <= asked_twice <= 6, (asked, out[-2000:])
    said = re.search(r"up to (\d+) request\(s\) were in flight when an execution stopped", out)
    assert asked_twice == 0 or (said and int(said.group(1)) >= asked_twice), out[-2000:]

    assert lost.returncode != 0, lost_out[-3000:]
    said = [ln for ln in lost_err.splitlines() if ln.strip() and "is plain TCP" not in ln]  # that warning came first
    assert len(said) == 1 and f"the Dask scheduler at {c.address} went away mid-sweep" in said[0], lost_err[-3000:]
    assert "run the same command again to resume" in said[0]
    fake.configure(latency_ms=20)
    resumed = run_stages(gone, again)
    assert resumed.returncode == 0, resumed.log
    cands, judged = ids(gone / "runs" / "c", Candidate), ids(gone / "runs" / "c", Judgment)
    assert (cands, judged) == local_ids and set(cands.values()) == {1}


def _answers_in(run_dir: Path, shard: str) -> int:
    """The answers an execution's shard holds now."""
    path = run_dir / f"candidates.{shard}.jsonl"
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def _wait_for_running_attempt(run_dir: Path, c: LoopbackDaskCluster, proc: subprocess.Popen, records: int = 1,
                              with_shard: bool = False):
    """Return a worker process that runs an execution which has already written ``records`` answers (readiness:
    files); with ``with_shard``, also the shard that execution writes."""
    from distributed import Client

    with Client(c.address, timeout="30s") as client:
        names = {addr: w["name"] for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()}
    deadline = time.monotonic() + BUDGET_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before a worker could be killed"
        for path in sorted((run_dir / "attempts").glob("*.json")):
            try:
                a = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            shard = Path(a.get("notebook", "")).stem.partition(".")[2]  # 01_collect.<shard>: the shard it writes
            enough = (_answers_in(run_dir, shard) >= records if records > 1
                      else any(run_dir.glob("candidates.*.jsonl")))
            if a.get("status") == "running" and enough:
                name = names[a["worker"]]
                worker = next(p for p in c.workers if f"--name {name} " in " ".join(map(str, p.args)) + " ")
                return (worker, shard) if with_shard else worker
        time.sleep(0.05)  # polling files another process writes
    raise AssertionError("no execution started on the cluster")


def test_an_unreachable_scheduler_is_one_message_before_any_call(tmp_path, fake):
    port = free_port()  # nothing listens there
    result = command(tmp_path, *grids.sweep_args(cluster_grid(tmp_path, fake.url), "--cluster",
                                                 f"tcp://127.0.0.1:{port}", "--cluster-wait", "5"))
    assert result.returncode == 2, result.log  # a scheduler that does not answer is given up on within seconds
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and "is plain TCP" not in ln]
    assert len(lines) == 1 and f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in lines[0], result.stderr
    assert fake.stats()["requests"] == 0


def test_a_worker_with_another_bench_is_refused_by_name(tmp_path, fake):
    other = tmp_path / "other"
    shutil.copytree(ROOT / "bench", other / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "bench" / "core" / "errors.py", "a") as fh:
        fh.write("\n# another version\n")
    broken = tmp_path / "broken"
    (broken / "bench").mkdir(parents=True)
    (broken / "bench" / "__init__.py").write_text("raise ImportError('bench is not installed here')\n")
    with LoopbackDaskCluster(1, nthreads=1) as c:
        c.add_worker("stale", {"PYTHONPATH": str(other)})
        c.add_worker("bare", {"PYTHONPATH": str(broken)})
        c.wait_for_workers(3)
        result = command(tmp_path, "sweep", str(cluster_grid(tmp_path, fake.url)), "--cluster", c.address)
    assert result.returncode == 2, result.log
    assert "cluster check failed before any model call" in result.stderr
    problems = [ln for ln in result.stderr.splitlines() if ln.startswith("  tcp://")]
    assert len(problems) == 2, result.stderr
    assert any("runs bench 0.1.0 (source" in ln for ln in problems)
    assert any("cannot run bench" in ln and "bench is not installed here" in ln for ln in problems)
    assert fake.stats()["requests"] == 0


def test_the_collect_notebook_runs_its_cells_on_the_cluster(tmp_path, fake, cluster, local_ids):
    from tests.repo import parameterized_copy

    params = cluster_grid(tmp_path, fake.url)
    target = parameterized_copy(ROOT / "notebooks/01_collect.ipynb", tmp_path / "01_collect.ipynb",
                                params=str(params), cluster=cluster.address, judge=True, progress="text")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                             str(target)], cwd=ROOT, env=grids.env(tmp_path), capture_output=True, text=True,
                            timeout=BUDGET_S)
    assert result.returncode == 0, result.stdout[-3000:]
    run_dir = tmp_path / "runs" / "c"
    assert (ids(run_dir, Candidate), ids(run_dir, Judgment)) == local_ids
    assert {a["worker"] for a in attempts(run_dir)} <= set(_worker_addresses(cluster))


def _worker_addresses(c: LoopbackDaskCluster) -> list[str]:
    from distributed import Client

    with Client(c.address, timeout="30s") as client:
        return list(client.scheduler_info(n_workers=-1)["workers"])


def test_a_worker_that_does_not_see_the_run_folder_is_refused_by_name(tmp_path, fake):
    runs = tmp_path / "runs"
    runs.mkdir()
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare --mount (root) to give one worker its own, empty view of the runs folder")
    hide = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'mount -t tmpfs tmpfs "{runs}" && exec "$@"',
            "sh"]  # this worker sees an empty runs folder: another machine that does not mount it
    with LoopbackDaskCluster(1, nthreads=1) as c:
        blind = c.add_worker("blind", None, wrap=hide)
        c.wait_for_workers(2)
        blind_address = next(a for a in _worker_addresses(c) if a not in _seen_before(c, blind))
        result = command(tmp_path, "sweep", str(cluster_grid(tmp_path, fake.url)), "--cluster", c.address)
    assert result.returncode == 2, result.log
    problems = [ln for ln in result.stderr.splitlines() if ln.startswith("  tcp://")]
    assert len(problems) == 1 and problems[0].startswith(f"  {blind_address} ") and "cannot read" in problems[0]
    assert fake.stats()["requests"] == 0


def _seen_before(c: LoopbackDaskCluster, worker: subprocess.Popen) -> list[str]:
    """The addresses of the cluster's workers other than ``worker`` (by the names they were started with)."""
    from distributed import Client

    with Client(c.address, timeout="30s") as client:
        info = client.scheduler_info(n_workers=-1)["workers"]
    name = worker.args[worker.args.index("--name") + 1]
    return [addr for addr, w in info.items() if w["name"] != name]


def test_ctrl_c_on_the_terminal_stops_every_kernel_on_the_cluster_and_sends_nothing_new(tmp_path, fake):
    """Ctrl-C typed on a `--cluster local:N` sweep's terminal (its workers were in the terminal's process group, and
    stopped under their tasks): nothing is sent after it (tests/sweep/test_interrupt.py says how that is counted),
    what was in flight is saved, every task ends interrupted, and the line says how to resume."""
    fake.configure(latency_ms=1500)
    cap = 4
    params = cluster_grid(tmp_path, fake.url, models=[model("m1", fake.url)], judges=[judge("grader", fake.url)],
                          limits={"max_concurrency": cap, "timeout_s": 60, "retries": 0})
    run_dir = tmp_path / "runs" / "c"
    with Terminal(tmp_path, *grids.sweep_args(params, "--cluster", "local:2")) as term:
        term.wait_for(lambda: (s := fake.stats())["requests"] >= cap + 2 and s["in_flight"] == cap, "the cap held",
                      BUDGET_S)
        t = term.press_ctrl_c()
        code = term.wait(BUDGET_S)
    out = term.output.replace("\r", "")
    assert code == 130, out[-3000:]
    started, held = requests_after(fake, t)
    assert started <= cap - held, (started, held, out[-3000:])
    assert "interrupted:" in out and "resume with: " in out and "--cluster local:2" in out, out[-3000:]
    assert "still stopping" not in out  # every task ended, none was waited for in vain
    saved = len(RunStore(run_dir).done_ids(Candidate)) + len(RunStore(run_dir).done_ids(Judgment))
    assert saved == fake.stats()["requests"] and set(fake.stats()["statuses"]) == {"200"}  # none given up
    claimed = [json.loads(p.read_text()) for p in (run_dir / "attempts").glob("*.json")]
    assert claimed and all(a["status"] in ("interrupted", "ok") for a in claimed)  # no kernel left running
    assert any(a["status"] == "interrupted" for a in claimed)
    recorded = attempts(run_dir)  # the interrupted attempts are in the provenance too
    assert len(recorded) == len(claimed) and {a["status"] for a in recorded} <= {"interrupted", "ok"}


def test_a_pair_dataset_without_grid_cells_is_judged_on_the_cluster(tmp_path, fake, cluster):
    pairs = [{"question": f"q{i}", "response_A": f"a{i}", "response_B": f"b{i}", "label": "A>B",
              "source": "livebench-math", "pair_id": f"p{i}", "original_id": f"o{i}", "response_model": "x"}
             for i in range(3)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    dataset = {"path": "pairs.jsonl",
               "fields": {"question": "question", "response_A": "response_A", "response_B": "response_B"},
               "reference": {k: k for k in ("label", "source", "pair_id", "original_id", "response_model")}}
    params = grid(tmp_path / "jb.yaml", fake.url, name="c", seed=None, models=None, prompts=None, limits=None,
                  scenarios={"dataset": dataset},
                  judges=[judge("arena", fake.url, rubric="arena-pairwise", name="fake-judge")])
    fake.configure(replies=[{"match": "Compare the two responses", "content": "[[A>B]]"}])
    result = command(tmp_path, *grids.sweep_args(params, "--cluster", cluster.address))
    assert result.returncode == 0, result.log
    assert "judge: 1 execution(s) on the cluster" in result.stdout
    assert fake.stats()["requests"] == 6  # 3 pairs, both orders
    assert len(ids(tmp_path / "runs" / "c", Judgment)) == 6


def test_the_kernels_are_told_the_cache_folder_the_drivers_estimate_reads(tmp_path, fake, monkeypatch):
    """A local:N worker inherits the driver's $BENCH_CACHE: the folder named to the kernels (kernel_env) is the one
    the estimate reads, whatever form $BENCH_CACHE takes."""
    from bench.run import open_run
    from bench.sweep.cluster.session import ClusterSession

    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("BENCH_CACHE", raising=False)
    session = ClusterSession("local:1", open_run(cluster_grid(tmp_path, fake.url)))
    default = str(tmp_path / "runs" / ".cache" / "responses")
    assert session.cache_folder() == default
    folder = tmp_path / "shared-cache"
    for form in (str(folder), f"{folder}/"):  # a folder yet to be made, with or without a trailing /
        monkeypatch.setenv("BENCH_CACHE", form)
        assert session.cache_folder() == str(folder)
