"""A ``per_turn: true`` judge: one judgment per assistant turn, each shown the conversation up to that turn; refused
where it has no meaning; the analysis counts one score per conversation, the mean over its turns."""

from __future__ import annotations

import asyncio
import collections
import json
import re

import pytest

from bench.analysis import leaderboard, load_run, with_reviews
from bench.analysis.conversation_scores import per_conversation
from bench.analysis.tables import COMPOSITE
from bench.config.rubrics import load_rubric
from bench.core.errors import ParamsError
from bench.core.records import Judgment, Review
from bench.core.store import RunStore
from bench.judge import judgment_counts, load_judges
from bench.run import open_run
from bench.stage_runs import run_judge
from bench.testing.grids import grid, judge, model
from bench.testing.records import judgment
from tests.judge.conversation_runs import chat, collected, rewrite, rubric_file

CRIT = ("criteria:\n  - {id: helpful, description: helps, scale: [1, 5], anchors: {1: none, 2: barely, 3: partly, "
        "4: mostly, 5: fully}}\n")
GRADE = {1: 1, 2: 3, 3: 5}  # the fake judge's grade of each turn: the conversation's mean is 3


def grade(turn: int) -> dict:
    return {"match": f"Grade only its turn {turn},", "content": json.dumps({"scores": {"helpful": GRADE[turn]},
                                                                            "rationale": f"turn {turn}"})}


@pytest.mark.parametrize("mode", ["pairwise", "automated"])
def test_per_turn_is_refused_where_it_has_no_meaning_naming_the_rubric_file(tmp_path, mode):
    extra = "checks:\n  - {id: short, kind: length, max_chars: 50}\n" if mode == "automated" else ""
    path = rubric_file(tmp_path, "pt", f"mode: {mode}\nper_turn: true\n{extra}")
    with pytest.raises(ParamsError) as err:
        load_rubric(path, tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'pt.md'}: per_turn: grading turn by turn has no meaning in mode "
                                     f"'{mode}'")
    assert "use mode rubric, checklist or hybrid" in str(err.value)


def test_a_judge_entry_whose_mode_cannot_grade_turns_is_refused_before_any_call(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    path = rubric_file(tmp_path, "pt", "mode: rubric\nper_turn: true\n" + CRIT)
    params = grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url)],
                  judges=[judge("arena", fake.url, rubric=path, mode="pairwise", baseline="m1/p@v1")])
    with pytest.raises(ParamsError) as err:
        load_judges(open_run(params))
    assert f"judge 'arena' (mode: pairwise), rubric {tmp_path / 'pt.md'} (per_turn: true)" in str(err.value)
    assert fake.stats()["requests"] == 0


def test_a_per_turn_judge_grades_each_turn_in_its_context_and_the_analysis_takes_the_mean(tmp_path, fake,
                                                                                          monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    turns = rubric_file(tmp_path, "turns", "mode: rubric\nper_turn: true\n" + CRIT)
    whole = rubric_file(tmp_path, "whole", "mode: rubric\n" + CRIT)
    run = collected(tmp_path, fake.url, [("turns", turns, {}), ("whole", whole, {})])
    answers = lambda c: [f"ANSWER-{n} for {c.scenario_id}" for n in (1, 2, 3)]  # noqa: E731
    convs = rewrite(run, lambda c: chat(c, answers(c)))
    fake.reset()
    fake.configure(replies=[grade(1), grade(2), grade(3)])
    assert judgment_counts(run) == (0, 2 * 3 + 2)  # per_turn: a judgment per turn of each collected answer
    asyncio.run(run_judge(run, progress="none"))
    js = list(RunStore(run.dir).latest(Judgment).values())
    per_turn = [j for j in js if j.judge_id == "turns"]
    assert all(j.ok for j in js) and len({j.id for j in per_turn}) == 6
    assert collections.Counter((j.candidate_ids[0], j.turn) for j in per_turn) == {
        (c.id, n): 1 for c in convs for n in (1, 2, 3)}
    assert all(j.score == GRADE[j.turn] for j in per_turn)
    assert {j.turn for j in js if j.judge_id == "whole"} == {None}
    for body in fake.stats()["recent"]:
        user = body["messages"][-1]["content"]
        shown = re.findall(r"ANSWER-(\d)", user)
        if "Grade only its turn" in user:
            k = int(re.search(r"Grade only its turn (\d),", user).group(1))
            assert shown == [str(n) for n in range(1, k + 1)], user  # the turns up to k, never a later one
            assert f"User turn {k} about" in user.split("</prompt-")[0]  # the question: what turn k answers
        else:
            assert shown == ["1", "2", "3"]
    assert judgment_counts(run) == (8, 8)
    requests = fake.stats()["requests"]
    asyncio.run(run_judge(run, progress="none"))
    assert fake.stats()["requests"] == requests  # every turn's judgment is done: nothing is asked again

    scores = load_run(run.dir).scores.filter(judge="turns", criterion=COMPOSITE)
    assert scores.height == 2 and scores["value"].to_list() == [3.0, 3.0] and scores["turns"].to_list() == [3, 3]
    board = leaderboard(scores, resamples=20).row(0, named=True)
    assert (board["mean"], board["n"], board["items"]) == (3.0, 2, 2)  # one item per conversation, not per turn
    assert load_run(run.dir).scores.filter(judge="whole")["turns"].null_count() == 4
    second = next(j for j in per_turn if j.candidate_ids[0] == convs[0].id and j.turn == 2)  # a review on any turn
    RunStore(run.dir).append([Review(judgment_id=second.id, candidate_ids=[convs[0].id], reviewer="ann",
                                     rubric_id="turns", rubric_version="1", scores={"helpful": 2.0}, score=2.0,
                                     blind=True)])
    reviewed = with_reviews(load_run(run.dir)).scores.filter(judge="turns", criterion=COMPOSITE)
    assert sorted(reviewed["value"].to_list()) == [2.0, 3.0]  # replaces its conversation's mean, adds no row


def test_a_packed_per_turn_judge_keeps_the_turns_of_one_conversation_apart(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    turns = rubric_file(tmp_path, "turns", "mode: rubric\nper_turn: true\n" + CRIT)
    run = collected(tmp_path, fake.url, [("turns", turns, {"pack_size": 3})], scenarios=1)
    rewrite(run, lambda c: chat(c, ["ANSWER-1", "ANSWER-2", "ANSWER-3"]))
    fake.reset()
    asyncio.run(run_judge(run, progress="none"))
    js = list(RunStore(run.dir).latest(Judgment).values())
    assert sorted(j.turn for j in js) == [1, 2, 3] and all(j.ok and j.mode == "packed" for j in js)
    assert len({j.pack_id for j in js}) == 1 and "fallback" not in json.dumps([j.details for j in js])
    assert fake.stats()["requests"] == 1  # three turns, three short ids, one packed call


def test_one_conversations_grade_is_the_mean_over_its_graded_turns():
    rubric = {"rubric_id": "r", "rubric_version": "1", "rubric_hash": "h"}
    t1 = judgment(score=2.0, scores={"a": 2.0}, turn=1, **rubric)
    t2 = judgment(error="HTTP 500", turn=2, **rubric)
    t3 = judgment(score=4.0, scores={"a": 4.0}, turn=3, **rubric)
    whole = judgment(judge_id="w", score=5.0, **rubric)
    out = per_conversation([t2, whole, t3, t1])
    assert [(j.id, n) for j, n in out] == [(t1.id, 2), (whole.id, None)]  # the first turn's record stands for all
    merged = out[0][0]
    assert merged.ok and merged.score == 3.0 and merged.scores == {"a": 3.0}  # the failed turn is left out
    failed = per_conversation([judgment(error="x", turn=1, **rubric)])
    assert failed[0][1] == 0 and not failed[0][0].ok


@pytest.mark.parametrize("mode, rubric, lacks", [
    ("packed", "tip-checklist", "criteria"), ("rubric", "arena-pairwise", "criteria"),
    ("checklist", "tip-v1", "requirements"), ("automated", "tip-v1", "checks"), ("hybrid", "tip-v1", "checks")])
def test_a_judge_entrys_mode_its_rubric_cannot_grade_in_is_refused_naming_what_it_lacks(tmp_path, fake, monkeypatch,
                                                                                       mode, rubric, lacks):
    """A judge's own ``mode:`` over a rubric written for another: refused at load, before any call, naming the judge,
    the rubric and the part it lacks (it failed at run time: a bare ValueError, or an IndexError)."""
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    params = grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url)],
                  judges=[judge("j", fake.url, rubric=rubric, mode=mode)])
    with pytest.raises(ParamsError) as err:
        load_judges(open_run(params))
    said = str(err.value)
    assert said.startswith(f"{tmp_path / 'g.yaml'}: judge 'j' (mode: {mode}), rubric ") and f"{rubric}.md" in said
    assert f"has no {lacks}: mode '{mode}' needs at least 1 " in said and "drop the judge's mode:" in said
    assert fake.stats()["requests"] == 0
