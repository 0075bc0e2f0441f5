"""StoreTally: a run folder's answers and judgments counted incrementally, as workers append them.

Records are written with RunStore into several shards (as parallel executions write them); a
refresh reads only what was appended, waits for a torn line to be whole, counts an id once
whatever retries wrote it again, and reads nothing when nothing changed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.core.tally import CHECK, HEAD, Counts, Planned, StoreTally, progress_line
from bench.testing.records import candidate, judgment


def test_counts_answers_per_model_and_judgments_per_judge_across_two_writers(tmp_path):
    a, b = RunStore(tmp_path, shard="a"), RunStore(tmp_path, shard="b")
    a.append([candidate(f"s{i}", model_id="gpt-x") for i in range(3)] + [candidate("s0", model_id="llama")])
    b.append([candidate(f"s{i}", model_id="llama") for i in range(1, 4)]
             + [candidate("s3", model_id="gpt-x", error="HTTP 500")])
    a.append([judgment(c, judge_id="grader") for c in RunStore(tmp_path).read(Candidate)[:2]])
    b.append([judgment(candidate("s1", model_id="llama"), judge_id="grader", error="unparseable reply")])
    tally = StoreTally(tmp_path)
    assert tally.refresh() == sum(p.stat().st_size for p in tmp_path.glob("*.jsonl"))

    assert tally.by_model() == {"gpt-x": Counts(ok=3, failed=1), "llama": Counts(ok=4, failed=0)}
    assert tally.answers == {"gpt-x/p@v1": Counts(3, 1), "llama/p@v1": Counts(4, 0)}
    assert tally.by_judge() == {"grader": Counts(ok=2, failed=1)}
    assert tally.duplicates == 0 and tally.unreadable == 0
    # the same counts RunStore's own readers give
    latest = RunStore(tmp_path).latest(Candidate).values()
    assert sum(c.ok for c in latest) == 7 and sum(not c.ok for c in latest) == 1


def test_a_torn_line_is_counted_once_it_is_whole(tmp_path):
    store = RunStore(tmp_path, shard="w1")
    store.append([candidate("s0"), candidate("s1")])
    tally = StoreTally(tmp_path)
    tally.refresh()
    assert tally.by_model() == {"m": Counts(2, 0)}

    line = candidate("s2").model_dump_json().encode() + b"\n"
    path = store.path(Candidate)
    with open(path, "ab") as fh:  # a writer in the middle of its write
        fh.write(line[:40])
    assert tally.refresh() == CHECK + HEAD + 40  # (the bytes before the offset, the last line's start: checked)
    assert tally.by_model() == {"m": Counts(2, 0)} and tally.unreadable == 0  # not counted, not "unreadable"
    assert tally.refresh() == 0  # the half line is not read again while it does not change

    with open(path, "ab") as fh:
        fh.write(line[40:])
    assert tally.refresh() == CHECK + HEAD + len(line)  # the whole line, from its start
    assert tally.by_model() == {"m": Counts(3, 0)} and tally.unreadable == 0


def test_an_id_written_again_counts_once_and_a_success_decides(tmp_path):
    """A retried execution writes its records again; a failure retried successfully is a success, and a
    failure written after a success does not undo it (RunStore.latest's rule)."""
    first, retry = RunStore(tmp_path, shard="e1"), RunStore(tmp_path, shard="e1-retry")
    first.append([candidate("s0"), candidate("s1", error="HTTP 429"), candidate("s2")])
    tally = StoreTally(tmp_path)
    tally.refresh()
    assert tally.by_model() == {"m": Counts(ok=2, failed=1)}

    retry.append([candidate("s0"), candidate("s1"), candidate("s2", error="timeout")])
    tally.refresh()
    assert tally.by_model() == {"m": Counts(ok=3, failed=0)} and tally.duplicates == 3
    latest = RunStore(tmp_path).latest(Candidate)
    assert len(latest) == 3 and all(c.ok for c in latest.values())

    c = candidate("s0")
    first.append([judgment(c, error="bad reply"), judgment(c, error="bad reply")])
    tally.refresh()
    assert tally.by_judge() == {"j": Counts(ok=0, failed=1)}
    retry.append([judgment(c)])
    tally.refresh()
    assert tally.by_judge() == {"j": Counts(ok=1, failed=0)}


def test_a_shard_that_appears_later_is_read_and_nothing_changed_reads_nothing(tmp_path):
    RunStore(tmp_path, shard="a").append([candidate("s0")])
    tally = StoreTally(tmp_path)
    first = tally.refresh()
    assert first > 0 and tally.bytes_read == first
    assert tally.refresh() == 0 and tally.last_read == 0 and tally.bytes_read == first

    RunStore(tmp_path, shard="b").append([candidate("s1"), candidate("s1", model_id="other")])
    new = (tmp_path / "candidates.b.jsonl").stat().st_size
    assert tally.refresh() == new  # only the new shard: the old one is not read again
    assert tally.by_model() == {"m": Counts(2, 0), "other": Counts(1, 0)}
    RunStore(tmp_path, shard="a").append([candidate("s2")])
    assert tally.refresh() == CHECK + HEAD + len(candidate("s2").model_dump_json()) + 1  # only what was appended
    size = sum(p.stat().st_size for p in tmp_path.glob("*.jsonl"))
    assert tally.refresh() == 0 and tally.bytes_read == size + CHECK + HEAD


def test_a_file_cut_back_is_read_again_and_counts_each_id_once(tmp_path):
    """A failed write is undone by cutting the file back; what follows is read from the right place."""
    store = RunStore(tmp_path, shard="a")
    store.append([candidate("s0"), candidate("s1")])
    path = store.path(Candidate)
    keep = path.stat().st_size
    store.append([candidate("s2")])
    tally = StoreTally(tmp_path)
    tally.refresh()
    with open(path, "rb+") as fh:
        fh.truncate(keep)
    store.append([candidate("s3")])
    tally.refresh()
    assert tally.by_model() == {"m": Counts(4, 0)}  # m2 was counted when it was there; each id once
    assert tally.unreadable == 0 and tally.duplicates == 2  # m0 and m1, read again from the file's start
    with open(path, "rb+") as fh:  # cut back again, and grown past where the tally stopped reading
        fh.truncate(keep)
    store.append([candidate("s4", error="HTTP 500"), candidate("s5")])
    tally.refresh()
    assert tally.by_model() == {"m": Counts(5, 1)} and tally.unreadable == 0


def test_lines_that_are_not_records_are_skipped_and_counted(tmp_path):
    RunStore(tmp_path).append([candidate("s0")])
    with open(tmp_path / "candidates.jsonl", "ab") as fh:
        fh.write(b"{not json\n[1, 2]\n{\"id\": \"c1\"}\n\n")
    tally = StoreTally(tmp_path)
    tally.refresh()
    assert tally.by_model() == {"m": Counts(1, 0)} and tally.unreadable == 3


def test_cells_and_rubric_versions_outside_the_plan_do_not_count(tmp_path):
    store = RunStore(tmp_path)
    old = [candidate(f"s{i}", prompt_version="v0") for i in range(3)]
    new = [candidate(f"s{i}") for i in range(2)]
    store.append(old + new + [judgment(c, rubric_version="1") for c in old] + [judgment(new[0], rubric_version="2")])
    tally = StoreTally(tmp_path)
    tally.refresh()
    plan = Planned({"m": 4}, judgments=4, cells=frozenset({"m/p@v1"}), rubrics=frozenset({("j", "tip@2")}))
    assert progress_line(tally, plan) == "collect 2/4 (50%) · m 2/4 · judged 1/4 (25%) · failed 0"
    assert progress_line(tally, {"m": 4}, 4) == "collect 5/4 (125%) · m 5/4 · judged 4/4 (100%) · failed 0"


def test_the_progress_line_of_a_known_tally(tmp_path):
    a, b = RunStore(tmp_path, shard="a"), RunStore(tmp_path, shard="b")
    gpt = [candidate(f"s{i}", model_id="gpt-x") for i in range(170)]
    a.append(gpt)
    b.append([candidate(f"s{i}", model_id="llama", error="HTTP 500" if i >= 168 else None) for i in range(170)])
    a.append([judgment(c, judge_id="grader") for c in gpt[:150]] + [judgment(c, judge_id="second") for c in gpt[:149]])
    b.append([judgment(gpt[149], judge_id="second", error="bad reply")])
    tally = StoreTally(tmp_path)
    tally.refresh()
    assert progress_line(tally, {"gpt-x": 400, "llama": 400}, 800) == (
        "collect 340/800 (42%) · gpt-x 170/400 · llama 170/400 · judged 300/800 (38%) "
        "(grader 150, second 150) · failed 3")
    assert progress_line(tally, {"gpt-x": 400}) == (
        "collect 170/400 (42%) · gpt-x 170/400 · judged 300 (grader 150, second 150) · failed 1")
    assert progress_line(StoreTally(tmp_path / "empty"), {"m": 10}) == "collect 0/10 (0%) · m 0/10 · failed 0"


WRITER = textwrap.dedent("""
    import sys
    from bench.core.store import RunStore
    from bench.testing.records import candidate
    shard, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = RunStore(sys.argv[4], shard=shard)
    for i in range(0, n, 7):  # small chunks, as a RecordWriter flushes them
        store.append([candidate(f"s{j}", model_id=model, error="HTTP 500" if j % 10 == 3 else None)
                      for j in range(i, min(i + 7, n))])
""")


def test_two_writer_processes_counted_while_they_write(tmp_path):
    """Two processes append to their shards while the tally refreshes: the end counts equal RunStore.latest."""
    root = Path(__file__).resolve().parents[2]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, shard, model, "400", str(tmp_path)], cwd=root)
             for shard, model in (("w1", "gpt-x"), ("w2", "llama"))]
    tally = StoreTally(tmp_path)
    refreshes = 0
    try:
        while any(p.poll() is None for p in procs):
            tally.refresh()
            refreshes += 1
    finally:
        for p in procs:
            p.wait(timeout=60)
    assert [p.returncode for p in procs] == [0, 0]
    tally.refresh()
    assert tally.by_model() == {"gpt-x": Counts(ok=360, failed=40), "llama": Counts(ok=360, failed=40)}
    size = sum(p.stat().st_size for p in tmp_path.glob("*.jsonl"))
    assert size <= tally.bytes_read <= size + 2 * (CHECK + HEAD) * (refreshes + 1)  # each byte once, and the checks
    assert tally.refresh() == 0 and refreshes >= 1
