"""The response cache (bench.models.cache): per-process append-only files in one folder, read by every process.

Real files and real processes: writers are subprocesses (killed for real where it matters), and the sweeps run
their stages in-process (``run_stages``) against the loopback fake provider. Redaction: tests/core/test_secrets.py; a full disk during a
stage: tests/core/test_disk_full.py; a killed conversation: tests/collect/test_conversation_kill.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from bench.core.errors import CacheWriteWarning, StoreError
from bench.core.journal import GLOB as JOURNAL_GLOB
from bench.core.journal import in_flight_repeats, recorded_repeats, settle
from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.models.cache import ResponseCache, open_cache, request_key
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import run_stages

ROOT = Path(__file__).resolve().parents[2]

# A writer process: `put KEY TEXT` stores a reply and answers `ok`; `stream N SIZE` stores replies
# until killed, printing how many are written; `exit` closes the cache and ends.
WRITER = r"""
import json, os, signal, sys
from bench.models.cache import ResponseCache
if "--die-past-the-file-size-limit" in sys.argv:  # Python ignores SIGXFSZ; its default action kills
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
cache = ResponseCache(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "put":
        cache.put(args[0], {"text": args[1], "pid": os.getpid()})
        print("ok", flush=True)
    elif cmd == "stream":
        for i in range(10**9):
            cache.put(f"s{i:07d}", {"text": "y" * int(args[0]), "pid": os.getpid()})
            if i % 50 == 49:
                print(i + 1, flush=True)
    elif cmd == "exit":
        cache.close()
        break
"""


class Writer:
    """A writer subprocess on a cache folder, driven line by line (each command waits for its answer)."""

    def __init__(self, folder: Path, *flags: str, preexec_fn=None):
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # under a file size limit, only the cache writes
        self.proc = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), *flags], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=preexec_fn)
        assert self.proc.stdout.readline().strip() == "ready"

    def send(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc.stdin.close()
        self.proc.stdout.close()


def lines_of(folder: Path) -> dict[str, list[dict]]:
    """Every complete line of every file of a cache folder, parsed, by file name."""
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        data = path.read_bytes()
        out[path.name] = [json.loads(line) for line in data[:data.rfind(b"\n") + 1].splitlines()]
    return out


def test_round_trip_hits_misses_and_a_new_process_reads_it(tmp_path):
    key = request_key("model", "messages")
    cache = ResponseCache(tmp_path / "c")
    assert cache.path == tmp_path / "c" and len(cache) == 0 and not list(cache.path.iterdir())  # no file until a put
    cache.put(key, {"text": "héllo\nworld", "usage": {"cost_usd": 0.5}})
    cache.put("plain key \" with\\ quotes", {"text": "b"})
    assert cache.get(key) == {"text": "héllo\nworld", "usage": {"cost_usd": 0.5}}
    assert cache.get("plain key \" with\\ quotes") == {"text": "b"} and cache.get("absent") is None
    assert (cache.hits, cache.misses) == (2, 1)
    cache.close()
    (name,) = [p.name for p in cache.path.iterdir()]
    assert name.startswith(f"{os.uname().nodename}-{os.getpid()}-") and name.endswith(".jsonl")
    out = subprocess.run([sys.executable, "-c", "import json, sys; from bench.models.cache import ResponseCache;"
                          "c = ResponseCache(sys.argv[1]); print(json.dumps([c.get(k) for k in sys.argv[2:]]))",
                          str(cache.path), key, "plain key \" with\\ quotes"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert json.loads(out.stdout) == [{"text": "héllo\nworld", "usage": {"cost_usd": 0.5}}, {"text": "b"}], out.stderr


def test_the_first_reply_wins_within_and_across_processes(tmp_path):
    folder = tmp_path / "c"
    writer = Writer(folder)
    try:
        assert writer.send("put k1 first") == "ok" and writer.send("put k1 second") == "ok"
        cache = ResponseCache(folder)
        cache.put("k1", {"text": "mine"})  # known from the other process's file: not written again
        cache.put("k2", {"text": "first"})
        cache.put("k2", {"text": "second"})
        assert cache.get("k1")["text"] == "first" and cache.get("k2") == {"text": "first"}
        assert writer.send("put k2 other") == "ok"  # that process never saw k2: its own file holds it too
    finally:
        writer.stop()
    every = [entry for lines in lines_of(folder).values() for entry in lines]
    assert sorted((e["k"], e["v"]["text"]) for e in every) == [("k1", "first"), ("k2", "first"), ("k2", "other")]
    cache.close()
    again = ResponseCache(folder)
    assert again.get("k1")["text"] == "first" and again.get("k2")["text"] in ("first", "other") and len(again) == 2


def _write_many(folder: str, start: int, n: int, go: str) -> None:
    cache = ResponseCache(folder)
    Path(f"{go}.{start}").touch()  # opened: ready
    while not os.path.exists(go):  # both writers start writing together
        time.sleep(0.001)
    for i in range(start, start + n):
        cache.put(f"k{i}", {"text": f"v{i}", "pid": os.getpid()})
    cache.close()


def test_two_processes_writing_one_folder_each_write_their_own_file_and_a_third_reads_all(tmp_path):
    folder, go = tmp_path / "c", tmp_path / "go"
    reader = ResponseCache(folder)  # opened before any reply exists: finds them by re-scanning
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_write_many, args=(str(folder), start, 3000, str(go))) for start in (0, 2000)]
    for w in writers:
        w.start()
    deadline = time.monotonic() + 120
    while not all(Path(f"{go}.{start}").exists() for start in (0, 2000)):
        assert time.monotonic() < deadline and all(w.is_alive() for w in writers)
    go.touch()
    for w in writers:
        w.join(timeout=120)
    assert [w.exitcode for w in writers] == [0, 0]
    files = lines_of(folder)
    assert len(files) == 2
    for name, lines in files.items():  # each file holds the lines of one process, named after it
        assert {e["v"]["pid"] for e in lines} == {int(name.split("-")[-2])}, name
    assert sorted(len(lines) for lines in files.values()) == [3000, 3000]  # k2000..k2999 in both: neither saw
    assert reader.held([f"k{i}" for i in range(5000)]) == {f"k{i}" for i in range(5000)} and len(reader) == 5000
    assert all(reader.get(f"k{i}")["text"] == f"v{i}" for i in range(5000))
    third = ResponseCache(folder)
    assert all(third.get(f"k{i}")["text"] == f"v{i}" for i in range(5000)) and third.misses == 0
    reader.close()
    third.close()


def test_a_reply_another_process_writes_after_open_is_found_by_a_later_get(tmp_path):
    folder = tmp_path / "c"
    writer = Writer(folder)
    try:
        assert writer.send("put early 1") == "ok"
        cache = ResponseCache(folder)
        assert cache.get("early")["text"] == "1" and cache.get("late") is None  # the miss re-scans at most every 1 s
        assert writer.send("put late 2") == "ok"  # appended to a file this reader has already indexed
        newcomer = Writer(folder)
        assert newcomer.send("put later 3") == "ok"  # in a file that did not exist when the reader opened
        newcomer.send("exit")
        newcomer.stop()
        deadline = time.monotonic() + 10
        while cache.get("late") is None or cache.get("later") is None:
            assert time.monotonic() < deadline, "replies written after open were never found"
        assert cache.get("late")["text"] == "2" and cache.get("later")["text"] == "3"
    finally:
        writer.stop()
    cache.close()


def test_a_writer_killed_mid_stream_leaves_only_complete_lines_as_answers(tmp_path):
    folder = tmp_path / "c"
    writer = Writer(folder)
    try:
        writer.proc.stdin.write("stream 20000\n")
        writer.proc.stdin.flush()
        while int(writer.proc.stdout.readline()) < 300:  # replies of 20 KB are being written
            pass
        writer.proc.send_signal(signal.SIGKILL)
    finally:
        writer.stop()
    assert writer.proc.returncode == -signal.SIGKILL
    (path,) = folder.glob("*.jsonl")
    complete = lines_of(folder)[path.name]
    assert len(complete) >= 300
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn last line is skipped without a warning
        cache = ResponseCache(folder)
        assert len(cache) == len(complete)
        assert all(cache.get(e["k"]) == e["v"] for e in complete)
    cache.close()


def test_a_line_torn_by_a_killing_signal_is_skipped_and_its_reply_can_be_written_again(tmp_path):
    """A file size limit cuts the write of the third line short; the writer's next write is killed by SIGXFSZ."""
    folder = tmp_path / "c"
    folder.mkdir()

    def limit():  # SIGXFSZ keeps its default action: the process is killed, no core file
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 * 1100 + 500, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    writer = Writer(folder, "--die-past-the-file-size-limit", preexec_fn=limit)
    try:
        assert writer.send("put a " + "x" * 1000) == "ok" and writer.send("put b " + "y" * 1000) == "ok"
        assert writer.send("put c " + "z" * 1000) == ""  # killed in the middle of its line
    finally:
        writer.stop()
    assert writer.proc.returncode == -signal.SIGXFSZ
    (path,) = folder.glob("*.jsonl")
    data = path.read_bytes()
    assert data.count(b"\n") == 2 and not data.endswith(b"\n") and b'"k":"c"' in data  # torn: c's line, cut
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache = ResponseCache(folder)
        assert cache.get("a")["text"] == "x" * 1000 and cache.get("b")["text"] == "y" * 1000
        assert cache.get("c") is None and len(cache) == 2
        cache.put("c", {"text": "again"})  # the torn reply is not known: it is asked and stored again
    cache.close()
    assert ResponseCache(folder).get("c") == {"text": "again"}


def test_a_failed_write_warns_once_keeps_replies_in_memory_and_leaves_no_torn_line(tmp_path):
    script = r"""
import json, resource, signal, sys, warnings
sys.dont_write_bytecode = True
from bench.models.cache import ResponseCache
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, like a full disk
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (2500, hard))
cache = ResponseCache(sys.argv[1])
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for i in range(6):
        cache.put(f"k{i}", {"text": str(i) * 1000})
        cache.flush()
answered = [cache.get(f"k{i}") == {"text": str(i) * 1000} for i in range(6)]
stored, size = len(cache), sum(p.stat().st_size for p in cache.path.iterdir())
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
cache.flush()
print(json.dumps({"warnings": [str(w.message) for w in seen], "answered": answered, "stored": stored,
                  "size": size, "after": len(cache)}))
"""
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "c")], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert len(got["warnings"]) == 1 and "shown once" in got["warnings"][0] and "EFBIG" in got["warnings"][0]
    assert all(got["answered"]) and got["stored"] == 2 and got["after"] == 6
    (path,) = (tmp_path / "c").glob("*.jsonl")
    assert got["size"] == len(b"".join(path.read_bytes().splitlines(keepends=True)[:2]))  # cut back: nothing torn
    assert len(ResponseCache(tmp_path / "c")) == 6


def test_held_and_len_count_every_process_replies(tmp_path):
    folder = tmp_path / "c"
    cache = ResponseCache(folder)
    cache.put("a", {"text": "1"})
    writer = Writer(folder)
    try:
        assert writer.send("put b 2") == "ok" and writer.send("put a other") == "ok"
    finally:
        writer.stop()
    assert cache.held(["a", "b", "c", "b"]) == {"a", "b"} and cache.held([]) == set()  # re-scans: finds b at once
    assert len(cache) == 2 and (cache.hits, cache.misses) == (0, 0)  # held counts nothing
    cache.close()


def _fork_writes(cache: ResponseCache) -> None:
    cache.put("child", {"text": "c"})
    cache.close()


def test_a_forked_child_writes_its_own_file(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    cache.put("parent", {"text": "p"})
    child = multiprocessing.get_context("fork").Process(target=_fork_writes, args=(cache,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    cache.put("parent2", {"text": "p2"})
    files = lines_of(tmp_path / "c")
    assert sorted(sorted(e["k"] for e in lines) for lines in files.values()) == [["child"], ["parent", "parent2"]]
    assert cache.held(["child"]) == {"child"} and cache.get("child") == {"text": "c"}  # held re-scans at once
    cache.close()


JOURNALED = r"""
import os, signal, sys
from bench.core.journal import Journal
from bench.models.cache import ResponseCache
run_dir, folder, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
journal, cache = Journal(run_dir), ResponseCache(folder)
for i, key in enumerate(keys):
    journal.arm(key)
    journal.sent()  # in flight
    if i < 3:
        cache.put(key, {"text": key})  # answered; the last two are still in flight at the kill
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_journal_counts_the_requests_in_flight_at_a_kill(tmp_path):
    run_dir, folder = tmp_path / "runs" / "r", tmp_path / "runs" / ".cache" / "responses"
    keys = [request_key("m", i) for i in range(5)]
    proc = subprocess.run([sys.executable, "-c", JOURNALED, str(run_dir), str(folder), *keys], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(list(run_dir.glob(JOURNAL_GLOB))) == 1
    cache = ResponseCache(folder)
    assert in_flight_repeats(run_dir, cache) == 2
    assert settle(run_dir, cache) == 2 and recorded_repeats(run_dir) == 2
    assert not list(run_dir.glob(JOURNAL_GLOB)) and settle(run_dir, cache) == 0  # counted once
    cache.close()




def test_the_cache_is_bench_cache_or_a_folder_under_the_runs_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("BENCH_CACHE", raising=False)
    monkeypatch.setenv("BENCH_CACHE_SHARDS", "0")  # a variable of old that chose the kind: nothing reads it now
    default = open_cache()
    assert default.path == tmp_path / "runs/.cache/responses" and default.path.is_dir()
    default.close()
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "elsewhere"))  # with or without a trailing /: a folder
    assert open_cache().path == tmp_path / "elsewhere" and (tmp_path / "elsewhere").is_dir()
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "y") + "/")
    assert open_cache().path == tmp_path / "y"
    (tmp_path / "old.sqlite").write_bytes(b"SQLite format 3\0")  # a cache file of old: refused, never written over
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "old.sqlite"))
    with pytest.raises(StoreError, match=r"old.sqlite: not a folder .*point BENCH_CACHE at another folder"):
        open_cache()


def test_a_reply_that_cannot_be_encoded_is_left_out_and_the_next_is_stored(tmp_path):
    """A reply JSON cannot hold is dropped with a warning (asked again later), never failing the stage."""
    cache = ResponseCache(tmp_path / "c")
    with pytest.warns(CacheWriteWarning, match="cannot be stored"):
        cache.put("bad", {"text": "x", "usage": {}, "odd": {1, 2}})  # a set: JSON cannot hold it
    cache.put("good", {"text": "after", "usage": {}})
    assert cache.get("bad") is None and cache.get("good")["text"] == "after"
    cache.close()
    assert len(ResponseCache(tmp_path / "c")) == 1


def priced(url: str) -> list[dict]:
    return [model("m1", url, price={"input_per_mtok": 1.0, "output_per_mtok": 2.0})]


def test_a_sweep_stores_every_reply_with_its_cost_and_a_rerun_makes_no_call(tmp_path, fake):
    judges = [judge("grader", fake.url, price={"input_per_mtok": 3.0, "output_per_mtok": 4.0})]
    first = run_stages(tmp_path, grid(tmp_path / "g.yaml", fake.url, topics=12, models=priced(fake.url), judges=judges))
    assert first.returncode == 0, first.log
    assert fake.stats()["requests"] == 24  # 12 answers and 12 judgments
    lines = [e for entries in lines_of(tmp_path / "runs/.cache/responses").values() for e in entries]
    assert len(lines) == 24 and all(e["v"]["usage"]["cost_usd"] > 0 for e in lines)  # the reply with what it cost
    paid = {c.output: c.usage.cost_usd for c in RunStore(tmp_path / "runs/g").read(Candidate)}
    assert {e["v"]["text"]: e["v"]["usage"]["cost_usd"] for e in lines if e["v"]["text"] in paid} == paid
    renamed = grid(tmp_path / "h.yaml", fake.url, name="h", topics=12, models=priced(fake.url), judges=judges)
    again = run_stages(tmp_path, renamed)  # the same grid under another name: everything asked again
    assert again.returncode == 0, again.log
    assert fake.stats()["requests"] == 24  # every reply came from the cache
    replayed = RunStore(tmp_path / "runs/h").read(Candidate)
    assert all(c.usage.cached for c in replayed) and {c.output: c.usage.cost_usd for c in replayed} == paid


def test_the_cache_is_private_to_its_user(tmp_path, fake):
    """Issue 47, item 8: the cache was created 0644 (prompts and replies readable by every user of the machine)."""
    previous = os.umask(0o022)  # the common umask, inherited by the sweep: what the cache asks for decides
    try:
        assert run_stages(tmp_path, grid(tmp_path / "g.yaml", fake.url)).returncode == 0
    finally:
        os.umask(previous)
    folder = tmp_path / "runs/.cache/responses"
    files = list(folder.iterdir())
    assert files and oct(folder.stat().st_mode & 0o777) == "0o700"
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {"0o600"}


def test_a_damaged_line_is_skipped_with_one_warning_and_its_reply_asked_again(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, topics=6)
    assert run_stages(tmp_path, params).returncode == 0
    (path,) = (tmp_path / "runs/.cache/responses").glob("*.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"\x00garbage where a reply was\n"  # damage on disk: a complete line that is no cache line
    path.write_bytes(b"".join(lines))
    with pytest.warns(RuntimeWarning) as said:  # all from the cache but one
        out = run_stages(tmp_path, grid(tmp_path / "h.yaml", fake.url, name="h", topics=6))
    assert out.returncode == 0, out.log
    assert any("1 damaged line(s) skipped" in str(w.message) for w in said), [str(w.message) for w in said]
    assert fake.stats()["requests"] == 6 + 1
    assert all(c.ok for c in RunStore(tmp_path / "runs/h").read(Candidate))
