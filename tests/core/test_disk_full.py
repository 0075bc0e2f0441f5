"""A full disk or a failing write never loses paid replies; a kill's repaid requests are counted.

The stages run in a subprocess through the real path (bench.stage_runs → bench.models.client → the loopback
fake) with ``RLIMIT_FSIZE`` set and SIGXFSZ ignored, so a write past the limit is cut short
and the next one fails with EFBIG, the way a full disk fails with ENOSPC (no root needed).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from bench.models.cache import ResponseCache
from bench.core.journal import GLOB as JOURNAL_GLOB
from bench.core.journal import in_flight_repeats, recorded_repeats
from bench.core.records import Candidate, Judgment
from bench.core.rescue import import_rescued, rescue_dirs
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.grids import ROOT

CAP = 4
FLUSH_N = 4  # the driver appends every 4 records, so the limit is reached after a few batches
TOPICS = list("abcdefghijkl")
N_ITEMS = 2 * len(TOPICS) * 10  # 2 prompts × 120 scenarios (every request, collect or judge, distinct)
DRIVER = r"""
import asyncio, sys
from bench.core import writer
writer.FLUSH_EVERY_N = int(sys.argv[3])
from bench.core.errors import BenchError
from bench.run import open_run
from bench.stage_runs import run_collect, run_judge

async def main(params, judge):
    run = open_run(params)
    print(await run_collect(run, judge=judge, progress="none"), flush=True)
    if judge:
        print(await run_judge(run, progress="none"), flush=True)

try:
    asyncio.run(main(sys.argv[1], sys.argv[2] == "judge"))
except BenchError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)
"""


def outside_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a child process whose rescue folders outside the run are under ``tmp_path``: the response
    cache's folder and the temporary folder (created)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return grids.env(tmp_path, BENCH_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"), **extra)


@pytest.fixture
def driver_env(tmp_path):
    """The environment of the driver: runs, response cache and temporary files under ``tmp_path``, no bytecode."""
    return outside_env(tmp_path, PYTHONDONTWRITEBYTECODE="1")


def full_grid(tmp_path, fake, judge=False):
    """Write the grid the stages fill the disk with: one model, two prompts × 120 scenarios, a judge if asked."""
    return grids.grid(tmp_path / "full.yaml", fake.url, name="full",
                      models=[grids.model("m1", fake.url, name="fake-a")],
                      prompts=[grids.prompt("p", "One tip about {topic}, number {n}."),
                               grids.prompt("q", "Another tip about {topic}, number {n}?")],
                      scenarios=grids.generate(topic=TOPICS, n=list(range(1, 11))),
                      judges=[grids.judge("rubric", fake.url, name="judge-r")] if judge else None,
                      limits={"max_concurrency": CAP, "timeout_s": 20, "retries": 0})


def file_limit(nbytes):
    """preexec_fn: files of the child cannot grow past ``nbytes``; a write past it fails (EFBIG), no signal."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return limit


def drive(params, env, stage, limit=None, **kw):
    return subprocess.run([sys.executable, "-c", DRIVER, str(params), stage, str(FLUSH_N)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=file_limit(limit) if limit else None, **kw)


def lines_of(paths):
    return [json.loads(line) for p in paths for line in Path(p).read_text().splitlines() if line.strip()]


def records(run_dir, kind, rescued):
    """Return (records in the run's own files, records in its rescue files) of one kind."""
    files = RunStore(run_dir).files(kind)
    return (lines_of(p for p in files if ".rescue-" not in p.name),
            lines_of(p for p in files if ".rescue-" in p.name) + rescued)


def outside_rescue(run_dir):
    return lines_of(p for d in rescue_dirs(run_dir) if d.is_dir() for p in sorted(d.glob("*.rescue-*.jsonl")))


def assert_one_clear_message(proc):
    err = proc.stderr
    assert proc.returncode == 2, err[-3000:]
    assert err.count("EFBIG") == 1 and err.lower().count("file too large") == 1, err[-3000:]
    assert "stopped issuing calls" in err and "paid replies saved to" in err, err[-3000:]
    for noise in ("Session is closed", "Unclosed", "Traceback", "dictionary changed size", "never awaited",
                  "cannot write the response cache"):
        assert noise not in err, err[-3000:]


@pytest.mark.parametrize("stage", ["collect", "judge"])
def test_a_full_disk_stops_the_stage_at_once_and_keeps_every_paid_reply(tmp_path, fake, driver_env, stage):
    fake.configure(latency_ms=100)
    params = full_grid(tmp_path, fake, judge=stage == "judge")
    run_dir = tmp_path / "runs" / "full"
    # a limit above scenarios.jsonl and the rubric copy, far below what the stage writes
    first = drive(params, driver_env, stage, limit=40_000)
    assert_one_clear_message(first)
    sent = fake.stats()["requests"]
    outside = outside_rescue(run_dir)
    kinds = [Candidate] + ([Judgment] if stage == "judge" else [])
    kept = collections.Counter()
    rescued_n = 0
    for kind in kinds:
        written, rescued = records(run_dir, kind, [r for r in outside if r["id"].startswith(kind.id_prefix)])
        assert all(r["error"] is None for r in written + rescued)
        kept.update(r["id"] for r in written + rescued)
        rescued_n += len(rescued)
    # every paid reply is found afterwards (written or rescued), none twice
    assert set(kept.values()) == {1} and sum(kept.values()) == sent
    assert rescued_n >= 1
    # the stage stopped at once: what was written, the batch that failed and the calls in flight or queued
    assert rescued_n <= FLUSH_N + 4 * CAP * len(kinds)
    assert sent < N_ITEMS * len(kinds) // 2
    assert f"{rescued_n} paid replies saved to" in first.stderr

    fake.configure(latency_ms=0)
    resumed = drive(params, driver_env, stage)  # the limit lifted
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    store = RunStore(run_dir)
    for kind in kinds:
        done = collections.Counter(r.id for r in store.read(kind) if r.ok)
        assert len(done) == N_ITEMS and set(done.values()) == {1}
    assert fake.stats()["requests"] == N_ITEMS * len(kinds)  # no reply paid twice
    assert not outside_rescue(run_dir)


@contextlib.contextmanager
def unwritable(folder: Path):
    """Make ``folder`` refuse new files, even to root (``chattr +i``), as a full disk refuses the cache's first write
    (which of the run's files and the cache's fills first depends on their sizes); skip where that is refused."""
    folder.mkdir(parents=True)
    if os.geteuid() != 0:
        folder.chmod(0o500)
    elif subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem refuses chattr +i: no folder refuses root's writes here")
    try:
        yield
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o700)


def test_a_cache_that_cannot_be_written_either_adds_no_second_message(tmp_path, fake, driver_env):
    # every write of the cache fails here: the stage still ends with its one message
    fake.configure(latency_ms=20)
    with unwritable(tmp_path / "runs" / ".cache" / "responses"):
        first = drive(full_grid(tmp_path, fake), driver_env, "collect", limit=40_000)
    assert_one_clear_message(first)


def test_a_short_write_is_detected_and_leaves_no_torn_line(tmp_path):
    script = r"""
import json, os, resource, sys
from bench.core.records import Candidate
from bench.core.store import RunStore, StoreWriteError
from bench.testing.records import candidate
store = RunStore(sys.argv[1])
store.append([candidate(f"s{i}", output="x" * 300) for i in range(2)])
size = store.path(Candidate).stat().st_size
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 500, hard))  # room for one record, not two
out = {"size_before": size}
try:
    store.append([candidate(f"s{i}", output="x" * 300) for i in range(2, 5)])
    out["raised"] = None
except StoreWriteError as err:
    out.update(raised=str(err), errno=err.errno, unwritten=[c.scenario_id for c in err.unwritten])
out["size_after"] = store.path(Candidate).stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
store.append([candidate("s5", output="x" * 300)])
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["raised"] and "file too large (EFBIG) writing candidates.jsonl" in out["raised"]
    assert out["errno"] == 27 and out["unwritten"] == ["s2", "s3", "s4"]
    assert out["size_after"] == out["size_before"]  # cut back: nothing torn for the next append to glue onto
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torn or unreadable line anywhere
        assert [c.scenario_id for c in RunStore(tmp_path / "run").read(Candidate)] == ["s0", "s1", "s5"]


def test_rescue_spills_over_to_folders_outside_the_run_and_the_next_run_moves_it_in(tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "x"
    run_dir.mkdir(parents=True)
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    script = r"""
import json, sys
from bench.core.rescue import save
from bench.testing.records import candidate
recs = [candidate(f"s{i}", output="x" * 700) for i in range(4)]
saved, left, reason = save(sys.argv[1], recs)
print(json.dumps({"saved": [[n, str(p)] for n, p in saved], "left": [c.scenario_id for c in left],
                  "reason": reason}))
"""
    env = outside_env(tmp_path)
    # each file can hold one record: the run folder takes one, each rescue folder outside one, one is left
    proc = subprocess.run([sys.executable, "-c", script, str(run_dir)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=file_limit(1500))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    folders = [Path(p).parent for _n, p in out["saved"]]
    assert [n for n, _p in out["saved"]] == [1, 1, 1] and folders == [run_dir, *rescue_dirs(run_dir)]
    assert out["left"] == ["s3"] and "EFBIG" in out["reason"]
    assert str(tmp_path / "cache") in str(folders[1]) and str(tmp_path / "tmp") in str(folders[2])
    assert [c.scenario_id for c in RunStore(run_dir).read(Candidate)] == ["s0"]
    assert import_rescued(run_dir) == 2
    assert sorted(c.scenario_id for c in RunStore(run_dir).read(Candidate)) == ["s0", "s1", "s2"]
    assert not any(d.exists() for d in rescue_dirs(run_dir))
    assert import_rescued(run_dir) == 0  # moved once, never twice


def cache_entries(path):
    """Return the replies the cache keeps for the next process."""
    cache = ResponseCache(path)
    try:
        return len(cache)
    finally:
        cache.close()


def test_a_kill_leaves_a_journal_and_the_resume_counts_the_requests_it_asks_again(tmp_path, fake, driver_env):
    fake.configure(latency_ms=300)
    params = full_grid(tmp_path, fake)
    run_dir = tmp_path / "runs" / "full"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(params), "collect", str(FLUSH_N)], cwd=ROOT,
                            env=driver_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:  # until some replies were received and others are in flight
            stats = fake.stats()
            if stats["requests"] >= 3 * CAP and stats["in_flight"] > 0:
                break
            assert time.monotonic() < deadline and proc.poll() is None, stats
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 60
    while fake.stats()["in_flight"]:  # the fake answers what was in flight, to nobody
        assert time.monotonic() < deadline
    sent = fake.stats()["requests"]
    cache_path = tmp_path / "runs" / ".cache" / "responses"
    expected = sent - cache_entries(cache_path)  # in flight at the kill: a reply is in the cache as it is received
    assert 1 <= expected <= CAP  # at most the requests in flight, which the cap bounds
    journals = sorted(run_dir.glob(JOURNAL_GLOB))
    assert len(journals) == 1 and len(journals[0].read_text().splitlines()) == sent  # every request sent, once
    cache = ResponseCache(cache_path)
    assert in_flight_repeats(run_dir, cache) == expected
    cache.close()

    fake.configure(latency_ms=0)
    resumed = drive(params, driver_env, "collect")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert recorded_repeats(run_dir) == expected
    # at most those were paid twice
    assert N_ITEMS <= fake.stats()["requests"] <= N_ITEMS + expected
    assert not list(run_dir.glob(JOURNAL_GLOB))  # a clean end removes the journal
    done = collections.Counter(c.id for c in RunStore(run_dir).read(Candidate) if c.ok)
    assert len(done) == N_ITEMS and set(done.values()) == {1}
