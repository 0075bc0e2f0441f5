"""A packed judge puts the same answers in the same call on every run, whatever order they were answered in:
packs are cut in the grid's order (cells, scenarios, samples), pipelined with collect or not, so the same grid
run again, or judged later as its own stage, is answered from the response cache."""

from __future__ import annotations

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge, model
from bench.models.eventloop import run as run_loop
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing import in_process
from bench.testing.in_process import run_stages
from tests.staged import run_planned

K, TOPICS = 3, 7  # two cells of 7 answers: packs of 3 that cross from one cell to the next, and a last one of 2


PROMPTS = [{"id": "p", "version": "v1", "user": "One tip about {topic}."},
           {"id": "q", "version": "v1", "user": "Give one tip about {topic}."}]


def params(tmp_path, url, name):
    return grid(tmp_path / f"{name}.yaml", url, name=name, topics=TOPICS, models=[model("m1", url)], prompts=PROMPTS,
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
    first = run_stages(tmp_path, params(tmp_path, fake.url, "a"))
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    sent = fake.stats()["requests"]
    assert sent == 2 * TOPICS + -(-2 * TOPICS // K)  # the answers, then ceil(14 / 3) packed calls

    fake.configure(latency_jitter_ms=400, seed=2)  # another order
    again = run_stages(tmp_path, params(tmp_path, fake.url, "b"))
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    runs = tmp_path / "runs"
    assert answered_order(runs / "a") != answered_order(runs / "b")  # else this test proves nothing
    assert fake.stats()["requests"] == sent  # every packed call answered from the cache
    assert packs(runs / "a") == packs(runs / "b") and len(packs(runs / "a")) == -(-2 * TOPICS // K)

    fake.configure(latency_jitter_ms=0)  # collect, then judge as a stage of its own (not pipelined)
    alone = params(tmp_path, fake.url, "c")
    with in_process.environment(tmp_path):  # run_collect without judge=True: nothing graded yet
        run_loop(run_collect(open_run(str(alone)), progress="none"))
    assert not RunStore(runs / "c").read(Judgment)
    assert run_stages(tmp_path, alone, stages=("judge",)).returncode == 0
    assert fake.stats()["requests"] == sent and packs(runs / "c") == packs(runs / "a")


def test_executions_pack_in_the_grids_order_and_the_estimate_predicts_their_packs(tmp_path, fake):
    """Under --jobs an execution's cells come model by model, the capped model first: its packs still follow the
    params file's order, the one the estimate predicts, so a re-run is estimated (and answered) as all cached. The
    two executions --jobs 2 plans run in this process (``run_planned``)."""
    models = [model("m1", fake.url), model("m2", fake.url, max_concurrency=4)]

    def two_models(name):  # 2 models x 2 prompts: each of the two executions has a cell of each model
        return grid(tmp_path / f"{name}.yaml", fake.url, name=name, topics=TOPICS, models=models, prompts=PROMPTS,
                    judges=[judge("packed", fake.url, pack_size=K)], limits={"max_concurrency": 14, "retries": 0})

    first = run_planned(tmp_path, two_models("j1"), jobs=2)
    assert first.returncode == 0, first.log
    cut = packs(tmp_path / "runs" / "j1")  # each execution packs its own 14 answers: 4 packs of 3 and one of 2
    assert len(cut) == 2 * -(-2 * TOPICS // K) and {len(p) for p in cut} == {2, 3}, sorted(map(len, cut))
    sent = fake.stats()["requests"]
    again = run_planned(tmp_path, two_models("j2"), jobs=2)
    assert again.returncode == 0, again.log
    total = next(ln.split() for ln in again.stdout.splitlines() if ln.startswith("total "))
    assert total[3] == "0" and total[1] == total[2], again.stdout[-3000:]  # requests, cached, to send
    assert fake.stats()["requests"] == sent
    assert packs(tmp_path / "runs" / "j2") == packs(tmp_path / "runs" / "j1")
