"""A packed judge puts the same answers in the same call on every run, whatever order they were answered in:
packs are cut in the grid's order (cells, scenarios, samples), pipelined with collect or not, so the same grid
run again, or judged later as its own stage, is answered from the response cache."""

from __future__ import annotations

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge, model, sweep

K, TOPICS = 3, 7  # two cells of 7 answers: packs of 3 that cross from one cell to the next, and a last one of 2


def params(tmp_path, url, name):
    prompts = [{"id": "p", "version": "v1", "user": "One tip about {topic}."},
               {"id": "q", "version": "v1", "user": "Give one tip about {topic}."}]
    return grid(tmp_path / f"{name}.yaml", url, name=name, topics=TOPICS, models=[model("m1", url)], prompts=prompts,
                judges=[judge("packed", url, pack_size=K)], limits={"max_concurrency": 14, "retries": 0})


def packs(run_dir) -> set[frozenset[str]]:
    """Which answers (cell, scenario) shared a call."""
    store = RunStore(run_dir)
    where = {c.id: (c.cell, c.scenario_id) for c in store.read(Candidate)}
    calls: dict[str, set] = {}
    for j in store.read(Judgment):
        calls.setdefault(j.pack_id, set()).add(where[j.candidate_ids[0]])
    return {frozenset(members) for members in calls.values()}


def answered_order(run_dir) -> list[tuple[str, str]]:
    return [(c.cell, c.scenario_id) for c in RunStore(run_dir).read(Candidate)]


def test_the_same_answers_share_the_same_calls_whatever_order_they_came_in(tmp_path, fake):
    fake.configure(latency_jitter_ms=400, seed=1)  # answers come back in a shuffled order
    first = sweep(tmp_path, params(tmp_path, fake.url, "a"))
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    sent = fake.stats()["requests"]
    assert sent == 2 * TOPICS + -(-2 * TOPICS // K)  # the answers, then ceil(14 / 3) packed calls

    fake.configure(latency_jitter_ms=400, seed=2)  # another order
    again = sweep(tmp_path, params(tmp_path, fake.url, "b"))
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    runs = tmp_path / "runs"
    assert answered_order(runs / "a") != answered_order(runs / "b")  # else this test proves nothing
    assert fake.stats()["requests"] == sent  # every packed call answered from the cache
    assert packs(runs / "a") == packs(runs / "b") and len(packs(runs / "a")) == -(-2 * TOPICS // K)

    fake.configure(latency_jitter_ms=0)  # collect, then judge as a stage of its own (not pipelined)
    alone = params(tmp_path, fake.url, "c")
    assert sweep(tmp_path, alone, "--only-stage", "collect").returncode == 0
    assert sweep(tmp_path, alone, "--only-stage", "judge").returncode == 0
    assert fake.stats()["requests"] == sent and packs(runs / "c") == packs(runs / "a")
