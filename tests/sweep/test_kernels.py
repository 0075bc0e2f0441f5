"""A sweep's kernels, started the ordinary way (papermill, bench.kernels' kernel manager): one per execution, the
run reaching it as papermill parameters (never a BENCH_* variable of its own), none left behind, and none started
by a sweep its preflight refuses."""

import socket
import time
from contextlib import contextmanager

import nbformat
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
    waits for its whole timeout (3 s)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def two_models(tmp_path, url, other_url):
    return grids.grid(tmp_path / "g.yaml", url, name="g", topics=6,
                      models=[grids.model("m1", url, name="fake-a", max_concurrency=2),
                              grids.model("m2", other_url, name="fake-b")])


def watch(proc, timeout_s=120.0) -> dict[int, set[str]]:
    """Return every kernel PID seen under ``proc`` until it ends, with the BENCH_* names of its environment."""
    seen: dict[int, set[str]] = {}
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        for pid in kernels(proc.pid) - set(seen):
            try:
                seen[pid] = {k for k in psutil.Process(pid).environ() if k.startswith("BENCH_")}
            except psutil.Error:  # gone meanwhile: counted, its environment unknown
                seen[pid] = set()
        time.sleep(0.05)  # polling processes another process starts
    return seen


def parameters(notebook) -> dict[str, object]:
    """Return the parameters papermill injected into an executed notebook (its ``injected-parameters`` cell)."""
    nb = nbformat.read(str(notebook), as_version=4)
    [cell] = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    values: dict[str, object] = {}
    exec(cell.source, {}, values)  # noqa: S102 (plain literals papermill wrote)
    return values


def test_each_execution_starts_its_own_kernel_told_the_run_by_parameters_and_none_outlives_it(tmp_path, fake):
    params = two_models(tmp_path, fake.url, fake.url)
    env = grids.env(tmp_path)
    with started(tmp_path, *sweep_args(params, "--jobs", "2")) as proc:
        seen = watch(proc)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert "collect.job1: ok" in out and "collect.job2: ok" in out
    assert len(seen) == 2, seen  # two executions, two kernel processes: nothing is shared between them
    assert not alive(set(seen))
    driver = {k for k in env if k.startswith("BENCH_")}
    assert all(names <= driver for names in seen.values()), seen  # no BENCH_* channel of the sweep's own
    for job in ("job1", "job2"):
        given = parameters(tmp_path / "runs/g/notebooks" / f"01_collect.{job}.ipynb")
        assert str(given["lease_server"]).startswith("unix:") and given["sweep_cap"] == 8, given
        assert given["lock_held"] is True and given["progress"] == "sweep" and given["shard"] == job, given
        assert given["run_dir"] == str(tmp_path / "runs/g") and given["batch"] is False, given


def test_a_sweep_refused_by_its_preflight_starts_no_kernel_and_records_nothing(tmp_path, fake):
    with silent_server() as silent:
        params = two_models(tmp_path, fake.url, silent)
        with started(tmp_path, *sweep_args(params, "--jobs", "2")) as proc:
            seen = watch(proc)
            out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, out + err
    assert not seen, seen  # kernels start with their executions, after the preparation
    assert f"api_base {silent} did not answer within 3 s" in err, err
    assert "model caps" not in out and "collect:" not in out
    run_dir = tmp_path / "runs" / "g"
    assert not (run_dir / "executions.jsonl").exists() and not (run_dir / "notebooks").exists()
