"""No silent wait, and an interrupt says what happened: progress of every phase of a pipelined collect (text
lines and JupyterLab's widget bars), and "Interrupt kernel" during a stage prints one line, not a traceback."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import time
from pathlib import Path

import pytest

from bench.core.progress import configure
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge

ROOT = Path(__file__).resolve().parents[2]


def jury_grid(tmp_path: Path, url: str, topics: int = 4, cap: int = 1) -> Path:
    """One model, ``topics`` scenarios, two judges (distinct endpoints, so both are real requests)."""
    return grid(tmp_path / "g.yaml", url, topics=topics, judges=[judge("grader", url), judge("second", url)],
                limits={"max_concurrency": cap, "timeout_s": 10, "retries": 0})


def test_pipelined_collect_shows_each_judge_and_never_waits_silently(tmp_path, fake, monkeypatch, capsys):
    """Text mode: a line per judge whose total grows as answers arrive, "judging" while the rest is graded,
    and lines while nothing finishes (the rate, what is left, the requests in flight)."""
    import bench

    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    fake.configure(latency_ms=300)  # every request outlasts the interval: lines must come while nothing finishes
    run = bench.open_run(jury_grid(tmp_path, fake.url))
    try:
        asyncio.run(bench.run_collect(run, progress="text", progress_every_s=0.1, judge=True))
    finally:
        configure()  # this process's progress settings back to their defaults
    lines = capsys.readouterr().out.splitlines()

    growing = [ln for ln in lines if re.match(r"judge: \d+/\d+ so far \(the total grows as answers arrive\) "
                                              r"\| grader \d+/\d+ \| second \d+/\d+ \|", ln)]
    assert growing, lines
    assert min(int(re.match(r"judge: \d+/(\d+)", ln)[1]) for ln in growing) < 8  # it grew with the answers
    # once every answer is in, what is left is graded under "judging": the line does not stop at collect's 100%
    collect_done = lines.index(next(ln for ln in lines if ln.startswith("collect: 4/4 (100%)")))
    judging = [ln for ln in lines[collect_done:] if ln.startswith("judging: ")]
    assert judging and all(re.search(r"\| \d+ left, \d+ requests? in flight$", ln) for ln in judging), lines
    assert "judge: 8/8 (100%) | grader 4/4 | second 4/4 | failed 0 |" in "\n".join(lines)
    # a heartbeat: the same counts shown again while a request is in flight (nothing finished in between)
    shown: dict[str, list[str]] = {}
    for ln in lines:
        if ln.endswith("in flight") and " left, " in ln:
            shown.setdefault(ln.split(":")[0], []).append(ln.rsplit(" | ", 2)[0])  # counts, without rate and pending
    assert any(a == b for counts in shown.values() for a, b in zip(counts, counts[1:])), lines
    assert lines[-1] == next(ln for ln in lines if ln.startswith("collect: 4 planned"))  # the stage's one line
    assert len(RunStore(tmp_path / "runs/g").done_ids(Judgment)) == 8


# -- in a Jupyter kernel: widget bars, and "Interrupt kernel" --------------------------------------------------

@pytest.fixture
def kernel(tmp_path):
    """A Jupyter kernel (the project's python3) in the project root, its runs under ``tmp_path``."""
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(ROOT), env={**os.environ, "BENCH_RUNS": str(tmp_path / "runs")})
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def outputs(kc, msg_id: str, timeout: float = 120) -> list[dict]:
    """Return the iopub messages of one execution, until the kernel is idle again."""
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        out.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
    raise AssertionError(f"the cell did not end in {timeout}s: {out[-5:]}")


def test_widget_bars_show_each_judge_until_the_cell_ends(tmp_path, fake, kernel):
    """JupyterLab: a bar per judge next to collect's, described as growing, then "judging" after collect's 100%."""
    _km, kc = kernel
    fake.configure(latency_ms=150)
    params = jury_grid(tmp_path, fake.url)
    msgs = outputs(kc, kc.execute(f"import bench\nrun = bench.open_run({str(params)!r})\n"
                                  f"result = await bench.run_collect(run, judge=True)"))
    assert not [m for m in msgs if m["msg_type"] == "error"], msgs
    states: dict[str, dict] = {}
    history: list[tuple[str, str]] = []  # (widget id, description) as they changed
    for m in msgs:
        if m["msg_type"] not in ("comm_open", "comm_msg"):
            continue
        data = m["content"]["data"]
        states.setdefault(m["content"]["comm_id"], {}).update(data.get("state", {}))
        if isinstance(data.get("state", {}).get("value"), str):
            history.append((m["content"]["comm_id"], data["state"]["value"]))
    bars = {}  # description → (value, max), per tqdm bar (an HBox of description, progress, counters)
    for st in states.values():
        if st.get("_model_name") == "HBoxModel" and len(st.get("children", [])) == 3:
            left, bar, _right = (states[c.removeprefix("IPY_MODEL_")] for c in st["children"])
            bars[left["value"].replace("\u2007", " ").strip().split(":")[0]] = (bar["value"], bar["max"])
    assert bars["collect"] == (4, 4) and bars["m1"] == (4, 4)
    assert bars["judge"] == (8, 8) and bars["grader"] == (4, 4) and bars["second"] == (4, 4), bars
    shown = [text.replace("\u2007", " ") for _id, text in history]
    grew = next(i for i, t in enumerate(shown) if t.startswith("judge (total grows as answers arrive)"))
    collect_full = next(i for i, t in enumerate(shown) if t.startswith("collect: 100%"))
    judging = next(i for i, t in enumerate(shown) if t.startswith("judging:"))
    assert grew < collect_full < judging, shown  # after collect's 100%, the judge bar still says what goes on


def test_interrupting_the_kernel_prints_one_line_not_a_traceback(tmp_path, fake, kernel):
    """JupyterLab's "Interrupt kernel" during a pipelined collect: one line (answers and judgments saved,
    what is left, run the cell again), no CancelledError traceback; running the cell again finishes the work."""
    km, kc = kernel
    fake.configure(latency_ms=300)
    params = jury_grid(tmp_path, fake.url, topics=12, cap=2)
    cell = (f"import bench\nrun = bench.open_run({str(params)!r})\n"
            f"result = await bench.run_collect(run, progress='text', judge=True)")
    msg_id = kc.execute(cell)
    deadline = time.monotonic() + 60
    while not (fake.stats()["in_flight"] and fake.stats()["requests"] >= 3):  # the stage is in flight
        assert time.monotonic() < deadline, fake.stats()
        time.sleep(0.02)
    km.interrupt_kernel()
    msgs = outputs(kc, msg_id)

    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "Interrupted", errors
    assert len(errors[0]["traceback"]) == 1, errors[0]["traceback"]
    line = errors[0]["traceback"][0]
    found = re.fullmatch(r"interrupted: (\d+) of 12 answers and (\d+) of 24 judgments saved in (\S+); "
                         r"(\d+) answers and (\d+) judgments left; run this cell again to resume", line)
    assert found, line
    store = RunStore(tmp_path / "runs/g")
    answers, judgments = len(store.done_ids(Candidate)), len(store.done_ids(Judgment))
    assert (int(found[1]), int(found[2]), int(found[4]), int(found[5])) == \
        (answers, judgments, 12 - answers, 24 - judgments)
    assert Path(found[3]).resolve() == (tmp_path / "runs/g").resolve() and answers < 12
    text = "\n".join(str(m["content"]) for m in msgs)
    assert "CancelledError" not in text and "Traceback" not in text

    fake.configure(latency_ms=0)
    again = outputs(kc, kc.execute(cell))  # resume: the same cell, run again
    assert not [m for m in again if m["msg_type"] == "error"], again
    assert len(store.done_ids(Candidate)) == 12
    assert sorted(c.id for c in store.read(Candidate) if c.ok) == sorted(store.done_ids(Candidate))  # none twice
