"""Judge accuracy: what a label means and what the reference checks say. 0/1 labels are pass/fail on any scale
(unless other labels make them expected scores); a pairwise judge with its own verdict labels is read by their
order, or left out with a reason (never a silent 0); the checks' ground truth is their reference checks only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import polars as pl
import pytest

from bench.analysis import judge_accuracy, label_agreement, load_run
from bench.config.rubrics import load_rubric, snapshot_rubric
from bench.core.store import RunStore
from bench.run import open_run
from bench.stage_runs import run_collect, run_judge
from bench.testing.grids import grid, judge
from bench.testing.records import candidate, judgment, scenario


def _store(path: Path, records: list) -> Path:
    RunStore(path).append(records)
    return path


def graded_run(path: Path, labels: list, scores: list[float]) -> Path:
    scens = [scenario({"q": i}, reference={"label": v}) for i, v in enumerate(labels)]
    cands = [candidate(s) for s in scens]
    return _store(path, [*scens, *cands, *(judgment(c, score=v) for c, v in zip(cands, scores))])


# -- N: 0/1 labels --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spelled", [[1, 0, 0, 1], ["1", "0", "0", "1"], [1.0, 0.0, 0.0, 1.0],
                                     [True, False, False, True], ["yes", "no", "no", "yes"]])
def test_zero_one_labels_are_pass_fail_on_a_one_to_five_judge(tmp_path, spelled):
    # a 1–5 judge passes at 3: 4 on pass and 2 on fail agree; 5 on fail and 1 on pass do not
    t = load_run(graded_run(tmp_path / "r", spelled, [4.0, 2.0, 5.0, 1.0]))
    rows = label_agreement(t)
    assert sorted(rows["truth"].to_list()) == ["fail", "fail", "pass", "pass"]
    acc = judge_accuracy(t, resamples=50).row(0, named=True)
    assert (acc["accuracy"], acc["n"], acc["agree"]) == (0.5, 4, 2), "the same data, the same accuracy"


def test_labels_beyond_zero_and_one_are_expected_scores_and_zero_is_one_of_them(tmp_path):
    t = load_run(graded_run(tmp_path / "r", [0, 3, "5", 1], [0.3, 3.4, 4.0, 1.2]))
    rows = {r["truth"]: r["agree"] for r in label_agreement(t).iter_rows(named=True)}
    assert rows == {"0": 1.0, "3": 1.0, "5": 0.0, "1": 1.0}  # within 0.5 of each expected score, 5 vs 4 not


# -- O: a pairwise judge's own verdict labels ------------------------------------------------------------------

def sides_rubric(tmp_path: Path, labels: list[str]) -> str:
    path = tmp_path / "sides.md"
    path.write_text(f"---\nid: sides\nversion: '1'\nmode: pairwise\nlabels: {json.dumps(labels)}\n---\n"
                    "Compare the two responses.\n")
    return str(path)


def judged_pairs(tmp_path: Path, fake, labels: list[str], pairs: dict[str, tuple[str, str]], monkeypatch) -> Path:
    """Judge each pair marker → (its label, the judge's verdict in both orders shown) in a run; return its folder."""
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    with open(tmp_path / "pairs.jsonl", "w") as fh:
        for marker, (label, _verdict) in pairs.items():
            fh.write(json.dumps({"question": f"Which is right? {marker}", "response_A": f"{marker} first",
                                 "response_B": f"{marker} second", "label": label}) + "\n")
    fake.configure(replies=[{"match": m, "content": json.dumps({"verdict": v, "rationale": "so"})}
                            for m, (_label, v) in pairs.items()])
    params = grid(tmp_path / "pairs.yaml", fake.url, name="pairs", models=None, prompts=None,
                  scenarios={"dataset": {"path": "pairs.jsonl", "reference": {"label": "label"},
                                         "fields": {"question": "question", "response_A": "response_A",
                                                    "response_B": "response_B"}}},
                  judges=[judge("sides", fake.url, rubric=sides_rubric(tmp_path, labels), mode="pairwise")])
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))  # no model: it writes the scenarios and the rubric's snapshot
    asyncio.run(run_judge(run, progress="none"))
    return run.dir


def test_a_pairwise_judge_with_its_own_labels_is_read_by_their_order(tmp_path, fake, monkeypatch):
    # the judge sees B's response first in the swapped order: a verdict as shown there means the other side
    pairs = {"PAIR-1": ("A>B", "A is better"),   # AB: A>B agrees; BA: shown A, which is B: disagrees
             "PAIR-2": ("A=B", "same"),          # a tie either way: 2 of 2
             "PAIR-3": ("B>A", "B is better")}   # AB: agrees; BA: disagrees
    run = judged_pairs(tmp_path, fake, ["A is better", "same", "B is better"], pairs, monkeypatch)
    t = load_run(run)
    assert t.judgments.height == 6 and t.judgments["error"].is_null().all()
    acc = judge_accuracy(t, resamples=50).row(0, named=True)
    assert (acc["accuracy"], acc["n"], acc["agree"], acc["no_grade"]) == (pytest.approx(4 / 6), 6, 4, 0)
    shown = {(r["truth"], r["decision"]) for r in label_agreement(t).iter_rows(named=True)}
    assert shown == {("A>B", "A>B"), ("A>B", "B>A"), ("A=B", "A=B"), ("B>A", "B>A"), ("B>A", "A>B")}
    assert acc["note"] is None


def test_a_pairwise_judge_whose_labels_cannot_be_read_is_left_out_with_the_reason(tmp_path, fake, monkeypatch):
    # "B" first and "A" last: the order says the opposite of the words, so "neither" cannot be placed
    run = judged_pairs(tmp_path, fake, ["B", "neither", "A"], {"PAIR-1": ("A>B", "neither")}, monkeypatch)
    acc = judge_accuracy(load_run(run), resamples=50)
    assert acc.height == 1
    row = acc.row(0, named=True)
    assert row["accuracy"] is None and row["agree"] is None and row["n"] == 2
    assert "left out" in row["note"] and "B, neither, A" in row["note"]


def test_custom_verdicts_without_their_rubric_are_left_out_with_the_reason(tmp_path):
    s = scenario({"q": 1}, reference={"label": "A>B"})
    a, b = candidate(s, model_id="m1"), candidate(s, model_id="m2")
    run = _store(tmp_path / "r", [s, a, b, judgment(a, mode="pairwise", candidate_ids=[a.id, b.id], order="AB",
                                                    verdict="left")])
    row = judge_accuracy(load_run(run), resamples=50).row(0, named=True)
    assert row["accuracy"] is None and "rubric tip@1 is not in the run folder" in row["note"]


# -- P: the reference checks alone are the ground truth --------------------------------------------------------

def test_the_checks_ground_truth_counts_only_the_checks_against_the_reference(tmp_path):
    path = tmp_path / "chk.md"
    path.write_text("---\nid: chk\nversion: '1'\nmode: automated\nchecks:\n"
                    "  - {id: exact, kind: exact_match, reference: answer}\n"
                    "  - {id: short, kind: length, max_chars: 5, weight: 3}\n---\n")
    run = tmp_path / "r"
    snapshot_rubric(load_rubric(str(path), tmp_path), run)
    s1, s2 = scenario({"q": 1}, reference={"answer": "paris"}), scenario({"q": 2}, reference={"answer": "rome"})
    right, wrong = candidate(s1, output="paris, of course"), candidate(s2, output="oslo")  # too long / short enough
    checks = [judgment(right, judge_id="chk", rubric_id="chk", mode="automated", scores={"exact": 1.0, "short": 0.0},
                       score=0.25),
              judgment(wrong, judge_id="chk", rubric_id="chk", mode="automated", scores={"exact": 0.0, "short": 1.0},
                       score=0.75)]
    llm = [judgment(right, judge_id="llm", score=5.0), judgment(wrong, judge_id="llm", score=1.0)]
    rows = label_agreement(load_run(_store(run, [s1, s2, right, wrong, *checks, *llm])))
    truth = {r["scenario"]: r["truth"] for r in rows.iter_rows(named=True)}
    assert truth == {s1.id: "pass", s2.id: "fail"}, "the length check does not make a wrong answer right"
    assert rows["agree"].to_list() == [1.0, 1.0] and set(rows["against"]) == {"checks of chk"}
    assert rows.filter(pl.col("judge") == "chk").is_empty()
