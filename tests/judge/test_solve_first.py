"""`solve_first: true` against the fake provider, mode by mode: the judge answers each question itself in one
request of its own (per judge × question × repeat, never per candidate), before any grading that shows it;
every candidate of that question is graded against the same answer, which each judgment keeps in
``details["solution"]``, and its cost is counted once, on the judgment that paid it."""

import asyncio
import collections

import pytest

from bench.config.entries import JudgeEntry
from bench.config.rubrics import load_rubric
from bench.core.records import Scenario
from bench.judge._prompts import SOLVE_SYSTEM
from bench.judge.grader import Item, Judge, grade_items
from bench.models.client import LLM, Limits
from tests.judge.solve_first_rubrics import RUBRICS

QUESTIONS = ["How far is the moon?", "How hot is the sun?"]


def make_judge(tmp_path, url, kind, repeats=1):
    path = tmp_path / f"s-{kind}.md"
    path.write_text(f"---\nid: s-{kind}\nversion: '1'\n{RUBRICS[kind]}solve_first: true\n---\nGrade it.\n")
    entry = JudgeEntry(id="j", model="openai/judge", api_base=url, rubric=str(path), repeats=repeats,
                       pack_size=3 if kind == "packed" else 0)
    return Judge(entry, load_rubric(str(path), tmp_path))


def make_items(kind, per_question=3, repeats=1):
    out = []
    for q in QUESTIONS:
        scenario = Scenario(fields={"q": q})
        if kind == "pairwise":
            out += [Item(scenario, q, (f"{q} answer A{n}", f"{q} answer B"), (f"{q}A{n}", f"{q}B"))
                    for n in range(per_question - 1)]
        else:
            out += [Item(scenario, q, (f"{q} answer {n}",), (f"{q}{n}",)) for n in range(per_question)]
    return [Item(i.scenario, i.question, i.texts, i.ids, repeat=r) for r in range(repeats) for i in out]


def grade(tmp_path, judge, items):
    llm = LLM(Limits(retries=0, timeout_s=5, max_concurrency=4), cache=str(tmp_path / "cache.sqlite"))
    out = []

    async def go():
        await grade_items(judge, items, llm, out.append)
        await llm.aclose()

    asyncio.run(go())
    return out


def bodies(fake):
    recent = fake.stats()["recent"]
    solving = [b for b in recent if b["messages"][0]["content"] == SOLVE_SYSTEM]
    return solving, [b for b in recent if b["messages"][0]["content"] != SOLVE_SYSTEM]


@pytest.mark.parametrize("kind,grades", [("rubric", 6), ("packed", 2), ("hybrid", 6), ("checklist", 12),
                                         ("pairwise", 8)])
def test_one_solution_per_question_is_asked_first_and_shown_to_every_grading(tmp_path, fake, kind, grades):
    judge = make_judge(tmp_path, fake.url, kind)
    out = grade(tmp_path, judge, make_items(kind))
    assert out and all(j.ok for j in out), [j.error for j in out]
    solving, grading = bodies(fake)
    assert len(solving) == len(QUESTIONS), "one solution request per question, not per candidate"
    assert len(grading) == grades and fake.stats()["requests"] == len(QUESTIONS) + grades
    assert sorted(b["messages"][1]["content"] for b in solving) == sorted(QUESTIONS)
    assert all("response_format" not in b for b in solving), "the judge answers in free text"
    answers = collections.defaultdict(set)
    for j in out:
        answers[j.scenario_id].add(j.details["solution"])
    assert len(answers) == len(QUESTIONS) and all(len(a) == 1 for a in answers.values()), \
        "every candidate of a question is graded against the same answer"
    assert len({a for s in answers.values() for a in s}) == len(QUESTIONS)
    for body in grading:  # every grading shows the judge its own answer, in its own tagged block
        user = body["messages"][-1]["content"]
        shown = [j.details["solution"] for j in out if f"\n{j.details['solution']}\n</own-answer-" in user]
        assert shown and "Your own answer to this question" in user
    assert sum(bool(j.details.get("solution_paid")) for j in out) == len(QUESTIONS), \
        "each solution is counted on the one judgment that paid for it"
    assert sum(j.usage.calls for j in out) == fake.stats()["requests"], "summed over the records: every call once"


def test_repeats_get_a_solution_each(tmp_path, fake):
    judge = make_judge(tmp_path, fake.url, "rubric", repeats=2)
    out = grade(tmp_path, judge, make_items("rubric", per_question=2, repeats=2))
    assert len(out) == 8 and all(j.ok for j in out)
    solving, grading = bodies(fake)
    assert len(solving) == 4 and len(grading) == 8, "one solution per question and repeat"
    by_repeat = collections.defaultdict(set)
    for j in out:
        by_repeat[(j.scenario_id, j.repeat)].add(j.details["solution"])
    assert all(len(s) == 1 for s in by_repeat.values()) and len(by_repeat) == 4


def test_a_solution_is_served_from_the_cache_the_next_time(tmp_path, fake):
    judge = make_judge(tmp_path, fake.url, "rubric")
    first = grade(tmp_path, judge, make_items("rubric", per_question=1))
    sent = fake.stats()["requests"]
    assert sent == 4
    more = [Item(Scenario(fields={"q": q}), q, (f"{q} a new answer",), (f"{q}new",)) for q in QUESTIONS]
    again = grade(tmp_path, judge, more)
    solving, grading = bodies(fake)
    assert len(solving) == 2 and fake.stats()["requests"] == sent + 2, "only the new gradings are sent"
    assert {j.details["solution"] for j in again} == {j.details["solution"] for j in first}
    assert not any(j.details.get("solution_paid") for j in again)


@pytest.mark.parametrize("kind", ["rubric", "packed", "checklist", "pairwise"])
def test_a_failed_solution_fails_the_grading_with_its_prompt_and_is_asked_again_next_time(tmp_path, fake, kind):
    judge = make_judge(tmp_path, fake.url, kind)
    fake.configure(replies=[{"match": QUESTIONS[0], "status": 400}])
    its = [i for i in make_items(kind, per_question=2) if i.question == QUESTIONS[0]]
    out = grade(tmp_path, judge, its)
    assert out and not any(j.ok for j in out)
    assert all(j.prompt and j.prompt[0]["content"] == SOLVE_SYSTEM for j in out), "the failed request is kept"
    solving, grading = bodies(fake)
    assert solving and not grading, "no grading is sent without the judge's own answer"
    fake.configure(replies=[])
    again = grade(tmp_path, judge, its)
    assert again and all(j.ok for j in again), "a failed solution is not cached: the next time asks again"
