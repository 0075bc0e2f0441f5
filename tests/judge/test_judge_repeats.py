"""`repeats: k` on a judge, end to end against the fake provider: k judgments per item with distinct ids and
requests, counted by `bench estimate` before the sweep, never two repeats in one packed call, a re-run sending
nothing, and the stability section of the analysis fed by them."""

from __future__ import annotations

import collections
import json

from bench.analysis import judge_stability, load_run, stability_leaderboard
from bench.core.records import Judgment
from bench.core.store import RunStore
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import command, run_stages


def _params(tmp_path, url):
    return grid(tmp_path / "rep.yaml", url, name="rep", topics=4, models=[model("m1", url)],
                judges=[judge("steady", url, repeats=3), judge("packed", url, name="packer", pack_size=2, repeats=2),
                        judge("once", url, name="single")])


def test_a_judge_with_repeats_grades_every_item_k_times_as_distinct_requests(tmp_path, fake):
    params = _params(tmp_path, fake.url)
    est = json.loads(command(tmp_path, "estimate", str(params), "--json").stdout)
    planned = {s["id"]: s["requests"] for s in est["stages"]}
    assert planned == {"m1": 4, "steady": 12, "packed": 4, "once": 4}, "the estimate counts k× the requests"

    out = run_stages(tmp_path, params)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    sent = fake.stats()["requests"]
    assert sent == sum(planned.values()), "one request per planned grading: the repeats are not answered from cache"
    js = list(RunStore(tmp_path / "runs" / "rep").latest(Judgment).values())
    assert all(j.ok for j in js), [j.error for j in js if not j.ok][:3]
    by_judge = collections.Counter(j.judge_id for j in js)
    assert by_judge == {"steady": 12, "packed": 8, "once": 4}
    steady = [j for j in js if j.judge_id == "steady"]
    per_item = collections.defaultdict(set)
    for j in steady:
        per_item[j.candidate_ids[0]].add(j.repeat)
    assert all(reps == {0, 1, 2} for reps in per_item.values()) and len(per_item) == 4
    assert len({j.id for j in steady}) == 12
    first = next(j for j in steady if j.repeat == 0)
    assert "repeat" not in Judgment.identity(first.model_dump()), "the first grading keeps its id from before repeats"
    packed_calls = collections.defaultdict(set)
    for j in js:
        if j.judge_id == "packed":
            packed_calls[j.pack_id].add(j.repeat)
    assert len(packed_calls) == 4 and all(len(reps) == 1 for reps in packed_calls.values()), \
        "a packed call never grades two repeats"

    again = run_stages(tmp_path, params)
    assert again.returncode == 0 and fake.stats()["requests"] == sent, "a re-run sends nothing"

    t = load_run(tmp_path / "runs" / "rep")
    stability = {r["judge"]: r for r in judge_stability(t.scores, criteria=["composite"]).iter_rows(named=True)}
    assert stability["once"]["verdict"] == "not enough repeats"
    assert stability["steady"]["items"] == 4 and stability["steady"]["repeats"] == 3
    board = stability_leaderboard(t.scores.filter(t.scores["judge"] == "steady"), resamples=50)
    assert board.height == 1 and board["scenarios"][0] == 4
