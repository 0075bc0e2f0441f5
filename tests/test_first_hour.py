"""Small things a first hour trips on (issue 27, point 6), each through the real command: a stage's line never
says "ok" beside failed items, `bench validate … | head` exits quietly, progress into a pipe is one line every
few seconds with the time elapsed, and `make lab` starts JupyterLab with its news prompt off."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.testing.grids import ROOT, grid, judge, model, prompt, started, sweep
from bench.testing.processes import fetch_when_up, free_port, stopped_at_exit

BUDGET_S = 240  # JupyterLab on a loaded 2-core machine


@pytest.fixture(scope="module")
def per_cell(tmp_path_factory, fake_server):
    """Sweep two models × prompts p and q, judged, one execution per cell (--per-cell), q's answer on t1 failing for
    good (an HTTP 400 is never retried); return the finished command."""
    fake_server.reset()
    fake_server.configure(replies=[{"match": "hint on t1.", "status": 400}])
    tmp, url = tmp_path_factory.mktemp("per-cell"), fake_server.url
    params = grid(tmp / "g.yaml", url, models=[model("m1", url), model("m2", url)],
                  prompts=[prompt("p", "One tip about {topic}."), prompt("q", "One hint on {topic}.")],
                  judges=[judge("grader", url)])
    try:
        return sweep(tmp, params, "--per-cell")
    finally:
        fake_server.reset()


def test_a_stage_line_never_says_ok_beside_failed_items(per_cell):
    out = per_cell
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-2000:]  # the run ended with failed items
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("  collect")]
    failed = [ln for ln in lines if "failed" in ln]
    assert len(failed) == 2 and not any("ok" in ln.split() for ln in failed), lines
    assert all(re.fullmatch(r"  collect\.\S+: finished, 1 item\(s\) failed: see the summary below \[\d+\.\ds\]", ln)
               for ln in failed), failed
    assert "2 item(s) failed:" in out.stdout  # the summary the lines point to
    assert sum(bool(re.fullmatch(r"  collect\.\S+: ok \[.*", ln)) for ln in lines) == 2, lines


def test_each_execution_line_counts_only_its_own_cells_failures(per_cell):
    """--per-cell: the failed answers of prompt q's cells make only those executions' lines say so (the same
    model's cells of prompt p stay "ok")."""
    lines = [ln for ln in per_cell.stdout.splitlines() if ln.startswith("  collect")]
    assert len(lines) == 4, per_cell.stdout[-3000:]
    failed = [ln for ln in lines if "finished, 1 item(s) failed" in ln]
    assert len(failed) == 2 and all("q" in ln.split(":")[0] for ln in failed), lines
    assert sum(bool(re.search(r": ok \[", ln)) for ln in lines) == 2, lines


def _wide_params(path: Path) -> Path:
    """A dry grid whose `bench validate` prints about 300 kB: far more than a pipe holds."""
    data = {"name": "pipe", "models": [{"id": f"m{i}", "model": f"dry/x{i}"} for i in range(100)],
            "prompts": [{"id": f"p{i}", "version": "v1", "user": "hi {x}"} for i in range(100)],
            "scenarios": {"generate": {"dimensions": {"x": ["a", "b"]}}}}
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_into_a_closed_pipe_exits_quietly(tmp_path):
    with started(tmp_path, "validate", str(_wide_params(tmp_path / "w.yaml"))) as proc:
        first = proc.stdout.readline()  # what `| head -1` takes, then it exits
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=300) == 141, err  # 128 + SIGPIPE, as `yes | head` reports
    assert first.startswith("sweep pipe: 10000 cells") and err == "", err


def _progress_lines(stdout: int) -> subprocess.Popen:
    """Start a Progress the way a stage runs one (mode auto, outside a kernel) with stdout on ``stdout``; it prints
    its interval, then its lines; return the process."""
    code = ("from bench.core.progress import Progress; p = Progress('collect', {'m1': 3}); print(p.every_s); "
            "p.update('m1'); p.update('m1', failed=True); p.update('m1'); p.close()")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE)
    return proc


def test_progress_into_a_pipe_is_a_line_every_few_seconds_with_the_time_elapsed():
    proc = _progress_lines(subprocess.PIPE)
    out, err = proc.communicate(timeout=120)
    lines = out.decode().splitlines()
    assert proc.returncode == 0, err
    assert float(lines[0]) == 5.0, "into a pipe or a file: one line every 5 s, not every 2"
    assert re.fullmatch(r"collect: 3/3 \(100%\) \| m1 3/3 \| failed 1 \| \d+\.\d/s \| 0:0\d elapsed", lines[-1])

    main, other = pty.openpty()  # a terminal: the counts move every 2 s
    proc = _progress_lines(other)
    os.close(other)
    text = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal's other end closed: the process is done
            break
        if not chunk:
            break
        text += chunk
    os.close(main)
    assert proc.wait(timeout=120) == 0
    assert float(text.decode().splitlines()[0]) == 2.0 and " elapsed" in text.decode()


def test_a_sweeps_progress_into_a_pipe_says_the_time_elapsed(per_cell):
    out = per_cell.stdout
    lines = [ln for ln in out.splitlines() if re.match(r"\[collect[.\w-]*\] (collect|judge|judging): \d+/\d+", ln)]
    assert lines and all(re.search(r" \| \d+:\d\d elapsed", ln) for ln in lines), out[-3000:]


def test_make_lab_starts_jupyterlab_without_its_news_prompt(tmp_path):
    line = subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    command = next(ln for ln in line.splitlines() if " lab " in ln and "jupyter" in ln)
    args = shlex.split(command.split("$(")[0])  # the root check is a shell substitution: --allow-root below
    assert Path(args[0]).name == "jupyter" and args[1] == "lab", args
    args = [sys.executable, "-m", "jupyter", *args[1:]]  # this interpreter's jupyter, with the Makefile's options
    port, log = free_port(), tmp_path / "lab.log"
    proc = subprocess.Popen([*args, "--no-browser", "--allow-root", f"--port={port}", "--IdentityProvider.token=",
                             "--ServerApp.password="], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter"),
                                 "JUPYTER_DATA_DIR": str(tmp_path / ".data")},
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    with stopped_at_exit(proc):
        page = fetch_when_up(f"http://127.0.0.1:{port}/lab", proc, BUDGET_S, log).decode()
    config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                  page, re.S).group(1))
    assert config["news"] == {"disabled": True}, "the news consent prompt would show"
