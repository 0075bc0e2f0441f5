"""The folder response cache (bench.models.shard_cache): per-process append-only files, read by every process.

Real files and real processes: writers are subprocesses (killed for real where it matters),
and the last test runs `bench sweep` with BENCH_CACHE_SHARDS=1 against the loopback fake.
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

from bench.core import secrets
from bench.core.errors import StoreError
from bench.core.journal import GLOB as JOURNAL_GLOB
from bench.core.journal import in_flight_repeats, recorded_repeats, settle
from bench.models.cache import ResponseCache, open_cache, request_key
from bench.models.shard_cache import ShardCache
from bench.testing.grids import grid, judge, sweep

ROOT = Path(__file__).resolve().parents[2]

# A writer process: `put KEY TEXT` stores a reply and answers `ok`; `stream N SIZE` stores replies
# until killed, printing how many are written; `exit` closes the cache and ends.
WRITER = r"""
import json, os, signal, sys
from bench.models.shard_cache import ShardCache
if "--die-past-the-file-size-limit" in sys.argv:  # Python ignores SIGXFSZ; its default action kills
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
cache = ShardCache(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "put":
        cache.put_later(args[0], {"text": args[1], "pid": os.getpid()})
        print("ok", flush=True)
    elif cmd == "stream":
        for i in range(10**9):
            cache.put_later(f"s{i:07d}", {"text": "y" * int(args[0]), "pid": os.getpid()})
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


SQLITE_ONLY = {"gather_s"}  # how long the sqlite cache's writer gathers a group: the folder kind writes at once


def test_the_folder_cache_answers_every_call_the_sqlite_cache_does(tmp_path):
    """``open_cache`` hands either kind to the pipeline: a call only one kind has fails on the other (a conversation's
    ``persist`` failed every multi-turn prompt on cluster workers, which use folders)."""
    sqlite, cache = ResponseCache(tmp_path / "c.sqlite"), ShardCache(tmp_path / "c")
    public = [{n for n in dir(kind) if not n.startswith("_")} for kind in (sqlite, cache)]  # attributes too
    sqlite.close()
    assert public[0] - SQLITE_ONLY <= public[1], public[0] - public[1]
    cache.put_later("k", {"text": "kept"})
    cache.persist()  # a reply is in the file once put_later returns: another process reads it now
    for kind in (sqlite := ResponseCache(tmp_path / "c.sqlite"), cache):  # which keys are held: one look for many
        kind.put("held", {"text": "h"})
        assert kind.held(["held", "k", "absent", "held"]) == {"held"} | ({"k"} if kind is cache else set())
        assert kind.contains(["held", "absent", "held"]) == 2
    sqlite.close()
    out = subprocess.run([sys.executable, "-c", "import json, sys; from bench.models.shard_cache import ShardCache;"
                          "print(json.dumps(ShardCache(sys.argv[1]).get('k')))", str(cache.path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout) == {"text": "kept"}, out.stderr
    cache.close()


def test_round_trip_hits_misses_and_a_new_process_reads_it(tmp_path):
    key = request_key("model", "messages")
    cache = ShardCache(tmp_path / "c")
    assert cache.path == tmp_path / "c" and len(cache) == 0 and not list(cache.path.iterdir())  # no file until a put
    cache.put(key, {"text": "héllo\nworld", "usage": {"cost_usd": 0.5}})
    cache.put_later("plain key \" with\\ quotes", {"text": "b"})
    assert cache.get(key) == {"text": "héllo\nworld", "usage": {"cost_usd": 0.5}}
    assert cache.get("plain key \" with\\ quotes") == {"text": "b"} and cache.get("absent") is None
    assert (cache.hits, cache.misses) == (2, 1)
    cache.close()
    (name,) = [p.name for p in cache.path.iterdir()]
    assert name.startswith(f"{os.uname().nodename}-{os.getpid()}-") and name.endswith(".jsonl")
    out = subprocess.run([sys.executable, "-c", "import json, sys; from bench.models.shard_cache import ShardCache;"
                          "c = ShardCache(sys.argv[1]); print(json.dumps([c.get(k) for k in sys.argv[2:]]))",
                          str(cache.path), key, "plain key \" with\\ quotes"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert json.loads(out.stdout) == [{"text": "héllo\nworld", "usage": {"cost_usd": 0.5}}, {"text": "b"}], out.stderr


def test_the_first_reply_wins_within_and_across_processes(tmp_path):
    folder = tmp_path / "c"
    writer = Writer(folder)
    try:
        assert writer.send("put k1 first") == "ok" and writer.send("put k1 second") == "ok"
        cache = ShardCache(folder)
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
    again = ShardCache(folder)
    assert again.get("k1")["text"] == "first" and again.get("k2")["text"] in ("first", "other") and len(again) == 2


def _write_many(folder: str, start: int, n: int, go: str) -> None:
    cache = ShardCache(folder)
    Path(f"{go}.{start}").touch()  # opened: ready
    while not os.path.exists(go):  # both writers start writing together
        time.sleep(0.001)
    for i in range(start, start + n):
        cache.put_later(f"k{i}", {"text": f"v{i}", "pid": os.getpid()})
    cache.close()


def test_two_processes_writing_one_folder_each_write_their_own_file_and_a_third_reads_all(tmp_path):
    folder, go = tmp_path / "c", tmp_path / "go"
    reader = ShardCache(folder)  # opened before any reply exists: finds them by re-scanning
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
    assert reader.contains([f"k{i}" for i in range(5000)]) == 5000 and len(reader) == 5000
    assert all(reader.get(f"k{i}")["text"] == f"v{i}" for i in range(5000))
    third = ShardCache(folder)
    assert all(third.get(f"k{i}")["text"] == f"v{i}" for i in range(5000)) and third.misses == 0
    reader.close()
    third.close()


def test_a_reply_another_process_writes_after_open_is_found_by_a_later_get(tmp_path):
    folder = tmp_path / "c"
    writer = Writer(folder)
    try:
        assert writer.send("put early 1") == "ok"
        cache = ShardCache(folder)
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
        cache = ShardCache(folder)
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
        cache = ShardCache(folder)
        assert cache.get("a")["text"] == "x" * 1000 and cache.get("b")["text"] == "y" * 1000
        assert cache.get("c") is None and len(cache) == 2
        cache.put("c", {"text": "again"})  # the torn reply is not known: it is asked and stored again
    cache.close()
    assert ShardCache(folder).get("c") == {"text": "again"}


def test_a_failed_write_warns_once_keeps_replies_in_memory_and_leaves_no_torn_line(tmp_path):
    script = r"""
import json, resource, signal, sys, warnings
sys.dont_write_bytecode = True
from bench.models.shard_cache import ShardCache
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, like a full disk
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (2500, hard))
cache = ShardCache(sys.argv[1])
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for i in range(6):
        cache.put_later(f"k{i}", {"text": str(i) * 1000})
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
    assert len(ShardCache(tmp_path / "c")) == 6


def test_the_folder_cache_stores_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_T_SHARD_TOKEN", "shard-token-6a6a6a")
    secrets.refresh()
    cache = ShardCache(tmp_path / "c")
    cache.put("k1", {"text": "echo shard-token-6a6a6a", "usage": {}})
    cache.put_later("k2", {"text": "Authorization: Bearer shard-token-6a6a6a", "usage": {}})
    cache.flush()
    assert cache.get("k1")["text"] == "echo [redacted]" and cache.get("k2")["text"] == "Authorization: [redacted]"
    cache.close()
    assert ShardCache(tmp_path / "c").get("k1")["text"] == "echo [redacted]"
    assert not any(b"shard-token" in p.read_bytes() for p in (tmp_path / "c").iterdir())


def test_contains_and_len_count_every_process_replies(tmp_path):
    folder = tmp_path / "c"
    cache = ShardCache(folder)
    cache.put("a", {"text": "1"})
    writer = Writer(folder)
    try:
        assert writer.send("put b 2") == "ok" and writer.send("put a other") == "ok"
    finally:
        writer.stop()
    assert cache.contains(["a", "b", "c"]) == 2 and cache.contains([]) == 0  # re-scans: finds b at once
    assert len(cache) == 2 and (cache.hits, cache.misses) == (0, 0)  # contains counts nothing
    cache.close()


def _fork_writes(cache: ShardCache) -> None:
    cache.put("child", {"text": "c"})
    cache.close()


def test_a_forked_child_writes_its_own_file(tmp_path):
    cache = ShardCache(tmp_path / "c")
    cache.put("parent", {"text": "p"})
    child = multiprocessing.get_context("fork").Process(target=_fork_writes, args=(cache,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    cache.put("parent2", {"text": "p2"})
    files = lines_of(tmp_path / "c")
    assert sorted(sorted(e["k"] for e in lines) for lines in files.values()) == [["child"], ["parent", "parent2"]]
    assert cache.contains(["child"]) == 1 and cache.get("child") == {"text": "c"}  # contains re-scans at once
    cache.close()


JOURNALED = r"""
import os, signal, sys
from bench.core.journal import Journal
from bench.models.shard_cache import ShardCache
run_dir, folder, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
journal, cache = Journal(run_dir), ShardCache(folder)
for i, key in enumerate(keys):
    journal.arm(key)
    journal.sent()  # on the wire
    if i < 3:
        cache.put_later(key, {"text": key})  # answered; the last two are still in flight at the kill
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_journal_counts_requests_in_flight_at_a_kill_against_a_folder_cache(tmp_path):
    run_dir, folder = tmp_path / "runs" / "r", tmp_path / "runs" / ".cache" / "shards"
    keys = [request_key("m", i) for i in range(5)]
    proc = subprocess.run([sys.executable, "-c", JOURNALED, str(run_dir), str(folder), *keys], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(list(run_dir.glob(JOURNAL_GLOB))) == 1
    cache = ShardCache(folder)
    assert in_flight_repeats(run_dir, cache) == 2
    assert settle(run_dir, cache) == 2 and recorded_repeats(run_dir) == 2
    assert not list(run_dir.glob(JOURNAL_GLOB)) and settle(run_dir, cache) == 0  # counted once
    cache.close()


def test_the_environment_chooses_the_kind_of_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("BENCH_CACHE", raising=False)
    monkeypatch.delenv("BENCH_CACHE_SHARDS", raising=False)
    default = open_cache()
    assert isinstance(default, ResponseCache) and default.path == tmp_path / "runs/.cache/responses.sqlite"
    default.close()
    monkeypatch.setenv("BENCH_CACHE_SHARDS", "1")
    shards = open_cache()
    assert isinstance(shards, ShardCache) and shards.path == tmp_path / "runs/.cache/shards"
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "runs/.cache/responses.sqlite"))  # a file, but shards asked
    with pytest.raises(StoreError, match="responses.sqlite is a file, but BENCH_CACHE_SHARDS=1"):
        open_cache()
    monkeypatch.delenv("BENCH_CACHE_SHARDS")
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "elsewhere") + "/")
    assert isinstance(open_cache(), ShardCache) and (tmp_path / "elsewhere").is_dir()
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "elsewhere"))  # an existing folder, without the slash
    assert isinstance(open_cache(), ShardCache)
    sqlite = open_cache(tmp_path / "x.sqlite")
    assert isinstance(sqlite, ResponseCache)
    sqlite.close()
    assert isinstance(open_cache(str(tmp_path / "y") + "/"), ShardCache)


def test_a_sweep_with_shards_caches_every_reply_and_a_rerun_makes_no_call(tmp_path, fake):
    judges = [judge("grader", fake.url)]
    first = sweep(tmp_path, grid(tmp_path / "g.yaml", fake.url, topics=12, judges=judges), BENCH_CACHE_SHARDS="1")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    calls = fake.stats()["requests"]
    assert calls == 24  # 12 answers and 12 judgments
    folder = tmp_path / "runs/.cache/shards"
    assert not (tmp_path / "runs/.cache/responses.sqlite").exists()
    assert sum(len(lines) for lines in lines_of(folder).values()) == 24
    renamed = grid(tmp_path / "h.yaml", fake.url, name="h", topics=12, judges=judges)  # everything asked again
    again = sweep(tmp_path, renamed, BENCH_CACHE_SHARDS="1")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert fake.stats()["requests"] == calls  # every reply came from the folder cache
    assert (tmp_path / "runs/h").is_dir()
