"""The response cache's write-ahead log and key filter: a killed process keeps its replies, a live one's log is
its own, a miss skips sqlite yet finds what another process stored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.models import cache as cache_mod
from bench.models._cache_log import log_dir
from bench.models._key_filter import BUILD_AFTER
from bench.models.cache import ResponseCache

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import sys, time
from bench.models.cache import ResponseCache
cache = ResponseCache(sys.argv[1])
for i in range(int(sys.argv[2])):
    cache.put_later(f"{i:064x}", {"text": f"reply {i}", "usage": {}})
log = cache._log
deadline = time.monotonic() + 60
while log.rows < int(sys.argv[2]):  # the writer thread appended them all
    assert time.monotonic() < deadline
    time.sleep(0.005)
print("logged", flush=True)
if sys.stdin.readline().strip() == "close":
    cache.close()
    print("closed", flush=True)
"""


def _writer(path: Path, n: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n)], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "logged"
    return proc


def test_a_killed_process_keeps_its_logged_replies_and_the_next_opener_merges_them(tmp_path):
    path = tmp_path / "c.sqlite"
    proc = _writer(path, 30)
    try:
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    logs = list(log_dir(path).glob("*.log"))
    assert len(logs) == 1 and logs[0].stat().st_size > 0  # never merged: it died first
    cache = ResponseCache(path)
    try:
        assert len(cache) == 30 and cache.get(f"{7:064x}") == {"text": "reply 7", "usage": {}}
        assert not list(log_dir(path).glob("*.log"))  # merged, then removed
    finally:
        cache.close()


def test_a_live_process_log_is_left_to_it_and_merged_when_it_closes(tmp_path):
    path = tmp_path / "c.sqlite"
    proc = _writer(path, 5)
    try:
        other = ResponseCache(path)
        assert len(other) == 0 and other.get(f"{1:064x}") is None  # its lock is held: not another's to merge
        assert len(list(log_dir(path).glob("*.log"))) == 1
        proc.stdin.write("close\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "closed"
        assert len(other) == 5  # merged into sqlite at its close
        deadline = time.monotonic() + 60
        while other.get(f"{1:064x}") is None:  # a miss remembered at most the filter's 50 ms
            assert time.monotonic() < deadline
            time.sleep(0.002)
        assert other.get(f"{1:064x}")["text"] == "reply 1"
        other.close()
    finally:
        proc.kill()
        proc.wait()
    assert not log_dir(path).exists()  # the last one out removes the empty folder


def test_a_torn_last_line_of_a_dead_log_is_skipped(tmp_path):
    path = tmp_path / "c.sqlite"
    proc = _writer(path, 3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    log = next(log_dir(path).glob("*.log"))
    with log.open("ab") as f:
        f.write(b'{"k":"' + b"f" * 64 + b'","t":1.0,"v":{"text":"cut sh')  # a write a kill cut short
    cache = ResponseCache(path)
    assert len(cache) == 3 and cache.get("f" * 64) is None
    cache.close()


def test_a_long_log_is_merged_without_waiting_for_flush(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "MERGE_ROWS", 10)
    cache = ResponseCache(tmp_path / "c.sqlite")
    reader = ResponseCache(tmp_path / "c.sqlite")
    try:
        for i in range(25):
            cache.put_later(f"{i:064x}", {"text": str(i)})
        deadline = time.monotonic() + 60
        while len(reader) < 10:  # merged by the writer thread once the log held 10
            assert time.monotonic() < deadline
            time.sleep(0.002)
        assert all(cache.get(f"{i:064x}") == {"text": str(i)} for i in range(25))  # merged or not: answered
    finally:
        cache.close()
        reader.close()


def test_misses_skip_sqlite_after_the_filter_is_built_yet_find_what_another_process_stored(tmp_path):
    path = tmp_path / "c.sqlite"
    seed = ResponseCache(path)
    seed.put_later("a" * 64, {"text": "stored before"})
    seed.close()
    cache = ResponseCache(path)
    try:
        for i in range(BUILD_AFTER):
            assert cache.get(f"{i:064x}") is None
        deadline = time.monotonic() + 60
        while cache._filter is None:  # built on the writer thread
            assert time.monotonic() < deadline
            time.sleep(0.002)
        assert cache.get("a" * 64) == {"text": "stored before"}  # in the filter: read from sqlite
        other = ResponseCache(path)
        other.put_later("b" * 64, {"text": "stored by another process"})
        other.close()
        while cache.get("b" * 64) is None:  # within the filter's freshness (50 ms), never missed for good
            assert time.monotonic() < deadline
            time.sleep(0.002)
        cache.put_later("c" * 64, {"text": "mine"})
        cache.flush()  # merged: no longer in memory, yet never a miss
        assert cache.get("c" * 64) == {"text": "mine"}
    finally:
        cache.close()


def test_a_log_being_created_is_never_merged_by_another_process(tmp_path):
    path = tmp_path / "c.sqlite"
    folder = log_dir(path)
    folder.mkdir()
    young = folder / "host-1-abcd.new"  # created, not yet locked and named a log by its process
    young.write_bytes(b'{"k":"' + b"a" * 64 + b'","t":1.0,"v":{"text":"in the making"}}\n')
    cache = ResponseCache(path)
    try:
        assert len(cache) == 0 and young.exists()  # only a locked-free *.log is another's to merge
    finally:
        cache.close()


def test_when_the_log_cannot_be_written_flush_puts_the_replies_straight_into_sqlite(tmp_path):
    path = tmp_path / "c.sqlite"
    log_dir(path).write_text("a file where the log folder goes: every append fails")
    cache = ResponseCache(path)
    try:
        with pytest.warns(RuntimeWarning, match="shown once"):
            for i in range(3):
                cache.put_later(f"{i:064x}", {"text": str(i)})
            cache.flush()
        assert len(cache) == 3 and cache.get(f"{2:064x}") == {"text": "2"}
    finally:
        cache.close()


def test_a_failed_merge_waits_its_pause_even_while_appends_succeed(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "MERGE_ROWS", 2)
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache._db.execute("CREATE TRIGGER full BEFORE INSERT ON responses BEGIN SELECT RAISE(ABORT, 'locked'); END")
    try:
        with pytest.warns(RuntimeWarning, match="shown once"):
            for i in range(6):
                cache.put_later(f"{i:064x}", {"text": str(i)})
            deadline = time.monotonic() + 60
            while cache._log.rows < 6 or not cache._merge_retry_at:  # every append landed, no merge could
                # (a merge fails, and warns, just after the append that made the log long enough)
                assert time.monotonic() < deadline
                time.sleep(0.002)
        assert cache._merge_retry_at > time.monotonic()  # the appends did not cut the merge's pause short
        assert len(cache) == 0 and all(cache.get(f"{i:064x}") == {"text": str(i)} for i in range(6))
        cache._db.execute("DROP TRIGGER full")
        cache.flush()
        assert len(cache) == 6
    finally:
        cache.close()


def test_replies_this_process_merges_are_in_its_filter_without_reading_them_back(tmp_path):
    path = tmp_path / "c.sqlite"
    other = ResponseCache(path)
    cache = ResponseCache(path)
    try:
        assert cache.get("0" * 64) is None  # the first miss loads the filter of the (empty) cache
        other.put_later("d" * 64, {"text": "another process's"})
        other.flush()  # a row this process's filter has not read yet
        for i in range(1, 30):
            cache.put_later(f"{i:064x}", {"text": str(i)})
        cache.flush()
        top = cache._db.execute("SELECT MAX(rowid) FROM responses").fetchone()[0]
        assert cache._filter.high < top  # the other's row came first: its rows are read, ours with them
        time.sleep(0.06)  # past the filter's freshness (50 ms): a miss reads the rows stored since
        assert cache.get("d" * 64) == {"text": "another process's"}
        assert cache._filter.high == top
        for i in range(30, 60):
            cache.put_later(f"{i:064x}", {"text": str(i)})
        time.sleep(0.06)  # the filter is stale now: a miss would read newer rows
        cache.flush()
        assert cache._filter.high == cache._db.execute("SELECT MAX(rowid) FROM responses").fetchone()[0]
        assert all(cache.get(f"{i:064x}") == {"text": str(i)} for i in range(1, 60))  # stored: never a miss
    finally:
        cache.close()
        other.close()


def test_a_reply_that_cannot_be_encoded_is_left_out_and_the_writer_goes_on(tmp_path):
    """A reply JSON cannot hold is dropped as it is queued, with a warning (asked again later), never stopping the
    writer thread nor failing the stage's flush."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    with pytest.warns(cache_mod.CacheWriteWarning, match="cannot be stored"):
        cache.put_later("bad", {"text": "x", "usage": {}, "odd": {1, 2}})  # a set: JSON cannot hold it
        for i in range(50):
            cache.put_later(f"{i:064x}", {"text": f"reply {i}", "usage": {}})
        cache.flush()
    assert cache.get("bad") is None and cache.get(f"{7:064x}")["text"] == "reply 7"
    cache.put_later("later", {"text": "after", "usage": {}})
    cache.flush()
    cache.close()
    reopened = ResponseCache(tmp_path / "c.sqlite")
    assert len(reopened) == 51 and reopened.get("later")["text"] == "after"
    reopened.close()


def test_the_writer_gathers_a_group_as_long_as_replies_take_within_its_bounds(tmp_path):
    """A kill loses at most one group of replies: 50 ms of them, or as many as take one reply's time (about the
    requests in flight, which a kill loses too) up to 250 ms; slow replies need fewer wakes and writes."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert cache.gather_s == cache_mod.COMMIT_EVERY_S
    keys = iter(f"{i:064x}" for i in range(1000))
    for took, expected in ((0.12, 0.12), (40.0, cache_mod.LONGEST_GATHER_S), (0.002, cache_mod.COMMIT_EVERY_S)):
        for _ in range(80):
            cache.put_later(next(keys), {"text": "a reply", "usage": {}}, took)
        assert cache.gather_s == pytest.approx(expected, rel=0.01)
    cache.put_later(next(keys), {"text": "a cached reply's time is not a reply's", "usage": {}}, None)
    assert cache.gather_s == pytest.approx(cache_mod.COMMIT_EVERY_S, rel=0.01)
    cache.flush()
    assert len(cache) == 241
    cache.close()
