"""Judge stability from `repeats: k`: a steady judge is called stable and a noisy one unstable, the noisy
judge's leaderboard intervals widen, and a judge graded once says it cannot tell."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from bench.analysis.judge_stability import icc_oneway, item_variance, judge_stability, stability_leaderboard
from bench.analysis.tables import COMPOSITE, SCORE_SCHEMA


def _scores(judge: str, noise: float, repeats: int, items: int = 60, seed: int = 0) -> pl.DataFrame:
    """Items with a true score spread over 1-5, each graded ``repeats`` times with Gaussian ``noise``."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(1, 5, items)
    rows = [{"judge": judge, "cell": f"m{i % 2}/p@v1", "scenario": f"s{i // 2}", "candidate": f"c{i}",
             "judgment": f"{judge}-c{i}-{r}", "criterion": COMPOSITE, "repeat": r,
             "value": float(truth[i] + rng.normal(0, noise))} for i in range(items) for r in range(repeats)]
    return pl.DataFrame([{k: row.get(k) for k in SCORE_SCHEMA} for row in rows], schema=SCORE_SCHEMA, orient="row")


def test_a_steady_judge_is_stable_and_a_noisy_one_is_not():
    table = judge_stability(pl.concat([_scores("steady", 0.1, 3), _scores("noisy", 2.0, 3)]))
    rows = {r["judge"]: r for r in table.iter_rows(named=True)}
    assert rows["steady"]["icc"] > 0.95 and rows["steady"]["verdict"] == "stable"
    assert rows["noisy"]["icc"] < 0.5 and rows["noisy"]["verdict"] == "unstable"
    assert rows["steady"]["alpha"] == pytest.approx(rows["steady"]["icc"], abs=0.05)
    assert rows["noisy"]["within_var"] == pytest.approx(4.0, rel=0.3)
    assert rows["steady"]["items"] == 60 and rows["steady"]["repeats"] == 3


def test_icc_matches_the_anova_definition():
    groups = [np.array([1.0, 2.0]), np.array([3.0, 3.0, 4.0]), np.array([5.0, 4.0])]
    k = np.array([2, 3, 2.0])
    grand = np.concatenate(groups).mean()
    msb = (k * (np.array([g.mean() for g in groups]) - grand) ** 2).sum() / 2
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (7 - 3)
    n0 = (7 - (k ** 2).sum() / 7) / 2
    assert icc_oneway(groups) == pytest.approx((msb - msw) / (msb + (n0 - 1) * msw))


def test_a_judge_graded_once_says_it_cannot_tell():
    [row] = judge_stability(_scores("once", 0.5, 1)).iter_rows(named=True)
    assert row["verdict"] == "not enough repeats" and row["icc"] is None and row["repeats"] == 1


def test_the_noisy_judges_intervals_widen_and_a_perfect_judges_do_not():
    noisy = stability_leaderboard(_scores("noisy", 2.0, 3, items=200), resamples=400)
    exact = stability_leaderboard(_scores("exact", 0.0, 3, items=200), resamples=400)
    assert (noisy["widening"] > 1.1).all()
    assert exact["widening"].to_list() == pytest.approx([1.0, 1.0], abs=1e-9)
    for row in noisy.iter_rows(named=True):
        assert row["widened_ci_low"] < row["mean"] < row["widened_ci_high"]


def test_item_variance_lists_the_answers_the_judge_graded_least_consistently_first():
    scores = _scores("j", 0.1, 3, items=20)
    # one answer graded 1, 5, 3 by the same judge: the one to read before trusting its grade
    wobbly = pl.col("candidate") == "c7"
    scores = scores.with_columns(pl.when(wobbly).then(pl.col("repeat").replace_strict({0: 1.0, 1: 5.0, 2: 3.0},
                                                                                     return_dtype=pl.Float64))
                                 .otherwise(pl.col("value")).alias("value"))
    table = item_variance(pl.concat([scores, _scores("once", 0.1, 1, items=20)]), top=5)
    first = table.row(0, named=True)
    assert (first["judge"], first["candidate"], first["repeats"]) == ("j", "c7", 3)
    assert (first["mean"], first["variance"], first["min"], first["max"]) == (3.0, 4.0, 1.0, 5.0)
    assert table.height == 5 and table["variance"].is_sorted(descending=True)
    assert "once" not in table["judge"].to_list()  # graded once: no variance to list
