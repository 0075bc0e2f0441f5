"""A sweep's kernels, started the ordinary way (papermill, bench.kernels' kernel manager): none started by a sweep
its preflight refuses; the helpers that find a sweep's kernels and read what papermill told them. One kernel per
execution, told the run by parameters, none outliving it: tests/sweep/test_jobs.py."""

import os
import socket
import threading
import time
from contextlib import contextmanager

import nbformat
import psutil

from bench.testing import grids
from bench.testing.in_process import command
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
    waits for its whole timeout (3 s)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def two_models(tmp_path, url, other_url):
    return grids.grid(tmp_path / "g.yaml", url, name="g", topics=6,
                      models=[grids.model("m1", url, name="fake-a", max_concurrency=2),
                              grids.model("m2", other_url, name="fake-b")])


def parameters(notebook) -> dict[str, object]:
    """Return the parameters papermill injected into an executed notebook (its ``injected-parameters`` cell)."""
    nb = nbformat.read(str(notebook), as_version=4)
    [cell] = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    values: dict[str, object] = {}
    exec(cell.source, {}, values)  # noqa: S102 (plain literals papermill wrote)
    return values


def test_a_sweep_refused_by_its_preflight_starts_no_kernel_and_records_nothing(tmp_path, fake):
    """`bench sweep --jobs 2` in this process, watched from here for a kernel of its own until it ends."""
    with silent_server() as silent:
        params = two_models(tmp_path, fake.url, silent)
        done: list = []
        args = grids.sweep_args(params, "--jobs", "2")
        swept = threading.Thread(target=lambda: done.append(command(tmp_path, *args)))
        swept.start()
        seen: set[int] = set()
        while swept.is_alive():
            seen |= kernels(os.getpid())
            time.sleep(0.05)  # polling the processes a command starts
        swept.join()
    [out] = done
    assert out.returncode == 2, out.log
    assert not seen, seen  # kernels start with their executions, after the preparation
    assert f"api_base {silent} did not answer within 3 s" in out.stderr, out.stderr
    assert "model caps" not in out.stdout and "collect:" not in out.stdout
    run_dir = tmp_path / "runs" / "g"
    assert not (run_dir / "executions.jsonl").exists() and not (run_dir / "notebooks").exists()
