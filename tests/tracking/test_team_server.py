"""A team tracking server (issue 16, point 7): a real PostgreSQL from Debian's package and a real `mlflow server` on
it, both on 127.0.0.1; a sweep (`bench sweep --jobs 2`, a shard per execution) logs there through
MLFLOW_TRACKING_URI, credentials in it never printed; runs, params, metrics, traces and assessments read back through
MlflowClient; re-tracking adds no duplicate; a PostgreSQL that refuses is one message before anything starts;
everything stopped by PID, no process left behind."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bench.testing.grids import ROOT, env, grid, judge, model, started, sweep
from bench.testing.in_process import command
from bench.testing.postgres import LoopbackPostgres
from bench.testing.processes import free_port, listening, read_line, tree
from bench.tracking.server import TrackingServer

PASSWORD = "Team-Secret-Pw-4821"  # in the backend URI (trust auth ignores it): it must never be printed or stored
SWEEP = "team"
CELLS = {"m1/p@v1", "m2/p@v1"}
TOPICS = 4


@pytest.fixture(scope="module")
def postgres() -> Iterator[LoopbackPostgres]:
    with LoopbackPostgres() as pg:
        procs = tree(pg.pid)
        yield pg
    gone, alive = psutil.wait_procs(procs, timeout=30)
    assert alive == [], f"PostgreSQL processes left behind: {alive}"


@pytest.fixture(scope="module")
def server(postgres, tmp_path_factory) -> Iterator[TrackingServer]:
    tmp = tmp_path_factory.mktemp("team-server")
    backend = postgres.uri.replace(f"{postgres.user}@", f"{postgres.user}:{PASSWORD}@")
    with (tmp / "server.log").open("w") as log:
        with TrackingServer(backend, tmp / "artifacts", port=None, log=log) as srv:
            procs = tree(srv.pid)
            yield srv
        gone, alive = psutil.wait_procs(procs, timeout=30)
        assert alive == [], f"tracking server processes left behind: {alive}"
    assert PASSWORD not in (tmp / "server.log").read_text()


def client_of(uri: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mlflow import MlflowClient
    return MlflowClient(uri)


def _snapshot(client, exp_id: str) -> tuple[list, list]:
    """Return (every run of the experiment, every trace of it)."""
    runs = client.search_runs([exp_id], max_results=1000)
    traces = client.search_traces(locations=[exp_id], max_results=500)  # the server caps a page at 500
    return runs, traces


def test_both_servers_listen_on_loopback_only(postgres, server):
    pg = listening(tree(postgres.pid))
    assert pg and {ip for ip, _ in pg} == {"127.0.0.1"} and {port for _, port in pg} == {postgres.port}, pg
    ml = listening(tree(server.pid))
    assert ml and {ip for ip, _ in ml} == {"127.0.0.1"}, ml
    with urllib.request.urlopen(f"{server.uri}/health", timeout=10) as r:
        assert r.status == 200
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", server.uri)


def test_a_sweep_logs_to_the_team_server_credentials_unseen_and_retracking_duplicates_nothing(tmp_path, fake,
                                                                                              postgres, server):
    """MLFLOW_TRACKING_URI=http://user:password@host: MLflow's own "View run at" lines printed it once per run."""
    params = grid(tmp_path / "team.yaml", fake.url, name=SWEEP, topics=TOPICS,
                  models=[model("m1", fake.url), model("m2", fake.url)], judges=[judge("grader", fake.url)])
    assert server.uri.startswith("http://")
    with_credentials = server.uri.replace("http://", f"http://team:{PASSWORD}@")
    out = sweep(tmp_path, params, "--jobs", "2", track=True, timeout=600, MLFLOW_TRACKING_URI=with_credentials)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "tracking: logged to MLflow at http://***@" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    run_dir = tmp_path / "runs" / SWEEP
    assert not (run_dir / "mlflow.db").exists()  # the team server's store, not the run folder's own

    client = client_of(server.uri)
    exp = client.get_experiment_by_name(f"bench/{SWEEP}")
    assert exp is not None and exp.artifact_location.startswith("mlflow-artifacts:")  # served by the server
    runs, traces = _snapshot(client, exp.experiment_id)
    parents = [r for r in runs if r.data.tags.get("bench.level") == "sweep"]
    cells = {r.data.tags["bench.cell"]: r for r in runs if r.data.tags.get("bench.level") == "cell"}
    assert len(parents) == 1 and set(cells) == CELLS and len(runs) == 1 + len(CELLS)
    parent = parents[0]
    assert parent.data.params["cells"] == str(len(CELLS))
    ran = [json.loads(line) for line in (run_dir / "executions.jsonl").read_text().splitlines()]
    assert sorted(a["name"] for a in ran) == ["collect.job1", "collect.job2"]
    assert parent.data.tags["bench.workers"] == str(len({a["worker"] for a in ran})) == "1"  # one driver
    assert parent.data.params["judge.grader.rubric"].startswith("tip-v1")
    assert parent.data.metrics["answers.n"] == parent.data.metrics["judge.grader.n"] == TOPICS * len(CELLS)
    for cell, run in cells.items():
        assert run.data.params["model_id"] == cell.split("/")[0] and run.data.params["prompt"]
        assert run.data.metrics["answers.n"] == TOPICS and run.data.metrics["answers.failure_rate"] == 0
        assert "judge.grader.composite.mean" in run.data.metrics
        assert run.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    # every answer is a trace on its cell's run, with the judge's scores as assessments
    assert len(traces) == TOPICS * len(CELLS)
    assessed = [(t.info.tags["bench.candidate"], a.name) for t in traces for a in t.info.assessments]
    assert len(assessed) == len(set(assessed)) == len(traces) * 4  # 3 criteria + composite, each once
    assert {name for _, name in assessed} == {f"grader.{c}" for c in ("relevance", "actionability", "tone",
                                                                      "composite")}
    # the records went to the shared artifact destination through the server: each execution's shard
    logged = {Path(f.path).name for f in client.list_artifacts(parent.info.run_id, "records")}
    assert {"candidates.job1", "candidates.job2", "judgments.job1", "judgments.job2"} <= {
        name.rsplit(".", 1)[0] for name in logged}, logged

    again = command(tmp_path, "track", str(run_dir), MLFLOW_TRACKING_URI=server.uri)
    assert again.returncode == 0, again.log
    runs2, traces2 = _snapshot(client, exp.experiment_id)
    assert sorted(r.info.run_id for r in runs2) == sorted(r.info.run_id for r in runs)
    assert sorted(t.info.trace_id for t in traces2) == sorted(t.info.trace_id for t in traces)
    assert sum(len(t.info.assessments) for t in traces2) == len(assessed)
    for text in (out.stdout, out.stderr, again.stdout, again.stderr):
        assert PASSWORD not in text
    for path in run_dir.rglob("*"):
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert PASSWORD.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("form", ["userinfo", "libpq-query", "environment"])
def test_a_postgres_that_refuses_is_one_line_naming_it_before_anything_starts(tmp_path, form, capfd):
    """The password, as user:password@, as libpq's ?password= or in BENCH_BACKEND_STORE_URI, is never printed: the
    command runs in-process, and what reached this process's file descriptors 1 and 2 meanwhile is searched too."""
    port = free_port()  # nothing listens there
    uri = (f"postgresql://team:{PASSWORD}@127.0.0.1:{port}/mlflow" if form == "userinfo" else
           f"postgresql://team@127.0.0.1:{port}/mlflow?connect_timeout=5&password={PASSWORD}")
    given = {"BENCH_BACKEND_STORE_URI": uri} if form == "environment" else {}
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    capfd.readouterr()
    out = command(tmp_path, "tracking-server", *([] if given else ["--backend-store-uri", uri]),
                  "--artifacts-destination", str(tmp_path / "artifacts"), "--port", str(free_port()), **given)
    assert out.returncode == 2, out.log
    assert PASSWORD not in "".join(capfd.readouterr())  # nothing printed past the command's own streams
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench tracking-server: error:"), out.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "Connection refused" in lines[0] and "start PostgreSQL" in lines[0]
    assert PASSWORD not in out.stdout + out.stderr
    assert "MLFLOW_TRACKING_URI" not in out.stdout  # nothing was started
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_without_postgresql_binaries_the_error_says_how_to_install_them(tmp_path):
    code = ("import bench.testing.postgres as pg\n"
            "pg.DEBIAN_BINARIES = '/nonexistent/postgresql/*/bin'\n"
            "try:\n    pg.LoopbackPostgres().start()\nexcept pg.PostgresUnavailable as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(tmp_path, PATH=str(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "apt-get install postgresql" in out.stdout and "initdb" in out.stdout, out.stdout


def test_bench_tracking_server_prints_the_uri_to_export_and_ctrl_c_stops_it_and_its_children(tmp_path, postgres):
    """With the password in libpq's query form (?password=): never printed, never on a command line."""
    assert "?" not in postgres.uri
    backend = f"{postgres.uri}?password={PASSWORD}"
    log = tmp_path / "server.log"
    with log.open("w") as err, started(tmp_path, "tracking-server", "--backend-store-uri", backend,
                                       "--artifacts-destination", str(tmp_path / "artifacts"),
                                       "--port", str(free_port()), stderr=err) as proc:
        line, seen = read_line(proc, r"export MLFLOW_TRACKING_URI=", timeout_s=300)
        assert line, seen + log.read_text()[-3000:]
        uri = re.search(r"MLFLOW_TRACKING_URI=(http://127\.0\.0\.1:\d+)$", line.strip()).group(1)
        with urllib.request.urlopen(f"{uri}/health", timeout=10) as r:
            assert r.status == 200
        children = tree(proc.pid)[1:]
        assert children and {ip for ip, _ in listening(children)} == {"127.0.0.1"}
        assert all(PASSWORD not in " ".join(p.cmdline()) for p in children)  # not on the server's command line
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=60) == 0
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert alive == [], alive
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{uri}/health", timeout=5)
    assert PASSWORD not in seen + log.read_text()
