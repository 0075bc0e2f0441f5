"""`bench judges RUN [--json]` (issue 33, point 1) on a fake-provider run reviewed through `bench review apply` by
two reviewers: the document's agreement is scikit-learn's kappa of the same pairs, the ceiling the `krippendorff`
package's alpha of the two reviewers, every judge has its audit, and too few reviews is a state."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from bench.analysis import human_agreement, load_run
from bench.core.records import Judgment, Review
from bench.core.store import RunStore
from bench.judge_trust.document import plain
from bench.testing.in_process import command
from tests.judge_trust.reviewed_run import reviewed_run

AUDIT_MEASURES = {"first_slot_preference", "flip_rate", "length_correlation", "length_gap", "style_length_coefficient",
                  "self_preference", "modal_share", "entropy", "jury_disagreement"}


@pytest.fixture(scope="module")
def doc(judged):
    tmp, run = judged
    out = command(tmp, "judges", str(run), "--json", "--resamples", "300")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def latest_reviews(run) -> dict[tuple[str, str], Review]:
    """Each reviewer's latest review of each answer (or pair), read from the store: (candidates, reviewer) -> review."""
    latest = {}
    for r in sorted(RunStore(run).read(Review), key=lambda r: r.created_at):
        latest[(",".join(r.candidate_ids), r.reviewer)] = r
    return latest


def test_the_kappa_of_every_criterion_is_scikit_learns_on_the_same_pairs(judged, doc):
    _, run = judged
    judgments = [j for j in RunStore(run).read(Judgment) if j.error is None]
    reviews = latest_reviews(run)
    grader = {r["criterion"]: r for r in next(j for j in doc["judges"] if j["judge"] == "grader")["agreement"]}
    assert set(grader) == {"composite", "relevance", "actionability", "tone"}
    for criterion in ("relevance", "actionability", "tone"):
        x, y = zip(*[(j.scores[criterion], r.scores[criterion]) for j in judgments if j.judge_id == "grader"
                     for (unit, _), r in reviews.items() if unit == j.candidate_ids[0]])
        row = grader[criterion]
        assert (row["n"], row["items"], row["state"]) == (36, 24, "ok")  # ann's 24 answers and bob's 12
        assert row["kappa"] == pytest.approx(cohen_kappa_score(x, y, weights="quadratic", labels=[1, 2, 3, 4, 5]))
        assert row["exact"] == pytest.approx(np.mean(np.array(x) == np.array(y)))
        assert row["ci_low"] <= row["kappa"] <= row["ci_high"]
    x, y = zip(*[(j.verdict, r.verdict) for j in judgments if j.judge_id == "arena"
                 for (unit, _), r in reviews.items() if unit == ",".join(j.candidate_ids)])
    [verdict] = next(j for j in doc["judges"] if j["judge"] == "arena")["agreement"]
    assert (verdict["criterion"], verdict["n"], verdict["items"]) == ("verdict", 24, 12)  # both seats of 12 pairs
    order = {label: n for n, label in enumerate(("A>>B", "A>B", "A=B", "B>A", "B>>A"))}  # weighted by position
    assert verdict["kappa"] == pytest.approx(cohen_kappa_score([order[v] for v in x], [order[v] for v in y],
                                                               weights="quadratic", labels=list(range(5))))
    assert verdict["exact"] == pytest.approx(np.mean(np.array(x) == np.array(y)))  # exact: on the five labels


def test_the_ceiling_is_the_krippendorff_alpha_of_the_two_reviewers(judged, doc):
    _, run = judged
    reviews = latest_reviews(run)
    units = sorted({unit for unit, who in reviews if who == "bob"})
    ceiling = {r["criterion"]: r for r in doc["reviewer_ceiling"] if r["rubric"] == "tip-v1@1"}
    for criterion in ("relevance", "tone"):
        data = np.array([[reviews[(u, who)].scores[criterion] for u in units] for who in ("ann", "bob")], dtype=float)
        row = ceiling[criterion]
        assert (row["reviewers"], row["items"], row["state"]) == (2, 12, "ok")
        assert row["alpha"] == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
    pairs = next(r for r in doc["reviewer_ceiling"] if r["criterion"] == "verdict")
    assert pairs["state"] == "not_enough_reviews" and pairs["note"].startswith("one reviewer")


def test_the_document_is_the_analysis_api_with_confusion_bias_and_audit(judged, doc):
    _, run = judged
    t = load_run(run)
    assert doc["run"] == "judged" and doc["reviews"] == len(t.reviewed.latest) == 24 + 12 + 12
    table = plain(human_agreement(t, resamples=300).to_dicts())
    assert [row for j in doc["judges"] for row in j["agreement"]] == table
    for j in doc["judges"]:
        for row in j["agreement"]:
            assert sum(c for *_, c in j["confusion"][row["criterion"]]) == row["n"]
        assert set(j["audit"]) == AUDIT_MEASURES, j["judge"]
        for m in j["audit"].values():
            assert {"value", "ci_low", "ci_high", "n", "state", "verdict"} <= set(m)
            assert m["state"] in ("ok", "not_applicable", "not_enough_data") and m["verdict"]
    grader = next(j for j in doc["judges"] if j["judge"] == "grader")
    levels = [b for b in grader["bias_by_level"] if b["criterion"] == "relevance"]
    assert sum(b["n"] for b in levels) == 36 and all(b["mean_bias"] is not None for b in levels)


def test_the_tables_say_the_same_in_words(judged, doc):
    tmp, run = judged
    out = command(tmp, "judges", "judged", "--resamples", "300")  # a sweep name, as `bench gate` takes it
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for part in ("judge arena", "judge grader", "agreement with blind human reviews", "bias by human grade",
                 "bias audit", "reviewers' own agreement", "first_slot_preference"):
        assert part in text, part
    relevance = next(r for r in next(j for j in doc["judges"] if j["judge"] == "grader")["agreement"]
                     if r["criterion"] == "relevance")
    kappa = f"{relevance['kappa']:.2f} [{relevance['ci_low']:.2f}, {relevance['ci_high']:.2f}]"
    assert any(line.split()[0] == "relevance" and kappa in line for line in text.splitlines() if line.strip()), text


def test_an_unreviewed_run_says_not_enough_reviews_and_a_missing_one_fails(tmp_path, fake_server):
    run = reviewed_run(tmp_path, fake_server.url, name="bare", reviewers=())
    out = command(tmp_path, "judges", str(run), "--json", "--resamples", "100")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rows = [row for j in doc["judges"] for row in j["agreement"]]
    assert doc["reviews"] == 0 and doc["reviewer_ceiling"] == [] and len(rows) == 5
    assert {r["state"] for r in rows} == {"not_enough_reviews"} and all(r["kappa"] is None for r in rows)
    assert all(r["note"].startswith("no blind human review of its judgments") for r in rows)
    missing = command(tmp_path, "judges", str(tmp_path / "nope"))
    assert missing.returncode == 2 and str(tmp_path / "nope") in missing.stderr
