"""Quiet, clean runs: no false kernel error, no kernel key files left in /tmp, a killed sweep's leftovers
removed by the next one."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import tempfile
import time

from bench.core.processes import socket_bases
from bench.testing.grids import grid, model, started, sweep, sweep_args

LOOSE_KEYS = os.path.join(tempfile.gettempdir(), "tmp*.json")


def test_a_normal_sweep_prints_no_kernel_error_and_leaves_no_key_file(tmp_path, fake):
    before = set(glob.glob(LOOSE_KEYS))
    out = sweep(tmp_path, grid(tmp_path / "g.yaml", fake.url))
    assert out.returncode == 0 and "KeyboardInterrupt caught in kernel" not in out.stdout + out.stderr
    assert out.stderr.strip() == ""
    assert set(glob.glob(LOOSE_KEYS)) <= before  # connection files live in the sweep's private folder


def test_the_next_sweep_removes_what_a_killed_sweep_left(tmp_path, fake):
    fake.configure(latency_ms=300)
    params = grid(tmp_path / "g.yaml", fake.url, topics=12, limits={"max_concurrency": 2, "timeout_s": 10,
                                                                    "retries": 0})
    with started(tmp_path, *sweep_args(params), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        deadline = time.monotonic() + 120
        while fake.stats()["in_flight"] == 0:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        left = [d for base in socket_bases() for d in glob.glob(os.path.join(base, f"bench-kernels-{proc.pid}-*"))]
        assert left  # the kernel's private folder, with its connection file
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    fake.configure(latency_ms=0)
    assert sweep(tmp_path, params).returncode == 0
    assert not [d for d in left if os.path.exists(d)]


def test_a_sweep_runs_when_the_temporary_folder_is_too_long_for_a_socket_path(tmp_path, fake):
    """A Unix socket's path holds 107 bytes; a cluster job's or a test's TMPDIR can take most of them. The kernels'
    sockets and the lease server's (two executions at once) then go to $XDG_RUNTIME_DIR or /tmp
    (bench.core.processes.socket_base), and the sweep leaves none of its folders behind in any of them."""
    long_tmp = tmp_path / ("t" * 80)
    long_tmp.mkdir()
    params = grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url), model("m2", fake.url, name="b")])
    with started(tmp_path, *sweep_args(params, "--jobs", "2"), TMPDIR=str(long_tmp)) as proc:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    assert "collect.job1: ok" in out and "collect.job2: ok" in out  # two executions at once: a lease server too
    mine = [d for base in socket_bases() + [str(long_tmp)] for d in glob.glob(os.path.join(base, f"bench-*-{proc.pid}-*"))]
    assert not mine, mine
