"""`solve_first` under a budget, against the fake provider: when the budget stops the grading after the judge's
own answer was paid, the item is recorded as failed with that spend (never left unrecorded), so the records say
what was billed; a resume then finds the answer in the cache, unpaid, and the two runs' records still sum to
the provider's bill."""

import asyncio

import pytest

from bench.config.entries import JudgeEntry
from bench.config.rubrics import load_rubric
from bench.core.errors import BudgetReached
from bench.core.records import Scenario
from bench.judge._prompts import SOLVE_SYSTEM
from bench.judge.grader import Item, Judge, grade_items
from bench.judge.packed import short_id
from bench.models.budget import Budget
from bench.models.client import LLM, Limits
from tests.judge.solve_first_rubrics import RUBRICS

PRICE = 1000.0  # USD per million tokens, in and out: one request's worst case (1000 tokens out) is about $1
QUESTION = "How far is the moon?"


def make_judge(tmp_path, url, kind, max_tokens=1000):
    path = tmp_path / f"s-{kind}.md"
    path.write_text(f"---\nid: s-{kind}\nversion: '1'\n{RUBRICS[kind]}solve_first: true\n---\nGrade it.\n")
    entry = JudgeEntry(id="j", model="openai/judge", api_base=url, rubric=str(path), params={"max_tokens": max_tokens},
                       price={"input_per_mtok": PRICE, "output_per_mtok": PRICE},
                       pack_size=3 if kind == "packed" else 0)
    return Judge(entry, load_rubric(str(path), tmp_path))


def make_items(kind, attempt=1):
    scenario = Scenario(fields={"q": QUESTION})
    if kind == "pairwise":
        return [Item(scenario, QUESTION, ("about 384,000 km", "far"), ("a", "b"), attempt=attempt)]
    n = 2 if kind == "packed" else 1
    return [Item(scenario, QUESTION, (f"about 384,000 km ({i})",), (f"c{i}",), attempt=attempt) for i in range(n)]


def grade(tmp_path, judge, items, budget_usd=None):
    """Return the judgments emitted and the Halted the grading raised (None when it ran to its end)."""
    llm = LLM(Limits(retries=0, timeout_s=5, max_concurrency=1), cache=str(tmp_path / "cache.sqlite"))
    if budget_usd is not None:
        llm.budget = Budget(budget_usd, tmp_path / "run")
    out, stopped = [], []

    async def go():
        try:
            await grade_items(judge, items, llm, out.append)
        except BudgetReached as stop:
            stopped.append(stop)
        finally:
            await llm.aclose()

    asyncio.run(go())
    return out, (stopped or [None])[0]


def recorded_usd(judgments):
    return sum(j.usage.cost_usd for j in judgments if j.usage is not None)


def billed_usd(fake):
    return fake.stats()["billed"]["usd"]


@pytest.mark.parametrize("kind", ["rubric", "hybrid", "packed", "checklist", "pairwise"])
def test_a_paid_solution_whose_grading_the_budget_refused_is_recorded_and_counted_once(tmp_path, fake, kind):
    fake.configure(bill_per_mtok={"input": PRICE, "output": PRICE})
    judge = make_judge(tmp_path, fake.url, kind)
    out, stop = grade(tmp_path, judge, make_items(kind), budget_usd=1.4)  # a solution fits, its grading does not
    assert stop is not None, "the budget stopped the grading"
    assert all(b["messages"][0]["content"] == SOLVE_SYSTEM for b in fake.stats()["recent"]), "only solutions sent"
    assert billed_usd(fake) > 0
    assert out and not any(j.ok for j in out), "the item whose answer was paid has a failed record"
    paid = [j for j in out if j.details.get("solution_paid")]
    assert len(paid) == 1 and paid[0].error_kind == "budget" and "own answer" in paid[0].error
    assert paid[0].details["solution"] and paid[0].prompt
    assert recorded_usd(out) == pytest.approx(billed_usd(fake)), "the records say what was billed"

    again, stop = grade(tmp_path, judge, make_items(kind, attempt=2))  # a resume: the answer is in the cache
    assert stop is None and again and all(j.ok for j in again), [j.error for j in again]
    assert not any(j.details.get("solution_paid") for j in again)
    assert recorded_usd(out + again) == pytest.approx(billed_usd(fake)), "summed over both runs: the whole bill"


@pytest.mark.parametrize("graded", [0, 1])
def test_a_packed_item_regraded_singly_after_its_paid_solution_is_recorded_when_the_budget_refuses(
        tmp_path, fake, graded):
    """The packed reply grades one item and leaves the other out; the budget refuses that one's single re-grade:
    the graded item is kept (whether it comes before or after the cut one) and the other is recorded as failed
    with its paid answer (and the packed call's share when it is the first)."""
    fake.configure(bill_per_mtok={"input": PRICE, "output": PRICE})
    judge = make_judge(tmp_path, fake.url, "packed", max_tokens=2000)
    items = [Item(Scenario(fields={"q": q}), q, ("a short answer",), (f"c-{q}",))
             for q in ("How far is the moon?", "How hot is the sun?")]
    kept = sorted(items, key=short_id)[graded]  # in the reply: a long grade of this item only, the other left out
    grade_of = '{"id": "%s", "scores": {"relevance": 4}, "rationale": "%s"}' % (short_id(kept), "fine " * 1500)
    fake.configure(replies=[{"match": "Grade each of the 2 responses", "content": '{"grades": [%s]}' % grade_of}])
    out, stop = grade(tmp_path, judge, items, budget_usd=4.0)  # the packed call fits; after its long reply, no more
    assert stop is not None
    sent = fake.stats()["recent"]
    assert len([b for b in sent if b["messages"][0]["content"] != SOLVE_SYSTEM]) == 1, "only the packed call"
    assert {j.candidate_ids[0] for j in out} == {i.ids[0] for i in items}, "both items are recorded"
    good = [j for j in out if j.ok]
    cut = [j for j in out if not j.ok]
    assert len(good) == 1 and good[0].candidate_ids == list(kept.ids)
    assert len(cut) == 1 and cut[0].error_kind == "budget" and cut[0].details.get("solution_paid")
    assert cut[0].pack_id == good[0].pack_id and cut[0].details["fallback"] == "single"
    assert recorded_usd(out) == pytest.approx(billed_usd(fake))


def test_packs_sharing_a_refused_solution_write_each_paid_answer_once(tmp_path, fake):
    """Two packs ask the same three questions' answers at once: the second pack's are the first's, shared in
    flight. The budget pays the first answer and refuses the second, one refusal shared by both packs: the item
    whose answer was paid is written once (the shared refusal carried it to both packs, which wrote it twice)."""
    fake.configure(bill_per_mtok={"input": PRICE, "output": PRICE},
                   replies=[{"match": SOLVE_SYSTEM[:40], "content": "about " * 600}])
    judge = make_judge(tmp_path, fake.url, "packed")
    questions = ("How far is the moon?", "How hot is the sun?", "How old is the earth?")
    items = [Item(Scenario(fields={"q": q}), q, (f"answer {n}",), (f"c{n}-{q}",)) for n in (1, 2) for q in questions]
    out, stop = grade(tmp_path, judge, items, budget_usd=1.4)  # one long answer fits, a second does not
    assert stop is not None
    ids = [j.id for j in out]
    assert len(ids) == len(set(ids)), f"a judgment written twice: {ids}"
    paid = [j for j in out if j.details.get("solution_paid")]
    assert len(paid) == 1 and paid[0].error_kind == "budget"
    assert recorded_usd(out) == pytest.approx(billed_usd(fake)), "the records say what was billed"
