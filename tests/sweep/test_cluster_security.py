"""A cluster no neighbour can enter: ``--cluster local:N`` is TLS under the sweep's own certificate and serves no
HTTP; a ``tls://`` scheduler is reached with the params' certificates; a plain-TCP one is used after a one-line
warning; the lease token and the provider keys are in no task spec and no worker's environment; a driver
killed with SIGKILL leaves nothing open for the next sweep.

Every process binds 127.0.0.1 and is stopped by its PID (bench.testing.dask_cluster, or the sweep's own
driver). The sweeps talk to the loopback fake provider, which here asks for a key the kernels can only have
got from the sweep's worker plugin. A sweep whose processes are looked at or killed runs as `bench sweep`; the others
run their driver in-process (bench.testing.in_process). The plain-TCP warning and the lease token kept out of task
specs: tests/sweep/test_cluster.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="needs the 'cluster' extra: pip install -e '.[cluster]' (make setup does)")
psutil = pytest.importorskip("psutil")

from bench.core.records import Candidate  # noqa: E402
from bench.testing.dask_cluster import LoopbackDaskCluster  # noqa: E402
from bench.testing.grids import model, prompt, sweep_args  # noqa: E402
from bench.testing.in_process import command, run_stages  # noqa: E402
from bench.testing.processes import listening, tree  # noqa: E402
from tests.sweep.test_cluster import (BUDGET_S, cluster_grid, environ, ids, is_kernel, started_sweep,  # noqa: E402
                                      sweep)

KEY_VAR = "BENCH_FAKE_API_KEY"  # a provider key the sweep's model names (api_key_env)
KEY = "sk-fake-0123456789abcdef-cluster"  # what the fake provider asks for


def keyed_grid(tmp_path: Path, url: str, topics: int = 3, **overrides: object) -> Path:
    """Write ``s.yaml``: two models sending the key KEY_VAR names, no judge, ``topics`` × 2 scenarios, 2 at a time."""
    models = [model("m1", url, name="fake-a", api_key_env=KEY_VAR), model("m2", url, name="fake-b",
                                                                          api_key_env=KEY_VAR)]
    return cluster_grid(tmp_path, url, topics, name="s", models=models, prompts=[prompt("p", "Q {topic} {n}")],
                        judges=[], limits={"max_concurrency": 2, "timeout_s": 20, "retries": 2}, **overrides)


@pytest.fixture
def tmp_dir():
    """A short private temporary folder for the sweep (TMPDIR): its leftovers are seen here alone (and the
    kernels' unix sockets, which live there too, keep to the 107-byte limit of a socket path)."""
    folder = tempfile.mkdtemp(prefix="bt-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def keyed_env(tmp_dir: str) -> dict[str, str]:
    return {KEY_VAR: KEY, "TMPDIR": tmp_dir}


def wait_running(run_dir: Path, proc: subprocess.Popen, fake: object = None) -> dict:
    """Return an attempt record once an execution runs on a worker and has written a record (files: readiness);
    with ``fake``, once a request is in flight too (what a kill "mid-sweep" means)."""
    deadline = time.monotonic() + BUDGET_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the sweep ended first: {proc.stdout.read()[-3000:]}{proc.stderr.read()[-2000:]}"
        for path in sorted((run_dir / "attempts").glob("*.json")):
            try:
                a = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if (a.get("status") == "running" and any(run_dir.glob("candidates.*.jsonl"))
                    and (fake is None or fake.stats()["in_flight"] > 0)):
                return a
        time.sleep(0.05)  # polling files another process writes
    raise AssertionError("no execution started on the cluster")


def wait_ended(run_dir: Path, attempt: dict, workers: list[subprocess.Popen]) -> dict:
    """Return an attempt's record once its worker has ended it in its file (status no longer ``running``)."""
    path = run_dir / "attempts" / f"{attempt['name']}.{attempt['attempt']}.json"
    deadline = time.monotonic() + BUDGET_S
    while time.monotonic() < deadline:
        assert all(w.poll() is None for w in workers), "a worker died: nobody can end the attempt"
        try:
            a = json.loads(path.read_text())
        except (OSError, ValueError):
            a = {}
        if a.get("status") not in (None, "running"):
            return a
        time.sleep(0.05)  # polling a file another process writes
    raise AssertionError(f"{path} still says running")


def listening_ports(procs: list[psutil.Process]) -> dict[int, int]:
    """Return {port: pid} of every TCP socket these processes listen on."""
    return {port: pid for (_ip, port), pid in listening(procs).items()}


def lease_port(kernels: list[psutil.Process], driver_ports: set[int]) -> int:
    """Return the port of the driver's lease server: the one of the driver's ports the kernels are connected to
    (a kernel is told its address as a papermill parameter, never in its environment)."""
    [port] = {c.raddr.port for k in kernels for c in k.net_connections("tcp")
              if c.raddr and c.raddr.port in driver_ports}
    return port


def answers_http(port: int) -> bool:
    """Return whether whatever listens on 127.0.0.1:port answers a plain HTTP request like a web server."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            conn.settimeout(10)
            return conn.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def refused(address: str, security: object) -> bool:
    """Return True if a client cannot join the scheduler at ``address`` with ``security`` (a stranger)."""
    from distributed import Client

    try:
        client = Client(address, timeout="30s", security=security)
    except Exception:  # refused at the handshake (or not a scheduler at all)
        return True
    try:
        client.run(os.getpid)  # it got in: it can run code on every worker
    finally:
        client.close()
    return False


def test_local_n_is_tls_under_its_own_certificate_serves_no_http_and_keeps_keys_out_of_worker_env(
        tmp_path, tmp_dir, fake):
    from distributed.security import Security

    fake.configure(latency_ms=2500, require_key=KEY)  # 12 requests, 2 at a time: long enough to look at it
    params = keyed_grid(tmp_path, fake.url)
    with started_sweep(tmp_path, params, "--cluster", "local:2", "--no-report", **keyed_env(tmp_dir)) as proc:
        wait_running(tmp_path / "runs" / "s", proc)
        procs = tree(proc.pid)
        workers = [p for p in procs[1:] if not is_kernel(p)]
        kernels = [p for p in procs if is_kernel(p)]
        ports = listening_ports(procs)
        lease = lease_port(kernels, {port for port, pid in ports.items() if pid == proc.pid})
        web = [port for port in ports if answers_http(port)]
        scheduler = [port for port, pid in ports.items() if pid == proc.pid and port not in (lease, *web)]
        for port in scheduler:  # a stranger: no certificate (plain TCP, or TLS without one), or one of its own
            assert refused(f"tcp://127.0.0.1:{port}", None), f"a stranger joined the scheduler on port {port}"
            assert refused(f"tls://127.0.0.1:{port}", Security.temporary())
        assert 8787 not in ports, ports
        assert web == [], f"HTTP served on {web} by {[ports[p] for p in web]}"
        assert len(scheduler) == 1, ports  # the driver listens for its scheduler and its lease server only
        assert workers and kernels
        assert all(KEY.encode() not in environ(p) for p in workers)  # no worker's environment holds the key…
        assert any(KEY.encode() in environ(p) for p in kernels)  # …only the environment of a kernel that uses it
        out, err = proc.communicate(timeout=BUDGET_S)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    assert "plain TCP" not in err
    assert len(ids(tmp_path / "runs" / "s", Candidate)) == 12  # every request showed the key the provider asks
    lines = [json.loads(ln) for ln in (tmp_path / "runs" / "s" / "executions.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(a["status"] == "ok" and a["worker"].startswith("tls://127.0.0.1:") for a in lines)


def test_a_tls_scheduler_is_reached_with_the_params_certificates(tmp_path, tmp_dir, fake):
    from bench.testing.dask_cluster import write_certificate

    certs = tmp_path / "certs"
    certs.mkdir()
    ca, cert, key = write_certificate(certs)
    fake.configure(require_key=KEY)
    section = {"tls_ca_file": "certs/ca.pem", "tls_client_cert": "certs/cert.pem", "tls_client_key": "certs/key.pem"}
    with LoopbackDaskCluster(1, nthreads=2, tls=(ca, cert, key), env={KEY_VAR: ""}) as c:
        assert c.address.startswith("tls://")
        bad = command(tmp_path, *sweep_args(keyed_grid(tmp_path, fake.url, cluster={
            **section, "tls_client_key": "certs/no.pem"}), "--cluster", c.address))
        assert bad.returncode == 2 and "cluster.tls_client_key: cannot read" in bad.stderr, bad.log
        none = command(tmp_path, *sweep_args(keyed_grid(tmp_path, fake.url), "--cluster", c.address))
        assert none.returncode == 2 and "a tls:// scheduler needs this driver's certificate" in none.stderr
        assert "DASK_DISTRIBUTED__COMM__TLS__CA_FILE" in none.stderr
        result = command(tmp_path, *sweep_args(keyed_grid(tmp_path, fake.url, cluster=section), "--cluster",
                                               c.address), **{KEY_VAR: KEY})
    assert result.returncode == 0, result.log
    assert "plain TCP" not in result.stderr
    # the worker's own environment had no key: its kernels got the driver's, sent over TLS in the worker plugin
    assert len(ids(tmp_path / "runs" / "s", Candidate)) == 12


def test_a_driver_killed_mid_sweep_leaves_nothing_open_for_the_next_sweep(tmp_path, tmp_dir, fake):
    fake.configure(latency_ms=2500, require_key=KEY)
    params = keyed_grid(tmp_path, fake.url)
    run_dir = tmp_path / "runs" / "s"
    with started_sweep(tmp_path, params, "--cluster", "local:2", "--no-report", **keyed_env(tmp_dir)) as proc:
        running = wait_running(run_dir, proc, fake)
        procs = tree(proc.pid)
        tmp = Path(tmp_dir)
        left = sorted(p.name for p in tmp.iterdir() if p.name.startswith(("bench-limits-", "bench-dask-")))
        assert any(n.startswith("bench-limits-") for n in left), left  # the lease server's socket folder
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    _, still = psutil.wait_procs(procs[1:], timeout=BUDGET_S)  # the driver's workers and kernels die with it
    assert not still, still
    assert all(p.exists() for p in (tmp / n for n in left))  # a SIGKILL leaves them: the next sweep must clean up
    fake.configure(latency_ms=0)  # the rest answered at once
    lines, closed = resumed_after_kill(tmp_path, params, tmp_dir, running, proc.pid)
    open_now = [p for p in (run_dir / "attempts").glob("*.json") if json.loads(p.read_text())["status"] == "running"]
    assert not open_now
    assert not [n for n in left if (tmp / n).exists()], left  # the dead driver's folders are gone


def test_an_attempt_its_worker_ends_after_the_driver_was_killed_is_recorded_as_lost_by_the_next_sweep(
        tmp_path, tmp_dir, fake):
    # the workers of a scheduler of its own outlive a killed driver: the attempt goes on, its kernel (the lease
    # server gone) fails the items left, and the worker ends the attempt in its file. No longer running, it was
    # recorded by nobody (what a local:N worker slow to die with its driver also leaves)
    fake.configure(latency_ms=2500, require_key=KEY)
    params = keyed_grid(tmp_path, fake.url)
    run_dir = tmp_path / "runs" / "s"
    with LoopbackDaskCluster(1, nthreads=2, env=keyed_env(tmp_dir)) as c:
        with started_sweep(tmp_path, params, "--cluster", c.address, "--no-report", **keyed_env(tmp_dir)) as proc:
            running = wait_running(run_dir, proc, fake)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        ended = wait_ended(run_dir, running, c.workers)
    assert not (run_dir / "executions.jsonl").exists()  # the killed driver recorded nothing
    fake.configure(latency_ms=0)  # the rest answered at once
    lines, closed = resumed_after_kill(tmp_path, params, tmp_dir, running, proc.pid, in_process=True)
    assert f"its worker had ended it {ended['status']}" in closed[0]["reason"]
    left = [json.loads(p.read_text()) for p in (run_dir / "attempts").glob("*.json")]
    killed = [(a["name"], a["attempt"]) for a in left if a["sweep"] == running["sweep"]]
    assert sorted((a["name"], a["attempt"]) for a in lines if a["status"] == "lost") == sorted(killed)
    again = run_stages(tmp_path, params, **{KEY_VAR: KEY})  # each is recorded once, never again
    assert again.returncode == 0 and "recorded as lost" not in again.stdout, again.log
    assert [json.loads(ln) for ln in (run_dir / "executions.jsonl").read_text().splitlines()][:len(lines)] == lines
    assert len((run_dir / "executions.jsonl").read_text().splitlines()) == len(lines) + 1  # the new sweep's own


def resumed_after_kill(tmp_path, params, tmp_dir, running, pid, in_process=False):
    """Sweep again after the driver ``pid`` was killed mid-attempt ``running`` (``in_process``: in this process, whose
    temporary folder is not ``tmp_dir``); check the new sweep recorded that attempt as lost exactly once, naming the
    dead driver. Return executions.jsonl's lines and that attempt's."""
    run_dir = tmp_path / "runs" / "s"
    result = (run_stages(tmp_path, params, **{KEY_VAR: KEY}) if in_process
              else sweep(tmp_path, params, "--no-report", **keyed_env(tmp_dir)))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "recorded as lost" in result.stdout
    lines = [json.loads(ln) for ln in (run_dir / "executions.jsonl").read_text().splitlines()]
    closed = [a for a in lines if a["name"] == running["name"] and a["attempt"] == running["attempt"]]
    assert len(closed) == 1 and closed[0]["status"] == "lost", lines
    assert f"pid {pid} on" in closed[0]["reason"]
    return lines, closed
