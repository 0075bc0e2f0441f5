"""Checks against a dataset's reference answer, through a real run on the fake provider: every kind scores
crafted answers as worked out by hand, the scores reach the leaderboard with intervals, an LLM judge's accuracy
against the checks and against the dataset's labels is what the records say, the report shows it, and a check
naming a reference key the dataset lacks stops `bench validate` and `bench sweep` before any request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest

from bench.analysis import judge_accuracy, label_agreement, load_run, summarize
from bench.core.errors import ParamsError
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.report import render_report
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import grid, judge, model, prompt, rubric
from bench.testing.in_process import command, run_stages

CHECKS = """---
id: ref
version: "1"
mode: automated
checks:
  - {id: exact, kind: exact_match, reference: answer, extract: "FINAL: ([^~]*)"}
  - {id: num, kind: numeric, reference: number, tolerance: 0.01, rel_tolerance: 0.0001}
  - {id: letter, kind: choice, reference: letter}
  - {id: f1, kind: token_f1, reference: answer, extract: "FINAL: ([^~]*)"}
  - {id: re, kind: regex, reference: pattern}
---
"""
# question marker → (reference columns, the model's reply, the expected score of each check, worked out by hand)
ROWS = {
    "QID-1": ({"answer": "Paris", "number": "10", "letter": "C", "pattern": r"(?i)\bparis\b", "category": "geo",
               "label": "pass"},
              "I pick (C) and 10.004 km. FINAL: The Paris ~zqone~",
              {"exact": 1, "num": 1, "letter": 1, "f1": 1, "re": 1}),
    "QID-2": ({"answer": "Berlin", "number": "3/4", "letter": "B", "pattern": "^yes", "category": "geo",
               "label": "fail"},
              "no. The answer is A. Value 0.7 FINAL: Berlin Germany ~zqtwo~",  # F1: P 1/2, R 1 -> 2/3
              {"exact": 0, "num": 0, "letter": 0, "f1": 2 / 3, "re": 0}),
    "QID-3": ({"answer": "42", "number": "1,000", "letter": "D", "pattern": "forty", "category": "math",
               "label": "pass"},
              "Final answer: **D**\nTotal: $1,000\nFINAL: 42. ~zqthree~",  # the last number is 42, not 1000
              {"exact": 1, "num": 0, "letter": 1, "f1": 1, "re": 0}),
    "QID-4": ({"answer": "blue whale", "number": "-5", "letter": "A", "pattern": "whale", "category": "math",
               "label": "fail"},
              "temperature -5.0 degrees\nA\nFINAL: a whale ~zqfour~",  # F1: P 1, R 1/2 -> 2/3
              {"exact": 0, "num": 1, "letter": 1, "f1": 2 / 3, "re": 1}),
    "QID-5": ({"answer": "x", "number": "7", "letter": "B", "pattern": "xyz", "category": "misc", "label": "fail"},
              "nothing useful ~zqfive~",
              {"exact": 0, "num": 0, "letter": 0, "f1": 0, "re": 0}),
    "QID-6": ({"answer": "Rome", "number": "2.5e3", "letter": "(b)", "pattern": "R.me", "category": "misc",
               "label": "pass"},
              "B) it is. 2,499.9 FINAL: rome ~zqsix~",  # 0.1 off 2500: within rel_tolerance (0.25)
              {"exact": 1, "num": 1, "letter": 1, "f1": 1, "re": 0}),
}
HYBRID = """---
id: mix
version: "1"
mode: hybrid
criteria:
  - {id: quality, description: how good it is, scale: [1, 5], anchors: {1: bad, 2: weak, 3: fair, 4: good, 5: great}}
checks:
  - {id: f1, kind: token_f1, reference: answer, extract: "FINAL: ([^~]*)"}
---
MARKER-MIX-RUBRIC: grade the answer.
"""
LLM_GRADE = {"~zqone~": 5, "~zqtwo~": 4, "~zqthree~": 2, "~zqfour~": 2, "~zqfive~": 1}  # ~zqsix~: HTTP 500
COMPOSITE = {q: sum(e.values()) / 5 for q, (_, _, e) in ROWS.items()}


def write_grid(tmp: Path, url: str, checks: str = CHECKS, name: str = "qa") -> Path:
    """Write the dataset, the checks rubric, an LLM rubric and the params file; return the params file."""
    columns = ("answer", "number", "letter", "pattern", "category", "label")
    with open(tmp / "qa.jsonl", "w") as fh:
        for q, (ref, _, _) in ROWS.items():
            fh.write(json.dumps({"question": f"{q}: what is it?", **ref}) + "\n")
    (tmp / "ref.md").write_text(checks)
    (tmp / "mix.md").write_text(HYBRID)
    llm = rubric(tmp / "llm.md", marker="MARKER-LLM-RUBRIC")
    llm.write_text(llm.read_text().replace("mode: rubric", "mode: rubric\naccuracy: true"))  # it grades correctness
    return grid(tmp / f"{name}.yaml", url, name=name, models=[model("m1", url)],
                prompts=[prompt("ask", "Question {question}")],
                scenarios={"dataset": {"path": "qa.jsonl", "fields": {"question": "question"},
                                       "reference": {c: c for c in columns}}},
                judges=[judge("ref", url, rubric=str(tmp / "ref.md")), judge("llm", url, rubric=str(tmp / "llm.md")),
                        judge("mix", url, rubric=str(tmp / "mix.md"))],
                limits={"max_concurrency": 4, "timeout_s": 10, "retries": 0})


def replies() -> list[dict]:
    """The judge's grades first (its prompt holds the question too), then each question's answer."""
    grades = [{"match": m, "content": json.dumps({"scores": {"quality": g}, "rationale": "ok"})}
              for m, g in LLM_GRADE.items()]
    return [*grades, {"match": "~zqsix~", "status": 500},
            *({"match": q, "content": reply} for q, (_, reply, _) in ROWS.items())]


@pytest.fixture(scope="module")
def qa_run(tmp_path_factory, fake_server):
    """Collect and judge the grid once (in process); return the run folder."""
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("qa")
    fake_server.configure(replies=replies())
    run = open_run(write_grid(tmp, fake_server.url), run_dir=tmp / "runs" / "qa")
    asyncio.run(run_collect(run, progress="none", judge=True))
    return run.dir


def by_question(run_dir: Path, judge_id: str) -> dict[str, Judgment]:
    store = RunStore(run_dir)
    question = {c.id: next(q for q in ROWS if q in c.messages[-1]["content"]) for c in store.latest(Candidate).values()}
    return {question[j.candidate_ids[0]]: j for j in store.latest(Judgment).values() if j.judge_id == judge_id}


def test_each_check_kind_scores_the_crafted_answers(qa_run):
    graded = by_question(qa_run, "ref")
    assert set(graded) == set(ROWS)
    for q, (_, _, expected) in ROWS.items():
        j = graded[q]
        assert j.ok and j.mode == "automated"
        assert j.scores == pytest.approx({k: float(v) for k, v in expected.items()}), q
        assert j.score == pytest.approx(COMPOSITE[q]), q
    details = {c["id"]: c for c in graded["QID-5"].details["checks"]}
    assert "found no answer" in details["exact"]["detail"] and details["exact"]["score"] == 0
    assert details["num"]["detail"] == "the answer writes no number"
    assert details["f1"]["score"] == 0 and not details["letter"]["passed"]
    f1 = {c["id"]: c for c in graded["QID-2"].details["checks"]}["f1"]
    assert f1["score"] == pytest.approx(2 / 3) and f1["passed"] is True  # F1 ≥ the default threshold 0.5
    assert {c["id"]: c for c in graded["QID-6"].details["checks"]}["letter"]["detail"] == "chose B, the reference"


def test_a_hybrid_judge_mixes_a_reference_check_with_its_llm_grade(qa_run):
    graded = by_question(qa_run, "mix")
    for q, (_, _, expected) in ROWS.items():
        j = graded[q]
        if q == "QID-6":  # its LLM call failed: the item fails, the checks kept in its details
            assert not j.ok and j.details["automated_score"] == 1.0
            continue
        llm = (LLM_GRADE[ROWS[q][1].rsplit(" ", 1)[1]] - 1) / 4  # the 1-5 grade on 0-1
        assert j.ok and j.details["automated_score"] == pytest.approx(expected["f1"]), q
        assert j.score == pytest.approx(0.5 * llm + 0.5 * expected["f1"]), q  # an even mix by default
        assert j.scores["f1"] == pytest.approx(expected["f1"])


def test_reference_check_scores_reach_the_leaderboard_with_intervals(qa_run):
    s = summarize(qa_run, resamples=200)
    board = s.board.filter(pl.col("judge") == "ref")
    means = dict(zip(board["criterion"].to_list(), board["mean"].to_list()))
    assert means == pytest.approx({"exact": 0.5, "num": 0.5, "letter": 4 / 6, "f1": (3 + 4 / 3) / 6, "re": 2 / 6,
                                   "composite": sum(COMPOSITE.values()) / 6})
    assert (board["n"] == 6).all()
    assert (board["ci_low"] <= board["mean"]).all() and (board["mean"] <= board["ci_high"]).all()
    assert (board["ci_low"] < board["ci_high"]).all()  # every criterion varies across the six scenarios
    assert "ref" in s.overview["judge"].to_list()


def test_an_llm_judge_is_measured_against_the_checks_and_the_labels(qa_run):
    acc = judge_accuracy(load_run(qa_run), resamples=200)
    rows = {(r["judge"], r["against"], r["category"]): r for r in acc.iter_rows(named=True)}
    # checks: correct = composite ≥ 0.5 -> QID 1, 3, 4, 6; llm passes at 3 (the middle of 1-5): 5, 4, 2, 2, 1, failed
    # -> agrees on QID-1 (pass/pass) and QID-5 (fail/fail); QID-6 failed: counted wrong
    check = rows[("llm", "checks of ref", "all")]
    assert (check["accuracy"], check["n"], check["agree"], check["no_grade"]) == (pytest.approx(2 / 6), 6, 2, 1)
    assert [rows[("llm", "checks of ref", c)]["accuracy"] for c in ("geo", "math", "misc")] == [0.5, 0.0, 0.5]
    # labels pass, fail, pass, fail, fail, pass: llm agrees on QID 1, 4, 5; the checks judge on all but QID-4
    label = rows[("llm", "reference.label", "all")]
    assert (label["accuracy"], label["agree"]) == (pytest.approx(0.5), 3)
    ref = rows[("ref", "reference.label", "all")]
    assert (ref["accuracy"], ref["agree"], ref["no_grade"]) == (pytest.approx(5 / 6), 5, 0)
    geo = rows[("ref", "reference.label", "geo")]
    assert (geo["accuracy"], geo["ci_low"], geo["ci_high"], geo["scenarios"]) == (1.0, 1.0, 1.0, 2)
    assert all(r["ci_low"] <= r["accuracy"] <= r["ci_high"] for r in rows.values())
    assert ("ref", "checks of ref", "all") not in rows  # the checks are no judge of themselves


def test_agreement_rows_name_the_truth_and_the_decision(qa_run):
    rows = label_agreement(load_run(qa_run)).filter(pl.col("judge") == "llm")
    assert set(rows["against"]) == {"reference.label", "checks of ref"}
    failed = rows.filter(pl.col("decision").is_null())
    assert failed.height == 2 and (failed["agree"] == 0).all() and set(failed["truth"]) == {"pass"}


def test_the_report_shows_the_accuracy_section(qa_run, tmp_path):
    html = render_report(qa_run, tmp_path / "report.html", resamples=100).read_text()
    assert "Judge accuracy against ground truth" in html
    assert "checks of ref" in html and "reference.label" in html
    assert "no ground truth in this run" not in html


CHECK_MISSING = CHECKS.replace("reference: letter}", "reference: choice_col}")


def test_a_check_naming_a_missing_reference_key_stops_validate_and_sweep_before_any_request(tmp_path, fake):
    params = write_grid(tmp_path, fake.url, CHECK_MISSING, name="bad")
    for out in (command(tmp_path, "validate", str(params)), run_stages(tmp_path, params)):
        assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
        err = out.stderr
        assert "judge 'ref'" in err and str(tmp_path / "ref.md") in err, err
        assert "check 'letter' compares with reference 'choice_col', which 6 of 6 scenarios lack" in err, err
        assert "answer, category, label, letter, number, pattern" in err  # the keys the dataset has
    assert fake.stats()["requests"] == 0
    with pytest.raises(ParamsError, match="choice_col"):
        asyncio.run(run_collect(open_run(params, run_dir=tmp_path / "runs" / "bad"), progress="none"))
    assert fake.stats()["requests"] == 0


THINKING_CHECKS = """---
id: think
version: "1"
mode: automated
checks:
  - {id: exact, kind: exact_match, reference: answer, extract: "FINAL: (.*)"}
  - {id: starts, kind: regex, pattern: "^FINAL: "}
  - {id: no-thinking, kind: regex, pattern: "fake reasoning", must_match: false}
---
"""


def test_checks_read_the_answer_never_the_reasoning(tmp_path, fake):
    (tmp_path / "qa.jsonl").write_text(json.dumps({"question": "QID-1: capital of France?", "answer": "Paris"}) + "\n")
    (tmp_path / "think.md").write_text(THINKING_CHECKS)
    params = grid(tmp_path / "think.yaml", fake.url, name="think", models=[model("m1", fake.url)],
                  prompts=[prompt("ask", "Question {question}")],
                  scenarios={"dataset": {"path": "qa.jsonl", "fields": {"question": "question"},
                                         "reference": {"answer": "answer"}}},
                  judges=[judge("think", fake.url, rubric=str(tmp_path / "think.md"))])
    fake.configure(think_tags=True, replies=[{"match": "QID-1", "content": "FINAL: Paris"}])
    run = open_run(params, run_dir=tmp_path / "runs" / "think")
    asyncio.run(run_collect(run, progress="none", judge=True))
    (cand,) = RunStore(run.dir).latest(Candidate).values()
    assert "fake reasoning" in (cand.reasoning or "")  # the model did think, inline in its reply
    (j,) = RunStore(run.dir).latest(Judgment).values()
    assert j.scores == {"exact": 1.0, "starts": 1.0, "no-thinking": 1.0}, j.details
