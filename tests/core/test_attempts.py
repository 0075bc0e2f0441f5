"""A failure is asked again on resume as a fresh request, never answered from the cache, within max_attempts."""

from __future__ import annotations

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge
from bench.testing.in_process import run_stages

GARBAGE = {"match": "The response to grade:", "content": "I would rather not grade this."}


def judgments(tmp_path) -> list[Judgment]:
    return RunStore(tmp_path / "runs/g").read(Judgment)


def test_an_unparseable_judge_reply_is_asked_again_on_resume(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, topics=5, judges=[judge("grader", fake.url)])
    fake.configure(replies=[GARBAGE])
    first = run_stages(tmp_path, params)
    assert first.returncode == 3, first.stdout[-2000:]
    failed = [j for j in judgments(tmp_path) if not j.ok]
    assert len(failed) == 5 and {j.error_kind for j in failed} == {"parse"} and {j.attempt for j in failed} == {1}
    assert fake.stats()["by_model"]["grader"] == 10  # each: the reply and one repair turn
    again = run_stages(tmp_path, params)  # the judge still answers garbage: asked again, afresh, and paid again
    assert again.returncode == 3
    assert fake.stats()["by_model"]["grader"] == 20
    assert sorted(j.attempt for j in judgments(tmp_path)) == [1] * 5 + [2] * 5
    fake.configure(replies=[])  # the judge recovers: the third try succeeds
    third = run_stages(tmp_path, params)
    assert third.returncode == 0, third.stdout[-2000:]
    latest = RunStore(tmp_path / "runs/g").latest(Judgment)
    assert all(j.ok and j.attempt == 3 for j in latest.values()) and len(latest) == 5
    assert fake.stats()["by_model"]["grader"] == 25


def test_items_that_reached_max_attempts_are_left_failed_and_reported(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, topics=3, judges=[judge("grader", fake.url)],
                  limits={"max_concurrency": 4, "timeout_s": 10, "retries": 0, "max_attempts": 2})
    fake.configure(replies=[GARBAGE])
    assert run_stages(tmp_path, params).returncode == 3
    assert run_stages(tmp_path, params).returncode == 3
    sent = fake.stats()["requests"]
    third = run_stages(tmp_path, params)
    assert third.returncode == 3 and fake.stats()["requests"] == sent  # bounded: not paid for a third time
    assert "3 of them were tried limits.max_attempts=2 times" in third.stdout
    assert "raise limits.max_attempts" in third.stdout


def test_a_failed_answer_is_a_fresh_request_and_counts_its_attempts(tmp_path, fake):
    params = grid(tmp_path / "g.yaml", fake.url, topics=2)
    fake.configure(replies=[{"match": "t0", "status": 500}])
    assert run_stages(tmp_path, params).returncode == 3
    fake.configure(replies=[])
    assert run_stages(tmp_path, params).returncode == 0
    by_id: dict[str, list[Candidate]] = {}
    for c in RunStore(tmp_path / "runs/g").read(Candidate):
        by_id.setdefault(c.id, []).append(c)
    tries = sorted((len(v), [c.attempt for c in v], [c.ok for c in v]) for v in by_id.values())
    assert tries == [(1, [1], [True]), (2, [1, 2], [False, True])]
