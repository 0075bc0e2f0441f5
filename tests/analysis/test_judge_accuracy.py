"""Judge accuracy against a dataset's labels: pairwise datasets swept on the fake provider (crafted verdicts whose
accuracy is worked out by hand, and JudgeBench's own pairs counted independently), labels that name the better
model, graded judges against pass/fail and expected-score labels, and no ground truth at all."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from bench.analysis import judge_accuracy, label_agreement, load_run
from bench.analysis.accuracy import graded_truth, side
from bench.core.records import Judgment, Scenario
from bench.core.store import RunStore
from bench.judgebench import normalize_label
from bench.testing.grids import ROOT, grid, judge
from bench.testing.records import candidate, judgment, scenario
from bench.testing.in_process import run_stages

JUDGEBENCH = ROOT.parent / "shared" / "data" / "judgebench" / "judgebench-gpt-4o.jsonl"  # as params/judgebench.yaml
# pair marker → (label, source, the judge's reply in both orders): A=B is the same verdict whichever order it is
# shown in, [[A>B]] prefers whichever response it sees first, so its second verdict maps back to B>A
PAIRS = {"PAIR-1": ("A=B", "s1", "Same. [[A=B]]"),  # A=B, A=B: 2 of 2 agree
         "PAIR-2": ("A>B", "s1", "Same. [[A=B]]"),  # 0 of 2
         "PAIR-3": ("B>>A", "s2", "First. [[A>B]]"),  # A>B, B>A against B>A: 1 of 2
         "PAIR-4": ("tie", "s2", "First! [[A>>B]]"),  # A>B, B>A against A=B: 0 of 2
         "PAIR-5": ("B", "s2", None)}  # the judge fails (HTTP 500): 0 of 2, both without a grade


def pair_grid(tmp: Path, url: str, path: str, name: str, limit: int | None = None) -> Path:
    dataset = {"path": path, "fields": {"question": "question", "response_A": "response_A",
                                        "response_B": "response_B"},
               "reference": {"label": "label", "source": "source"}, **({"limit": limit} if limit else {})}
    return grid(tmp / f"{name}.yaml", url, name=name, models=None, prompts=None, scenarios={"dataset": dataset},
                judges=[judge("arena", url, rubric="arena-pairwise", mode="pairwise")],
                limits={"max_concurrency": 8, "timeout_s": 10, "retries": 0})


def test_pairwise_accuracy_on_a_labelled_pair_dataset(tmp_path, fake):
    with open(tmp_path / "pairs.jsonl", "w") as fh:
        for marker, (label, source, _) in PAIRS.items():
            fh.write(json.dumps({"question": f"Which is right? {marker}", "response_A": f"{marker} first answer",
                                 "response_B": f"{marker} second answer", "label": label, "source": source}) + "\n")
    fake.configure(replies=[{"match": m, "content": reply} if reply else {"match": m, "status": 500}
                            for m, (_, _, reply) in PAIRS.items()])
    out = run_stages(tmp_path, pair_grid(tmp_path, fake.url, "pairs.jsonl", "pairs"))
    assert out.returncode == 3, out.stdout[-3000:] + out.stderr[-2000:]  # PAIR-5's judgments failed
    acc = judge_accuracy(load_run(tmp_path / "runs" / "pairs"), resamples=300)
    rows = {r["category"]: r for r in acc.iter_rows(named=True)}
    assert acc["against"].unique().to_list() == ["reference.label"] and list(rows) == ["all", "s1", "s2"]
    assert (rows["all"]["accuracy"], rows["all"]["n"], rows["all"]["agree"], rows["all"]["no_grade"]) == \
        (pytest.approx(0.3), 10, 3, 2)
    assert (rows["s1"]["accuracy"], rows["s1"]["n"]) == (0.5, 4)
    assert (rows["s2"]["accuracy"], rows["s2"]["n"], rows["s2"]["scenarios"]) == (pytest.approx(1 / 6), 6, 3)
    assert 0 <= rows["all"]["ci_low"] < 0.3 < rows["all"]["ci_high"] <= 1


@pytest.mark.skipif(not JUDGEBENCH.is_file(), reason=f"{JUDGEBENCH} is not on this machine")
def test_accuracy_on_judgebench_pairs_counts_each_verdict_against_its_label(tmp_path, fake):
    out = run_stages(tmp_path, pair_grid(tmp_path, fake.url, str(JUDGEBENCH), "jb", limit=24))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    run = tmp_path / "runs" / "jb"
    store = RunStore(run)
    scenarios = {s.id: s for s in store.read(Scenario)}
    judgments = list(store.latest(Judgment).values())
    agree = [normalize_label(j.verdict) == normalize_label(scenarios[j.scenario_id].reference["label"])
             for j in judgments]
    acc = judge_accuracy(load_run(run), resamples=200)
    overall = acc.filter(pl.col("category") == "all").row(0, named=True)
    assert (overall["n"], overall["agree"]) == (48, sum(agree))  # 24 pairs, both orders
    assert overall["accuracy"] == pytest.approx(sum(agree) / 48)
    sources = {s.reference["source"] for s in scenarios.values()}
    assert set(acc["category"]) == {"all", *sources}  # no `category`: the pairs' `source` names it
    assert acc.filter(pl.col("category") != "all")["n"].sum() == 48


def _store(tmp_path: Path, records: list) -> Path:
    RunStore(tmp_path / "r").append(records)
    return tmp_path / "r"


def test_a_label_may_name_the_better_model_of_collected_pairs(tmp_path):
    s1, s2 = scenario({"q": 1}, reference={"label": "m2"}), scenario({"q": 2}, reference={"label": "m1"})
    a1, b1 = candidate(s1, model_id="m2"), candidate(s1, model_id="m1")
    a2, b2 = candidate(s2, model_id="m2"), candidate(s2, model_id="m1")
    pair = lambda a, b, verdict, order: judgment(a, mode="pairwise", candidate_ids=[a.id, b.id],  # noqa: E731
                                                 order=order, verdict=verdict)
    run = _store(tmp_path, [s1, s2, a1, b1, a2, b2, pair(a1, b1, "A>>B", "AB"), pair(a1, b1, "B>A", "BA"),
                            pair(a2, b2, "B>A", "AB"), pair(a2, b2, "A=B", "BA")])
    rows = label_agreement(load_run(run)).sort("scenario", "decision")
    assert sorted(rows["truth"].to_list()) == ["A>B", "A>B", "B>A", "B>A"]
    acc = judge_accuracy(load_run(run), resamples=100).row(0, named=True)
    assert (acc["n"], acc["agree"]) == (4, 2)  # s1: m2 is A; verdicts A>B, B>A. s2: m1 is B; B>A, A=B


def test_graded_judges_against_pass_fail_and_expected_score_labels(tmp_path):
    labels = [True, "fail", "PASS", "no", 4, "2", "n/a"]
    scens = [scenario({"q": i}, reference={"label": v, "category": "c" + str(i % 2)}) for i, v in enumerate(labels)]
    cands = [candidate(s) for s in scens]
    scores = [4.0, 3.5, 2.0, 1.0, 4.4, 3.0, 5.0]  # passes at 3 (the middle of the observed 1-5): P P F F . . P
    grades = [judgment(c, score=v) for c, v in zip(cands, scores)]
    t = load_run(_store(tmp_path, [*scens, *cands, *grades]))
    rows = label_agreement(t).sort("scenario")  # no rubric in the run folder: the middle of the observed range
    by = {r["judgment"]: r for r in rows.iter_rows(named=True)}
    agree = [by[g.id]["agree"] for g in grades[:6]]
    # pass/pass, fail/pass, pass/fail, fail/fail; 4 vs 4.4 within 0.5; 2 vs 3 not; "n/a" is no label
    assert agree == [1, 0, 0, 1, 1, 0] and grades[6].id not in by
    assert [by[g.id]["truth"] for g in grades[:6]] == ["pass", "fail", "pass", "fail", "4", "2"]
    tight = {r["judgment"]: r["agree"] for r in label_agreement(t, pass_at={"j": 4.5}, score_tolerance=0.1).iter_rows(
        named=True)}
    assert [tight[g.id] for g in grades[:6]] == [0, 1, 0, 1, 0, 0]  # 4.0 and 3.5 now fail; 4.4 is 0.4 off 4
    acc = judge_accuracy(t, resamples=100, pass_at=3.0)
    assert acc["category"].to_list() == ["all", "c0", "c1"] and acc["n"].to_list() == [6, 3, 3]


def test_labels_and_verdicts_read_every_documented_spelling():
    assert [side(v) for v in ("A>>B", "a>b", "B>>A", "A=B", "tie", "A", "b", "model_b", "response_A", "??")] == \
        ["A>B", "A>B", "B>A", "A=B", "A=B", "A>B", "B>A", "B>A", "A>B", None]
    assert side("gpt-x", names_a=("cell/p@v1", "gpt-x")) == "A>B" and side("m9", names_b=("m9",)) == "B>A"
    assert [graded_truth(v) for v in (True, "Correct", "incorrect", 3, "4.5", float("nan"), "maybe", None)] == \
        [True, True, False, 3.0, 4.5, None, None, None]


def test_a_run_without_ground_truth_has_an_empty_accuracy_table(tmp_path):
    s = scenario({"q": 1})
    c = candidate(s)
    acc = judge_accuracy(load_run(_store(tmp_path, [s, c, judgment(c)])))
    assert acc.is_empty() and acc.columns[:4] == ["judge", "against", "category", "accuracy"]
    with pytest.raises(ValueError, match="judge_accuracy: agreement has no column"):
        judge_accuracy(pl.DataFrame({"judge": ["j"]}))
