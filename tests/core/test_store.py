"""The run store: append-only, crash-safe, resumable."""

import subprocess
import sys
import warnings

import pytest

from bench.core.errors import StoreError
from bench.core.records import Candidate, Scenario
from bench.core.store import RunStore, TornRecordWarning
from bench.testing.records import candidate


def test_append_and_read_back(tmp_path):
    store = RunStore(tmp_path / "demo")
    assert store.append([candidate(f"s{i}", output=f"o{i}") for i in range(3)]) == 3
    assert [c.output for c in store.read("candidate")] == ["o0", "o1", "o2"]
    assert store.path(Candidate).name == "candidates.jsonl"


def test_done_ids_counts_only_successes_and_failures_are_redone(tmp_path):
    store = RunStore(tmp_path)
    ok, bad = candidate("s1", output="fine"), candidate("s2", error="HTTP 500", error_kind="server")
    store.append([ok, bad])
    assert store.done_ids(Candidate) == {ok.id}
    assert set(store.failed(Candidate)) == {bad.id}
    fixed = candidate("s2", output="now fine")
    store.append([fixed])
    assert store.done_ids(Candidate) == {ok.id, fixed.id}
    assert store.failed(Candidate) == {}
    assert store.latest(Candidate)[fixed.id].output == "now fine"
    store.append([candidate("s2", error="a late failure")])  # a success is never replaced by a failure
    assert store.latest(Candidate)[fixed.id].ok


def test_torn_last_line_is_skipped_with_warning_then_cut_before_next_append(tmp_path):
    store = RunStore(tmp_path)
    store.append([candidate("s1", output="a"), candidate("s2", output="b")])
    path = store.path(Candidate)
    whole = candidate("s3", output="c").model_dump_json().encode()
    with open(path, "ab") as fh:
        fh.write(whole[: len(whole) // 2])  # a kill in the middle of a write
    with pytest.warns(TornRecordWarning, match="torn last line"):
        assert [c.output for c in store.read(Candidate)] == ["a", "b"]
    with pytest.warns(TornRecordWarning, match="cut a torn last line"):
        RunStore(tmp_path).append([candidate("s4", output="d")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [c.output for c in RunStore(tmp_path).read(Candidate)] == ["a", "b", "d"]


def test_shards_are_merged_by_readers(tmp_path):
    RunStore(tmp_path, shard="job0").append([candidate("s1", output="a")])
    RunStore(tmp_path, shard="job1").append([candidate("s2", output="b")])
    store = RunStore(tmp_path)
    assert sorted(c.output for c in store.read(Candidate)) == ["a", "b"]
    assert len(store.files(Candidate)) == 2


def test_killed_writer_loses_nothing_already_appended(tmp_path):
    code = (
        "import os, sys\n"
        "from bench.core.store import RunStore\nfrom bench.core.records import Candidate\n"
        "s = RunStore(sys.argv[1])\n"
        "for i in range(200):\n"
        "    s.append([Candidate(model_id='m', model='x/y', prompt_id='p', prompt_version='v', prompt_hash='h',"
        " scenario_id=f's{i}', output='o' * 2000)])\n"
        "    print(i, flush=True)\n"
        "    if i == 120: os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == -9
    acknowledged = len(proc.stdout.split())
    assert acknowledged == 121
    assert len(RunStore(tmp_path).done_ids(Candidate)) == acknowledged


def test_unwritable_run_folder_is_named_even_as_root(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="not writable"):
        RunStore(blocker / "demo").append([candidate("s1", output="a")])


def test_two_stores_probing_one_folder_from_two_threads_never_fail(tmp_path):
    """The collect and the pipelined judge writer of one kernel probe the run folder at once: with one
    probe file name per process, one deleted the other's probe and a normal sweep failed (ENOENT)."""
    import threading

    stores = [RunStore(tmp_path / "run"), RunStore(tmp_path / "run")]
    errors: list[BaseException] = []

    def probe(store: RunStore) -> None:
        try:
            for _ in range(20_000):
                store.ensure_writable()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=probe, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_an_unreadable_line_is_reported_once_however_often_the_run_is_read(tmp_path):
    store = RunStore(tmp_path / "run")
    store.append([Scenario(fields={"q": 1})])
    with open(store.path("scenario"), "ab") as fh:
        fh.write(b'{"schema_version": 1, "id": "broken\n')
    store.append([Scenario(fields={"q": 2})])  # a line in the middle now, not the last
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(5):
            assert len(store.read("scenario")) == 2
            RunStore(tmp_path / "run").done_ids("scenario")
    torn = [w for w in seen if issubclass(w.category, TornRecordWarning)]
    assert len(torn) == 1 and "unreadable line" in str(torn[0].message)
