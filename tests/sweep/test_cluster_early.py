"""A cluster sweep's first stage starts its kernels on the workers beside the driver's preparation
(bench.sweep.cluster.tasks.StageAhead): a sweep refused or interrupted meanwhile leaves no kernel on any worker,
claims no attempt and prints what a refused sweep always printed."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="needs the 'cluster' extra: pip install -e '.[cluster]' (make setup does)")

from bench.testing.dask_cluster import LoopbackDaskCluster  # noqa: E402
from bench.testing.grids import started, sweep_args  # noqa: E402
from tests.sweep.test_prestart import alive, kernels, silent_server, two_models  # noqa: E402

CONNECT = {"BENCH_CLUSTER_CONNECT_S": "5"}


@pytest.fixture(scope="module")
def cluster():
    with LoopbackDaskCluster(2, nthreads=1) as c:
        yield c


def on_workers(c: LoopbackDaskCluster) -> set[int]:
    """Return the PIDs of the Jupyter kernels under the cluster's workers now."""
    return set().union(*(kernels(w.pid) for w in c.workers))


def watch(proc: subprocess.Popen, c: LoopbackDaskCluster, until=None, timeout_s: float = 300.0) -> set[int]:
    """Return every kernel PID seen under the workers until the sweep ends (or ``until(seen)`` is true)."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= on_workers(c)
        if until is not None and until(seen):
            break
        time.sleep(0.05)  # polling processes another process starts
    return seen


def nothing_recorded(run_dir: Path) -> bool:
    return not any((run_dir / name).exists() for name in ("executions.jsonl", "notebooks")) and \
        not any((run_dir / "attempts").glob("*.json"))


def test_a_cluster_sweep_refused_by_its_preflight_leaves_no_kernel_on_the_workers_and_no_attempt(
        tmp_path, fake, cluster):
    with silent_server() as silent:  # the preflight waits 3 s for it, while the workers start their kernels
        params = two_models(tmp_path, fake.url, silent)
        with started(tmp_path, *sweep_args(params, "--cluster", cluster.address), **CONNECT) as proc:
            seen = watch(proc, cluster)
            out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, out + err
    assert seen, "no kernel was started on a worker beside the preflight"  # else this test checks nothing
    assert not alive(seen | on_workers(cluster))  # the driver waited for every task to end its kernel
    assert f"api_base {silent} did not answer within 3 s" in err, err
    assert "collect:" not in out and "execution" not in out  # what a refused sweep always printed
    assert nothing_recorded(tmp_path / "runs" / "g")
    assert fake.stats()["requests"] == 0


def test_ctrl_c_while_the_workers_start_their_kernels_leaves_nothing(tmp_path, fake, cluster):
    with silent_server() as silent:
        params = two_models(tmp_path, fake.url, silent)
        with started(tmp_path, *sweep_args(params, "--cluster", cluster.address), **CONNECT) as proc:
            seen = watch(proc, cluster, until=bool)  # a kernel is up on a worker: the driver is in its preflight
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=300)
    assert seen and proc.returncode == 130, out + err
    said = [ln for ln in err.splitlines() if "is plain TCP" not in ln]  # the loopback scheduler's one warning
    assert said[0].startswith("interrupted: 0 of 12 answers saved"), err  # what a Ctrl-C before any answer says
    assert not alive(seen | on_workers(cluster))
    assert nothing_recorded(tmp_path / "runs" / "g")
    assert fake.stats()["requests"] == 0
