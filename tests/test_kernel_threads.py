"""Kernels started before their executions are known (bench.kernel_threads): an execution that adopts one runs on
that very kernel with the driver's environment of now, a kernel that died is replaced, and none is left behind."""

from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace

import nbformat
import psutil

from bench.kernel_threads import end_unused, start_early, take_early
from bench.kernels import end_kernel, papermill
from tests.sweep.test_prestart import alive, kernels

WAIT_S = 120  # a kernel's start on a loaded 2-core machine


def report_notebook(path):
    """Write a notebook whose one cell prints the kernel's PID, working folder and the variables under test."""
    code = ("import json, os\nprint(json.dumps({'pid': os.getpid(), 'cwd': os.getcwd(), "
            "'env': {k: os.environ.get(k) for k in ('BENCH_T_LATE', 'BENCH_T_GONE', 'BENCH_T_OWN')}}))")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def kernel_pid(km) -> int:
    return km.provisioner.process.pid


def gone(pid: int) -> bool:
    """Wait (at most WAIT_S) for process ``pid`` to end; return whether it did."""
    try:
        psutil.Process(pid).wait(timeout=WAIT_S)
    except psutil.NoSuchProcess:
        pass
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def adopt(kernel, execution, task, cwd) -> None:
    """Hand ``kernel`` its execution and wait until the task ran."""
    kernel.adopt(execution, task, str(cwd))
    assert kernel.done.wait(WAIT_S)


def test_an_adopted_kernel_runs_the_notebook_with_the_environment_and_folder_of_now(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_T_GONE", "set before the kernel started")
    start_early(1)
    try:
        [kernel] = take_early(1)
        assert kernel.spawned.wait(WAIT_S) and kernel.km is not None
        started_pid = kernel_pid(kernel.km)
        monkeypatch.setenv("BENCH_T_LATE", "set once it was starting")  # e.g. the lease server's address
        monkeypatch.delenv("BENCH_T_GONE")
        source, out = report_notebook(tmp_path / "in.ipynb"), tmp_path / "out.ipynb"
        ran = {}

        def task(execution, km):
            ran["km"] = km
            try:
                papermill().execute_notebook(str(source), str(out), km=km, kernel_name="python3",
                                             progress_bar=False)
            finally:
                end_kernel(km)

        adopt(kernel, SimpleNamespace(env={"BENCH_T_OWN": "the execution's own"}, kernel=None), task, tmp_path)
    finally:
        end_unused()
    assert ran["km"] is not None
    seen = json.loads(nbformat.read(str(out), as_version=4).cells[0].outputs[0]["text"])
    assert seen["pid"] == started_pid  # the kernel started early ran the notebook: none was started instead
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == {"BENCH_T_LATE": "set once it was starting", "BENCH_T_GONE": None,
                           "BENCH_T_OWN": "the execution's own"}
    assert gone(started_pid)


def test_a_kernel_that_died_before_its_execution_is_replaced_by_a_fresh_start(tmp_path):
    start_early(1)
    try:
        [kernel] = take_early(1)
        assert kernel.spawned.wait(WAIT_S) and kernel.km is not None
        pid = kernel_pid(kernel.km)
        os.kill(pid, signal.SIGKILL)
        assert gone(pid)
        given = {}
        adopt(kernel, SimpleNamespace(env=None, kernel=None), lambda execution, km: given.update(km=km), tmp_path)
    finally:
        end_unused()
    assert given == {"km": None}  # papermill then starts the execution's kernel itself, with the right environment


def test_kernels_no_execution_takes_are_ended():
    before = alive(kernels(os.getpid()))
    start_early(2)  # returns once both are spawned
    try:
        started = alive(kernels(os.getpid())) - before
        assert len(started) == 2
    finally:
        end_unused()
    assert all(gone(p) for p in started)
    assert take_early(1) == []
