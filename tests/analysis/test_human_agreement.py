"""Judge-versus-human agreement (issue 33, point 1): kappa and the reviewers' alpha agree with scikit-learn and the
`krippendorff` package on the same data, the intervals cover the true values, pairs of one item are resampled
together, and too few reviews is a state of its own, never a number."""

from __future__ import annotations

from pathlib import Path

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from bench.analysis import (bias_by_level, confusion, human_agreement, judge_agreement, load_run, reviewer_ceiling)
from bench.analysis.agreement_bootstrap import agreement_draws, kappa_of_counts
from bench.core.records import Review
from bench.core.store import RunStore
from bench.testing.records import candidate, judgment, scenario

CRITERIA = ("quality", "tone")


def graded_run(path: Path, judge: list[dict[str, int]], reviews: dict[str, list[dict[str, int] | None]],
               *, judge_id: str = "j", shown: frozenset[str] = frozenset()) -> Path:
    """Write a run of one judge's rubric grades of len(judge) answers and each reviewer's reviews of them (None:
    not reviewed); every review carries the composite its scores' mean gives, as the rubric computes it, and is
    blind unless its reviewer is in ``shown`` (saved with the judges shown)."""
    records = []
    for i, grades in enumerate(judge):
        s = scenario({"q": i})
        c = candidate(s)
        j = judgment(c, judge_id=judge_id, scores=grades, score=float(np.mean(list(grades.values()))))
        records += [s, c, j]
        for reviewer, given in reviews.items():
            if given[i] is not None:
                records.append(Review(judgment_id=j.id, candidate_ids=[c.id], reviewer=reviewer, rubric_id="tip",
                                      rubric_version="1", scores=given[i],
                                      score=float(np.mean(list(given[i].values()))),
                                      blind=reviewer not in shown))
    RunStore(path).append(records)
    return path


def noisy(values: np.ndarray, rng: np.random.Generator, p: float) -> np.ndarray:
    """Return ``values`` (1-5) with each moved by ±1 with probability ``p``."""
    step = rng.choice([-1, 1], size=values.size) * (rng.random(values.size) < p)
    return np.clip(values + step, 1, 5)


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    """40 answers graded by judge j; ann reviews all of them, bob the first 30, cy every third one."""
    rng = np.random.default_rng(7)
    truth = {c: rng.integers(1, 6, 40) for c in CRITERIA}
    marks = zip(*(noisy(truth[c], rng, 0.4) for c in CRITERIA))
    judge = [{c: int(v) for c, v in zip(CRITERIA, vals)} for vals in marks]

    def reviewer(p: float, keep) -> list[dict[str, int] | None]:
        marks = [noisy(truth[c], rng, p) for c in CRITERIA]
        return [{c: int(m[i]) for c, m in zip(CRITERIA, marks)} if keep(i) else None for i in range(40)]

    reviews = {"ann": reviewer(0.2, lambda i: True), "bob": reviewer(0.3, lambda i: i < 30),
               "cy": reviewer(0.2, lambda i: i % 3 == 0)}
    return load_run(graded_run(tmp_path_factory.mktemp("ha") / "r", judge, reviews)), judge, reviews


def pairs(judge, reviews, criterion):
    """Return the (judge, human) pairs of every review, as human_agreement pairs them."""
    x, y = [], []
    for given in reviews.values():
        for grades, review in zip(judge, given):
            if review is not None:
                x.append(grades[criterion])
                y.append(review[criterion])
    return np.array(x), np.array(y)


def test_kappa_exact_and_adjacent_match_scikit_learn_and_a_count_by_hand(reviewed):
    t, judge, reviews = reviewed
    table = {r["criterion"]: r for r in human_agreement(t, resamples=300).to_dicts()}
    assert set(table) == {"composite", *CRITERIA}
    for criterion in CRITERIA:
        x, y = pairs(judge, reviews, criterion)
        row = table[criterion]
        assert (row["n"], row["items"], row["state"], row["note"]) == (x.size, 40, "ok", None)
        assert row["kappa"] == pytest.approx(cohen_kappa_score(x, y, weights="quadratic", labels=[1, 2, 3, 4, 5]))
        assert row["exact"] == pytest.approx(np.mean(x == y))
        assert row["adjacent"] == pytest.approx(np.mean(np.abs(x - y) <= 1))
        for name, prefix in (("kappa", ""), ("exact", "exact_"), ("adjacent", "adjacent_")):
            assert row[f"{prefix}ci_low"] <= row[name] <= row[f"{prefix}ci_high"], (criterion, name)
        assert row["ci_low"] < row["ci_high"]


def test_the_reviewers_alpha_matches_the_krippendorff_package(reviewed):
    t, _judge, reviews = reviewed
    rows = {r["criterion"]: r for r in reviewer_ceiling(t, resamples=300).to_dicts()}
    for criterion in CRITERIA:
        data = np.array([[np.nan if g is None else g[criterion] for g in given] for given in reviews.values()])
        want = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
        row = rows[criterion]
        # ann reviewed all 40: bob's first 30 are shared, and the 4 of cy's past them
        assert (row["reviewers"], row["items"], row["state"], row["level"]) == (3, 34, "ok", "interval")
        assert row["alpha"] == pytest.approx(want)
        assert row["ci_low"] <= row["alpha"] <= row["ci_high"]


def test_too_few_reviews_is_a_state_with_no_statistic(tmp_path):
    judge = [{"quality": 1 + i % 5} for i in range(20)]
    t = load_run(graded_run(tmp_path / "r", judge, {"ann": [g if i < 6 else None for i, g in enumerate(judge)]}))
    row = human_agreement(t, resamples=100).filter(criterion="quality").row(0, named=True)
    assert (row["state"], row["n"], row["items"]) == ("not_enough_reviews", 6, 6)
    assert all(row[k] is None for k in ("kappa", "ci_low", "exact", "adjacent_ci_high"))
    assert row["note"] == "6 answer(s) reviewed blind; at least 10 are needed (min_reviews)"
    assert human_agreement(t, resamples=100, min_reviews=5).filter(criterion="quality")["state"][0] == "ok"
    ceiling = reviewer_ceiling(t, resamples=100).filter(criterion="quality").row(0, named=True)
    assert ceiling["state"] == "not_enough_reviews" and ceiling["alpha"] is None and "one reviewer" in ceiling["note"]


def test_a_judge_nobody_reviewed_still_has_its_rows(tmp_path):
    judge = [{"quality": 1 + i % 5} for i in range(12)]
    t = load_run(graded_run(tmp_path / "r", judge, {}))
    table = human_agreement(t, resamples=100)
    assert table["criterion"].to_list() == ["composite", "quality"]
    assert set(table["state"]) == {"not_enough_reviews"} and (table["n"] == 0).all()
    assert table["note"][0].startswith("no blind human review of its judgments")
    ja = judge_agreement(t, resamples=100)
    assert ja.reviews == 0 and ja.confusions == {} and ja.bias.is_empty() and ja.ceiling.is_empty()


def test_every_grade_the_same_is_undefined_with_exact_agreement_kept(tmp_path):
    judge = [{"quality": 4} for _ in range(12)]
    t = load_run(graded_run(tmp_path / "r", judge, {"ann": judge}))
    row = human_agreement(t, resamples=100).filter(criterion="quality").row(0, named=True)
    assert row["state"] == "undefined" and np.isnan(row["kappa"]) and row["ci_low"] is None
    assert row["exact"] == 1.0 and row["note"] == "kappa n/a: every grade is 4, so agreement beyond chance is undefined"


def test_confusion_and_bias_by_level_count_the_pairs(tmp_path):
    """The judge gives one point more than the human below 4 and agrees from 4 up: bias +1 then 0."""
    human = [{"quality": 1 + i % 5} for i in range(25)]
    judge = [{"quality": h["quality"] + 1 if h["quality"] < 4 else h["quality"]} for h in human]
    t = load_run(graded_run(tmp_path / "r", judge, {"ann": human}))
    m = confusion(t, "j", "quality")
    assert m["count"].sum() == 25
    assert {(r["judge_score"], r["human_score"]): r["count"] for r in m.to_dicts()} == {
        (2.0, 1.0): 5, (3.0, 2.0): 5, (4.0, 3.0): 5, (4.0, 4.0): 5, (5.0, 5.0): 5}
    bias = bias_by_level(t, resamples=100).filter(criterion="quality")
    assert bias["human_score"].to_list() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert bias["mean_bias"].to_list() == [1.0, 1.0, 1.0, 0.0, 0.0] and (bias["n"] == 5).all()
    assert bias["ci_low"].to_list() == bias["mean_bias"].to_list() == bias["ci_high"].to_list()  # no spread


def test_pairs_of_one_item_are_resampled_together():
    """A second reviewer who repeats the first adds pairs, not information: the interval does not narrow."""
    rng = np.random.default_rng(3)
    x = rng.integers(1, 6, 30)
    y = noisy(x, rng, 0.5)
    items = np.arange(30)
    once = agreement_draws(x, y, items, weights="quadratic", within=np.abs(x - y) <= 1, resamples=500)
    twice = agreement_draws(np.r_[x, x], np.r_[y, y], np.r_[items, items], weights="quadratic",
                            within=np.tile(np.abs(x - y) <= 1, 2), resamples=500)
    assert np.allclose(once.kappa, twice.kappa) and np.allclose(once.exact, twice.exact)
    as_pairs = agreement_draws(np.r_[x, x], np.r_[y, y], np.arange(60), weights="quadratic", resamples=500)
    lo, hi = once.interval("kappa")
    lo2, hi2 = as_pairs.interval("kappa")
    assert hi2 - lo2 < 0.85 * (hi - lo)  # resampled one by one, the duplicated pairs would look like more data


def test_kappa_of_counts_is_cohen_kappa_of_the_pairs():
    rng = np.random.default_rng(5)
    x, y = rng.integers(1, 6, 50), rng.integers(1, 6, 50)
    counts = np.zeros((5, 5))
    np.add.at(counts, (x - 1, y - 1), 1)
    values = np.arange(1, 6, dtype=float)
    for weights, w in (("quadratic", (values[:, None] - values) ** 2), (None, 1 - np.eye(5))):
        assert kappa_of_counts(counts, w) == pytest.approx(cohen_kappa_score(x, y, weights=weights))


def _population_kappa(p: np.ndarray) -> float:
    """Quadratic kappa of a joint distribution of two raters' grades 1..k (rows the first rater)."""
    k = p.shape[0]
    w = (np.arange(k)[:, None] - np.arange(k)) ** 2
    return float(1 - (w * p).sum() / (w * np.outer(p.sum(1), p.sum(0))).sum())


def test_the_intervals_cover_the_true_kappa_and_agreement():
    """200 samples of 60 reviewed answers from a known joint distribution: each 95% interval covers the
    population's kappa and exact agreement in about 95% of them (a percentile bootstrap runs a little short at
    this size: 88% is the floor, and 99% the ceiling, which an interval too wide would pass)."""
    rng = np.random.default_rng(11)
    human = np.array([0.15, 0.2, 0.3, 0.2, 0.15])
    move = np.array([[0.7, 0.2, 0.1, 0, 0], [0.15, 0.6, 0.2, 0.05, 0], [0, 0.2, 0.6, 0.2, 0],
                     [0, 0.05, 0.2, 0.6, 0.15], [0, 0, 0.1, 0.2, 0.7]])
    joint = (human[:, None] * move).T  # rows: the judge's grade; columns: the human's
    true_kappa, true_exact = _population_kappa(joint), float(np.trace(joint))
    covered = {"kappa": 0, "exact": 0}
    flat = joint.ravel() / joint.sum()
    for trial in range(200):
        cells = rng.choice(25, size=60, p=flat)
        x, y = cells // 5 + 1, cells % 5 + 1
        draws = agreement_draws(x, y, np.arange(60), weights="quadratic", resamples=400, seed=trial)
        for name, truth in (("kappa", true_kappa), ("exact", true_exact)):
            lo, hi = draws.interval(name)
            covered[name] += lo <= truth <= hi
    assert 0.88 <= covered["kappa"] / 200 <= 0.99, covered
    assert 0.88 <= covered["exact"] / 200 <= 0.99, covered


def test_only_blind_reviews_count_and_the_others_are_counted_as_left_out(reviewed, tmp_path):
    """bob saved his reviews with the judges shown: every statistic is ann's alone, the same as a run without bob,
    and the rows say how many pairs were left out (a reviewer who saw the grade is anchored on it)."""
    _t, judge, reviews = reviewed
    both = load_run(graded_run(tmp_path / "both", judge, {"ann": reviews["ann"], "bob": reviews["bob"]},
                               shown=frozenset({"bob"})))
    alone = load_run(graded_run(tmp_path / "alone", judge, {"ann": reviews["ann"]}))
    got, want = (human_agreement(t, resamples=200).filter(criterion="quality").row(0, named=True)
                 for t in (both, alone))
    assert {k: v for k, v in got.items() if k not in ("note", "not_blind")} == {
        k: v for k, v in want.items() if k not in ("note", "not_blind")}
    assert (got["not_blind"], want["not_blind"], want["note"]) == (30, 0, None)
    assert got["note"] == "30 pair(s) from reviews saved with the judges shown were left out (only blind reviews count)"
    ja = judge_agreement(both, resamples=100)
    assert (ja.reviews, ja.not_blind) == (40, 30)
    assert reviewer_ceiling(both, resamples=100).filter(criterion="quality")["state"][0] == "not_enough_reviews"
    only_shown = load_run(graded_run(tmp_path / "shown", judge, {"bob": reviews["bob"]}, shown=frozenset({"bob"})))
    row = human_agreement(only_shown, resamples=100).filter(criterion="quality").row(0, named=True)
    assert (row["state"], row["n"], row["not_blind"]) == ("not_enough_reviews", 0, 30)
    assert "blind reviews" in row["note"]


def test_min_reviews_applies_to_the_ceiling_the_confusions_and_the_bias(reviewed):
    t, _judge, _reviews = reviewed
    ja = judge_agreement(t, resamples=100, min_reviews=41)
    assert set(ja.agreement["state"]) == {"not_enough_reviews"}
    assert ja.confusions == {} and ja.bias.is_empty()
    assert set(ja.ceiling["state"]) == {"not_enough_reviews"}  # 34 answers reviewed by two or more, 41 needed
    assert set(judge_agreement(t, resamples=100, min_reviews=34).ceiling["state"]) == {"ok"}
