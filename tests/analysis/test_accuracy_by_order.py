"""Judge accuracy as the field reports it: per order shown, on both orders of a pair, the first seat's share and the
flip rate, beside the kappa against the label; and only for judges that grade correctness. The bar: 25 labelled
pairs in both orders, judged by a judge that always picks the first seat and by a perfect one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.analysis import judge_accuracy, load_run
from bench.config.rubrics import load_rubric, snapshot_rubric
from bench.core.store import RunStore
from bench.judge_trust import judges_document, judges_text
from bench.run import open_run
from bench.stage_runs import run_collect, run_judge
from bench.testing.fake_provider.quality import model_tag
from bench.testing.grids import grid, judge
from bench.testing.records import candidate, judgment, scenario

PAIRS = 25
A_BETTER = 13  # pairs 0..12 are labelled A>B, the other 12 B>A: as balanced as 25 pairs can be


def _label(i: int) -> str:
    return "A>B" if i < A_BETTER else "B>A"


def _by_judge(doc: dict) -> dict[str, dict]:
    return {j["judge"]: j for j in doc["judges"]}


def _assert_the_bar(first: dict, perfect: dict) -> None:
    assert first["first_slot_preference"] == 1.0 and perfect["first_slot_preference"] == 0.5
    assert first["flip_rate"] == 1.0 and perfect["flip_rate"] == 0.0
    assert first["accuracy_both_orders"] == 0.0 and perfect["accuracy_both_orders"] == 1.0
    assert first["accuracy"] == 0.5 and perfect["accuracy"] == 1.0, "pooled over both orders"
    # the first-slot judge is right shown AB exactly on the A>B pairs, shown BA on the B>A ones
    assert first["accuracy_by_order"] == {"AB": A_BETTER / PAIRS, "BA": (PAIRS - A_BETTER) / PAIRS}
    assert perfect["accuracy_by_order"] == {"AB": 1.0, "BA": 1.0}
    [truth] = [r for r in perfect["ground_truth"] if r["category"] == "all"]
    assert truth["kappa"] == 1.0 and truth["n"] == 2 * PAIRS and truth["against"] == "reference.label"
    assert perfect["kappa_against_label"] == {"kappa": 1.0, "ci_low": 1.0, "ci_high": 1.0}
    [truth] = [r for r in first["ground_truth"] if r["category"] == "all"]
    assert truth["kappa_ci_low"] <= truth["kappa"] <= truth["kappa_ci_high"] < 0.5


def test_fifty_verdicts_on_records_give_the_bar(tmp_path):
    """Unit level: the 50 verdicts of each judge written as records, as an importer or a replay would."""
    records = []
    for i in range(PAIRS):
        s = scenario({"q": i}, reference={"label": _label(i)})
        a, b = candidate(s, model_id="m1"), candidate(s, model_id="m2")
        records += [s, a, b]
        for order in ("AB", "BA"):
            shown_first = "A>B" if order == "AB" else "B>A"  # the first seat's answer, in the original numbering
            for judge_id, verdict in (("first", shown_first), ("perfect", _label(i))):
                records.append(judgment(a, judge_id=judge_id, mode="pairwise", candidate_ids=[a.id, b.id],
                                        order=order, verdict=verdict))
    RunStore(tmp_path / "r").append(records)
    judges = _by_judge(judges_document(load_run(tmp_path / "r"), resamples=200))
    _assert_the_bar(judges["first"], judges["perfect"])


@pytest.fixture()
def judged_pairs(tmp_path, fake, monkeypatch) -> Path:
    """The bar through the real pipeline: 25 labelled pairs of a good and a bad fake answer, judged in both orders
    by the fake provider as an unbiased judge and as one whose every verdict goes to the first seat
    (``position_bias`` 1)."""
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    fake.configure(model_quality={"good": 1.0, "bad": 0.0}, position_bias={"first-judge": 1.0})
    good, bad = model_tag("good"), model_tag("bad")
    with open(tmp_path / "pairs.jsonl", "w") as fh:
        for i in range(PAIRS):
            answers = [f"fake answer {good}{i:05x}", f"fake answer {bad}{i:05x}"]
            a, b = answers if _label(i) == "A>B" else answers[::-1]
            fh.write(json.dumps({"question": f"Question {i}?", "response_A": a, "response_B": b,
                                 "label": _label(i)}) + "\n")
    params = grid(tmp_path / "pairs.yaml", fake.url, name="pairs", models=None, prompts=None,
                  scenarios={"dataset": {"path": "pairs.jsonl", "reference": {"label": "label"},
                                         "fields": {"question": "question", "response_A": "response_A",
                                                    "response_B": "response_B"}}},
                  judges=[judge("fair-judge", fake.url, rubric="arena-pairwise"),
                          judge("first-judge", fake.url, rubric="arena-pairwise")])
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))  # no model: it writes the scenarios and the rubric's snapshot
    asyncio.run(run_judge(run, progress="none"))
    return run.dir


def test_a_first_slot_judge_and_a_perfect_one_through_the_pipeline_give_the_bar(judged_pairs):
    t = load_run(judged_pairs)
    assert t.judgments.height == 4 * PAIRS and t.judgments["error"].is_null().all()
    doc = judges_document(t, resamples=200)
    judges = _by_judge(doc)
    _assert_the_bar(judges["first-judge"], judges["fair-judge"])
    verdicts = {j: judges[j]["audit"]["first_slot_preference"]["verdict"] for j in judges}
    assert verdicts["first-judge"].startswith("prefers the answer shown first")
    assert verdicts["fair-judge"].startswith("no net preference for either seat; flips 0% of pairs")
    text = judges_text(doc)
    assert "accuracy against reference.label: 0.50" in text and "shown AB 0.52, BA 0.48, right in both orders 0" in text


def test_a_judge_that_flips_both_ways_is_not_called_unbiased(tmp_path):
    """Half the pairs go to the first seat, half to the second: no net preference, but every pair flips."""
    records = []
    for i in range(20):
        s = scenario({"q": i}, reference={"label": "A>B"})
        a, b = candidate(s, model_id="m1"), candidate(s, model_id="m2")
        seat = 0 if i % 2 else 1  # the seat this pair's verdicts go to
        records += [s, a, b, *(judgment(a, judge_id="flip", mode="pairwise", candidate_ids=[a.id, b.id],
                                        order=o, verdict=("A>B", "B>A")[(k + seat) % 2])
                               for k, o in enumerate(("AB", "BA")))]
    RunStore(tmp_path / "r").append(records)
    [found] = judges_document(load_run(tmp_path / "r"), resamples=200)["judges"]
    assert found["flip_rate"] == 1.0 and found["first_slot_preference"] == 0.5
    line = found["audit"]["first_slot_preference"]["verdict"]
    assert line.startswith("no net preference for either seat; flips 100% of pairs (the seats decide")
    assert "no position bias" not in line


def _graded_run(tmp_path: Path, front: str, reference: dict | None = None) -> Path:
    """A run of a graded judge with rubric front matter ``front`` (snapshotted) on 8 labelled pass/fail answers."""
    path = tmp_path / "clarity.md"
    path.write_text(f"---\nid: clarity\nversion: '1'\nmode: rubric\n{front}criteria:\n  - id: clear\n"
                    f"    description: clear\n    scale: [1, 5]\n    anchors: {{1: a, 2: b, 3: c, 4: d, 5: e}}\n---\n"
                    "Grade it.\n")
    run = tmp_path / "r"
    snapshot_rubric(load_rubric(str(path), tmp_path), run)
    records = []
    for i in range(8):
        s = scenario({"q": i}, reference={"label": i % 2 == 0, **(reference or {})})
        c = candidate(s)
        records += [s, c, judgment(c, judge_id="clarity", rubric_id="clarity", score=4.0 if i < 1 else 2.0)]
    RunStore(run).append(records)
    return run


@pytest.mark.parametrize(("front", "measured"), [("", False), ("accuracy: true\n", True),
                                                 ("reference: [answer]\n", True), ("solve_first: true\n", True),
                                                 ("reference: [answer]\naccuracy: false\n", False)])
def test_accuracy_is_given_only_for_a_judge_that_grades_correctness(tmp_path, front, measured):
    t = load_run(_graded_run(tmp_path, front, {"answer": "x"}))
    acc = judge_accuracy(t, resamples=50)
    [found] = judges_document(t, resamples=50)["judges"]
    if measured:
        assert acc.row(0, named=True)["accuracy"] == pytest.approx(5 / 8) and found["accuracy"] == pytest.approx(5 / 8)
        assert found["accuracy_by_order"] is None, "a graded judge has no orders"
    else:  # a clarity judge's grades say nothing of whether the answer is right: no 0.625 to misread
        assert acc.is_empty() and found["accuracy"] is None and found["ground_truth"] == []
        assert "does not grade correctness" in found["accuracy_note"] and "accuracy: true" in found["accuracy_note"]
        assert "accuracy: none (its rubric clarity@1 does not grade correctness" in judges_text(
            judges_document(t, resamples=50))
