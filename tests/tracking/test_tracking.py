"""MLflow tracking and its UI through the real path (issue 13): one metric naming scheme on parent and child runs,
child runs timed by their own records, re-tracking that never duplicates traces or assessments, `bench ui` serving a
run's store offline until Ctrl-C, and `import bench` keeping LiteLLM on its bundled price map. The sweeps run
in-process (bench.testing.in_process, tracking on); what tracking prints while it runs: tests/sweep/test_sweep.py."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
import warnings
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import env, grid, judge, model, started
from bench.testing.in_process import run_stages
from bench.testing.processes import fetch_when_up, listening, read_line, tree

OWN_PRICES = ("LITELLM_LOCAL_MODEL_COST_MAP",)  # not inherited from the test session: bench must set it itself
SCOPE = re.compile(r"^(answers\.[a-z0-9_]+|judge\.[a-z]+\.[a-z0-9_]+)$")  # names on both levels


def params(tmp: Path, url: str, judges: list[dict]) -> Path:
    return grid(tmp / "tk.yaml", url, name="tk", topics=4, models=[model("m1", url), model("m2", url)],
                judges=judges)


GRADER = "grader"


def arena(url: str) -> dict:
    return judge("arena", url, rubric="arena-pairwise", name="judge", baseline="m1/p@v1")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, fake_server) -> Path:
    """A sweep of 2 cells × 4 scenarios with a rubric judge and a pairwise judge, tracked; return its run folder."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("tracking")
    grid_file = params(tmp, fake_server.url, [judge(GRADER, fake_server.url), arena(fake_server.url)])
    out = run_stages(tmp, grid_file, track=True)
    assert out.returncode == 0, out.log
    assert "tracking: logged to MLflow" in out.stdout, out.log
    return tmp / "runs" / "tk"


def client_for(run_dir: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mlflow import MlflowClient
    return MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")


def runs_of(run_dir: Path) -> tuple[object, dict[str, object]]:
    """Return (the parent run, {cell: child run}) of a tracked run folder."""
    client = client_for(run_dir)
    exp = client.get_experiment_by_name(f"bench/{run_dir.name}")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("bench.level") == "sweep"]
    assert len(parents) == 1
    return parents[0], {r.data.tags["bench.cell"]: r for r in runs if r.data.tags.get("bench.level") == "cell"}


def test_parent_and_child_runs_share_one_metric_naming_scheme(tracked):
    parent, cells = runs_of(tracked)
    assert set(cells) == {"m1/p@v1", "m2/p@v1"}
    p, c = parent.data.metrics, cells["m2/p@v1"].data.metrics
    for level in (p, c):  # the same names on both levels
        for key in ("answers.n", "answers.failure_rate", "answers.calls", "answers.completion_tokens",
                    "answers.latency_p95_s", "judge.grader.n", "judge.grader.failure_rate", "judge.grader.calls",
                    "judge.grader.parse_failure_rate", "judge.grader.null_rate", "judge.arena.n"):
            assert key in level, key
    assert p["answers.n"] == 8 and c["answers.n"] == 4 and p["judge.grader.n"] == 8 and c["judge.grader.n"] == 4
    assert p["answers.failure_rate"] == 0 and c["judge.grader.failure_rate"] == 0
    for stat in ("mean", "ci_low", "ci_high", "n"):
        assert f"judge.grader.composite.{stat}" in c and f"judge.grader.relevance.{stat}" in c
    assert {"judge.arena.win_rate", "judge.arena.win_rate.ci_low", "judge.arena.win_rate.ci_high"} <= set(c)
    assert p["failed_items"] == 0
    # every name is answers.* or judge.<id>.*, on both levels (the parent adds only the failed-items counts, and
    # the progress its sweep logged as it ran: bench.tracking.live)
    assert all(k.startswith(("answers.", "judge.")) for k in c), sorted(c)
    assert all(k.startswith(("answers.", "judge.", "failed", "progress.")) for k in p), sorted(p)
    scope = lambda metrics: {k for k in metrics if SCOPE.match(k) and ".win_rate" not in k}  # noqa: E731
    # a metric with no value in a cell is left out there (e.g. latency when every call was a cache hit)
    assert scope(p) == set().union(*(scope(r.data.metrics) for r in cells.values()))
    for old in ("answer_failure_rate", "grader.n", "grader.composite.mean", "judgments", "answers"):
        assert old not in p and old not in c, old


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def test_child_runs_start_and_end_at_their_cells_first_and_last_record(tracked):
    parent, cells = runs_of(tracked)
    store = RunStore(tracked)
    cands = store.read(Candidate)
    cell_of = {c.id: f"{c.model_id}/{c.prompt_id}@{c.prompt_version}" for c in cands}
    times: dict[str, list[int]] = {}
    for r in [*cands, *store.read(Judgment)]:
        ids = [r.id] if isinstance(r, Candidate) else r.candidate_ids
        for cell in {"", *(cell_of[i] for i in ids)}:
            times.setdefault(cell, []).append(_ms(r.created_at))
    for cell, run in cells.items():
        assert run.info.status == "FINISHED"
        assert (run.info.start_time, run.info.end_time) == (min(times[cell]), max(times[cell])), cell
    # the parent is the sweep's live run (bench.tracking.live): it spans the sweep, from its start to its exit
    assert parent.info.start_time <= min(times[""]) and parent.info.end_time >= max(times[""])
    # each trace shows on its cell's run
    client = client_for(tracked)
    for cell, run in cells.items():
        traces = client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id)
        assert len(traces) == 4 and {t.info.tags["bench.cell"] for t in traces} == {cell}


def _assessments(run_dir: Path) -> tuple[int, list[tuple[str, str]]]:
    """Return (how many traces, [(trace's candidate, assessment name)]) of a tracked run."""
    client = client_for(run_dir)
    exp = client.get_experiment_by_name(f"bench/{run_dir.name}")
    traces = client.search_traces(locations=[exp.experiment_id], max_results=1000)
    return len(traces), [(t.info.tags["bench.candidate"], a.name) for t in traces for a in t.info.assessments]


def test_retracking_without_its_state_file_and_with_a_new_judge_duplicates_nothing(tmp_path, fake):
    p = params(tmp_path, fake.url, [judge(GRADER, fake.url)])
    out = run_stages(tmp_path, p, track=True)
    assert out.returncode == 0, out.log
    run_dir = tmp_path / "runs" / "tk"
    n, first = _assessments(run_dir)
    assert n == 8 and len(first) == 8 * 4 and len(set(first)) == len(first)  # 3 criteria + composite per answer
    (run_dir / ".mlflow-state.json").unlink()  # what was logged where is forgotten (e.g. a copied run folder)
    params(tmp_path, fake.url, [judge(GRADER, fake.url), judge("second", fake.url, name="judge2")])
    out = run_stages(tmp_path, p, track=True)
    assert out.returncode == 0, out.log
    n, after = _assessments(run_dir)
    assert n == 8  # the same traces, rewritten under the same ids
    assert len(after) == len(set(after)) == 8 * 8  # grader's 4 once, the new judge's 4 added
    assert {name for _, name in after} == {f"{j}.{c}" for j in (GRADER, "second")
                                           for c in ("relevance", "actionability", "tone", "composite")}


def test_bench_ui_serves_a_run_offline_on_loopback_and_ctrl_c_stops_it_and_its_children(tracked, tmp_path):
    log = tmp_path / "ui.log"
    with log.open("w") as err, started(tmp_path, "ui", str(tracked), stderr=err, drop=OWN_PRICES) as proc:
        line, seen = read_line(proc, r"MLflow UI: http://127\.0\.0\.1:\d+/", timeout_s=300)
        assert line, seen + log.read_text()[-3000:]
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        fetch_when_up(url, proc, 60, log)  # the port answers (the line says it already does)
        children = tree(proc.pid)[1:]
        assert children  # the server runs as bench's child
        addresses = listening(children)
        assert addresses and {ip for ip, _port in addresses} == {"127.0.0.1"}, addresses
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=60) == 0
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert alive == [], alive
        with pytest.raises(OSError):
            urllib.request.urlopen(url, timeout=5)


PRICE_MAP = ("import json, os, bench, litellm\n"
             "from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info as info\n"
             "print(json.dumps({'env': os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP'), **info()}))\n")


def test_import_bench_keeps_litellm_on_its_bundled_price_map(tmp_path):
    out = subprocess.run([sys.executable, "-c", PRICE_MAP], cwd=tmp_path, env=env(tmp_path, drop=OWN_PRICES),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["env"] == "True" and got["source"] == "local" and got["is_env_forced"] is True, got
    assert "fetch" not in out.stderr  # no attempt to download the price map


def test_bench_online_prices_opts_out(tmp_path):
    code = "import os, bench; print(os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                         env=env(tmp_path, drop=OWN_PRICES, BENCH_ONLINE_PRICES="1"), capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "False"
