"""A reference-guided, `solve_first` judge in a whole sweep against the fake provider: `bench estimate`
counts the solution requests (one per question) before anything is sent, the sweep sends exactly that,
each judgment keeps the solution, and neither a re-run nor a resume after failed gradings pays for a
solution twice."""

from __future__ import annotations

import json

import pytest

from bench.core.records import Judgment
from bench.core.store import RunStore
from bench.judge._prompts import SOLVE_SYSTEM
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import command, run_stages

MARKER = "MARKER-REFERENCE-RUBRIC"
SCENARIOS = [{"fields": {"topic": f"t{n}"}, "reference": {"answer": f"tip {n}", "extra": n}} for n in range(3)]


CRITERIA = ("mode: rubric\ncriteria:\n  - {id: quality, description: how good, scale: [1, 5], "
            "anchors: {1: bad, 2: weak, 3: fair, 4: good, 5: great}}\n")
KINDS = {  # judge kind -> (rubric front matter, judge entry keys, grading requests of 2 models x 3 scenarios)
    "rubric": (CRITERIA, {}, 6),
    "packed": (CRITERIA, {"pack_size": 2}, 3),
    "checklist": ("mode: checklist\nrequirements:\n  - {id: tip, text: gives a tip}\n  - {id: short, text: is short}\n",
                  {}, 12),
    "pairwise": ("mode: pairwise\n", {"baseline": "m2/p@v1"}, 6),
}


def _params(tmp_path, url, name="ref", kind="rubric"):
    front, extra, _grades = KINDS[kind]
    rubric = tmp_path / "ref-guided.md"
    rubric.write_text(f"---\nid: ref-guided\nversion: '1'\n{front}reference: [answer]\nsolve_first: true\n---\n"
                      f"{MARKER}: grade the answer.\n")
    return grid(tmp_path / f"{name}.yaml", url, name=name, models=[model("m1", url), model("m2", url)],
                scenarios={"inline": SCENARIOS}, judges=[judge("ref", url, rubric=str(rubric), **extra)])


def _estimate(tmp_path, params):
    out = command(tmp_path, "estimate", str(params), "--json")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {s["id"]: s for s in json.loads(out.stdout)["stages"]}


def _sent(fake):
    """Return (solution requests, grading requests) the fake provider received (the judge's only)."""
    judged = [b for b in fake.stats()["recent"] if b["model"] == "ref"]
    return ([b for b in judged if b["messages"][0]["content"] == SOLVE_SYSTEM],
            [b for b in judged if b["messages"][0]["content"] != SOLVE_SYSTEM])


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_estimate_counts_one_solution_per_question_and_the_sweep_sends_that(tmp_path, fake, kind):
    grades = KINDS[kind][2]
    params = _params(tmp_path, fake.url, kind=kind)
    before = _estimate(tmp_path, params)
    assert before["ref"]["requests"] == 3 + grades and before["ref"]["to_send"] == 3 + grades, before["ref"]
    assert before["ref"]["unknown"] == grades, "the gradings of answers not collected yet cannot be looked up"
    out = run_stages(tmp_path, params)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    solving, grading = _sent(fake)
    assert len(solving) == 3 and len(grading) == grades and fake.stats()["requests"] == 6 + 3 + grades
    assert all("<reference-" in b["messages"][-1]["content"] and "<own-answer-" in b["messages"][-1]["content"]
               for b in grading)
    shown = sorted(r.split("\n")[0] for b in grading for r in b["messages"][-1]["content"].split("answer: ")[1:])
    assert set(shown) == {"tip 0", "tip 1", "tip 2"}, "each item's own scenario reference"
    js = list(RunStore(tmp_path / "runs" / "ref").latest(Judgment).values())
    assert js and all(j.ok and j.details["solution"].startswith("fake answer") for j in js)
    assert sum(bool(j.details.get("solution_paid")) for j in js) == 3
    assert sum(j.usage.calls for j in js) == 3 + grades, "the records count each solution once"
    after = _estimate(tmp_path, params)
    assert after["ref"]["requests"] == 3 + grades and after["ref"]["held"] == 3 + grades, after["ref"]
    assert after["ref"]["to_send"] == 0
    again = run_stages(tmp_path, params)
    assert again.returncode == 0 and fake.stats()["requests"] == 6 + 3 + grades, "a re-run sends nothing"


def test_a_resume_after_failed_gradings_does_not_pay_for_the_solutions_again(tmp_path, fake):
    params = _params(tmp_path, fake.url, name="resume")
    fake.configure(replies=[{"match": MARKER, "content": "no grade here"}])  # every grading unusable, twice
    first = run_stages(tmp_path, params)
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-2000:]
    solving, grading = _sent(fake)
    assert len(solving) == 3 and len(grading) == 12, "3 solutions; 6 gradings and their repair turns"
    failed = list(RunStore(tmp_path / "runs" / "resume").latest(Judgment).values())
    assert len(failed) == 6 and not any(j.ok for j in failed)
    est = _estimate(tmp_path, params)["ref"]
    assert est["to_send"] == 6 and est["unknown"] == 0, "the solutions are cached: the gradings can be looked up"
    fake.configure(replies=[])
    second = run_stages(tmp_path, params)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
    solving, grading = _sent(fake)
    assert len(solving) == 3 and len(grading) == 18, "the resume sends the 6 gradings, no solution"
    js = list(RunStore(tmp_path / "runs" / "resume").latest(Judgment).values())
    assert all(j.ok and j.attempt == 2 for j in js) and not any(j.details.get("solution_paid") for j in js)
