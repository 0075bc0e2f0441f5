"""Quiet, clean runs: no false kernel error, no kernel key files left in a temporary folder (also one too long for a
socket path), a killed sweep's leftovers removed by the next one."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import time

import psutil

from bench.core.processes import socket_bases
from bench.testing.grids import grid, model, started, sweep, sweep_args
from bench.testing.processes import tree


def loose_keys(*folders: str) -> set[str]:
    """Kernel connection files lying loose in these folders (a sweep keeps its own in a private folder)."""
    return {path for folder in folders for path in glob.glob(os.path.join(folder, "tmp*.json"))}


def test_a_sweep_prints_no_kernel_error_and_leaves_no_key_file_under_a_long_tmpdir(tmp_path, fake):
    """A Unix socket's path holds 107 bytes; a cluster job's or a test's TMPDIR can take most of them. The kernels'
    sockets and the lease server's (two executions at once) then go to $XDG_RUNTIME_DIR or /tmp
    (bench.core.processes.socket_base), and the sweep leaves none of its folders, nor a kernel's connection file,
    behind in any of them; nothing it prints is a kernel error."""
    long_tmp = tmp_path / ("t" * 80)
    long_tmp.mkdir()
    folders = [*socket_bases(), str(long_tmp)]
    before = loose_keys(*folders)
    params = grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url), model("m2", fake.url, name="b")])
    with started(tmp_path, *sweep_args(params, "--jobs", "2"), TMPDIR=str(long_tmp)) as proc:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    assert "collect.job1: ok" in out and "collect.job2: ok" in out  # two executions at once: a lease server too
    assert "KeyboardInterrupt caught in kernel" not in out + err and err.strip() == ""
    assert loose_keys(*folders) <= before  # connection files live in the sweep's private folder
    mine = [d for base in folders for d in glob.glob(os.path.join(base, f"bench-*-{proc.pid}-*"))]
    assert not mine, mine


def test_a_killed_sweep_dies_with_its_kernel_and_the_next_sweep_removes_what_it_left(tmp_path, fake):
    """Leaving `bench.testing.grids.started`'s block kills a sweep still running with its kernels (each by its PID:
    a test that fails halfway leaves nothing running); the kernel's private folder, which a kill leaves behind, is
    removed by the next sweep."""
    fake.configure(latency_ms=300)
    params = grid(tmp_path / "g.yaml", fake.url, topics=12, limits={"max_concurrency": 2, "timeout_s": 10,
                                                                    "retries": 0})
    with started(tmp_path, *sweep_args(params), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        deadline = time.monotonic() + 120
        while fake.stats()["in_flight"] == 0:  # its kernel is asking the fake provider
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        left = [d for base in socket_bases() for d in glob.glob(os.path.join(base, f"bench-kernels-{proc.pid}-*"))]
        assert left  # the kernel's private folder, with its connection file
        family = tree(proc.pid)
        assert len(family) >= 2  # the driver and its kernel
    assert proc.returncode == -signal.SIGKILL  # killed, not finished
    _, alive = psutil.wait_procs(family, timeout=30)
    assert alive == []
    fake.configure(latency_ms=0)
    assert sweep(tmp_path, params).returncode == 0
    assert not [d for d in left if os.path.exists(d)]
