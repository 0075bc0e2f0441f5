"""Kernels started ahead of need (bench.sweep.prestart): one kernel per execution, and nothing left behind by a
sweep refused or interrupted while its kernels were starting beside its preparation."""

import signal
import socket
import time
from contextlib import contextmanager

import psutil

from bench.testing import grids
from bench.testing.grids import started, sweep_args
from bench.testing.processes import tree


def kernels(pid: int) -> set[int]:
    """Return the PIDs of the Jupyter kernels under process ``pid`` now. A process a kernel forks shows the kernel's
    command line until it execs (a subprocess a kernel starts, seen in that window on a loaded machine): one whose
    parent is a kernel is not a kernel."""
    found = {}
    for proc in tree(pid)[1:]:
        try:
            if any("ipykernel" in part for part in proc.cmdline()):
                found[proc.pid] = proc.ppid()
        except psutil.NoSuchProcess:
            continue
    return {pid for pid, parent in found.items() if parent not in found}


def alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE}


@contextmanager
def silent_server():
    """Yield the URL of a loopback port that accepts connections and never answers: a preflight probe of it
    waits for its whole timeout (3 s), while the sweep's kernels start."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def two_models(tmp_path, url, other_url):
    return grids.grid(tmp_path / "g.yaml", url, name="g", topics=6,
                      models=[grids.model("m1", url, name="fake-a"), grids.model("m2", other_url, name="fake-b")])


def watch(proc, until=None, timeout_s=120.0) -> set[int]:
    """Return every kernel PID seen under ``proc`` until it ends (or ``until(seen)`` is true)."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= kernels(proc.pid)
        if until is not None and until(seen):
            break
        time.sleep(0.05)
    return seen


def test_each_execution_runs_in_its_own_kernel_and_none_outlives_the_sweep(tmp_path, fake):
    params = two_models(tmp_path, fake.url, fake.url)
    with started(tmp_path, *sweep_args(params, "--jobs", "2")) as proc:
        seen = watch(proc)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert "collect.job1: ok" in out and "collect.job2: ok" in out
    assert len(seen) == 2, seen  # two executions, two kernel processes: nothing is shared between them
    assert not alive(seen)


def test_a_sweep_refused_by_its_preflight_leaves_no_kernel_and_no_attempt(tmp_path, fake):
    with silent_server() as silent:
        params = two_models(tmp_path, fake.url, silent)
        with started(tmp_path, *sweep_args(params, "--jobs", "2")) as proc:
            seen = watch(proc)
            out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, out + err
    assert seen, "the kernels were not started beside the preflight"  # else this test checks nothing
    assert not alive(seen)
    assert f"api_base {silent} did not answer within 3 s" in err, err
    assert "model caps" not in out and "collect:" not in out  # prints what a refused sweep always printed
    run_dir = tmp_path / "runs" / "g"
    assert not (run_dir / "executions.jsonl").exists() and not (run_dir / "notebooks").exists()


def probing(pid: int, url: str) -> bool:
    """Whether process ``pid`` holds a connection to ``url``'s port (its preflight is asking it)."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    try:
        return any(c.raddr and c.raddr.port == port for c in psutil.Process(pid).net_connections("tcp"))
    except psutil.NoSuchProcess:
        return False


def test_ctrl_c_while_the_kernels_start_leaves_nothing(tmp_path, fake):
    with silent_server() as silent:
        params = two_models(tmp_path, fake.url, silent)
        with started(tmp_path, *sweep_args(params, "--jobs", "2")) as proc:
            # the kernels started as the command began: Ctrl-C once the driver is in its 3 s preflight
            seen = watch(proc, until=lambda seen: bool(seen) and probing(proc.pid, silent))
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
    assert seen and proc.returncode == 130, out + err
    assert err.startswith("interrupted: 0 of 12 answers saved"), err  # what a Ctrl-C before any answer says
    assert not alive(seen | kernels(proc.pid))
    run_dir = tmp_path / "runs" / "g"
    assert not (run_dir / "executions.jsonl").exists() and not (run_dir / "notebooks").exists()
