"""The human-calibrated leaderboard (PPI++) and the reviews it asks for: valid under a biased judge, about as
wide as the reviews alone under a useless one, honest with too few reviews, and its reviews to halve the interval."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from bench.analysis.calibrated import calibrated_leaderboard, ppi_mean, reviews_to_halve
from bench.analysis.tables import COMPOSITE, REVIEW_SCHEMA, SCORE_SCHEMA


def _frames(judge_scores: np.ndarray, human: dict[int, float], cell: str = "m/p@v1", judge: str = "j"):
    """The scores frame of one judge and cell, and reviews of the judgments indexed by ``human``."""
    n = len(judge_scores)
    scores = pl.DataFrame({"judge": [judge] * n, "cell": [cell] * n, "judgment": [f"{cell}-j{i}" for i in range(n)],
                           "criterion": [COMPOSITE] * n, "value": judge_scores.astype(float).tolist()})
    scores = scores.with_columns(*(pl.lit(None, dtype).alias(c) for c, dtype in SCORE_SCHEMA.items()
                                   if c not in scores.columns)).select(list(SCORE_SCHEMA))
    reviews = pl.DataFrame({"judgment": [f"{cell}-j{i}" for i in human], "reviewer": ["r"] * len(human),
                            "criterion": [COMPOSITE] * len(human), "value": [float(v) for v in human.values()],
                            "verdict": [None] * len(human), "created_at": ["2026-11-23T00:00:00Z"] * len(human)},
                           schema=REVIEW_SCHEMA)
    return scores, reviews


def _biased_cell(seed: int, n: int = 2000, reviewed: int = 200, bias: float = 0.8, noise: float = 0.3):
    rng = np.random.default_rng(seed)
    human = rng.normal(3.0, 0.8, n)  # the truth the leaderboard should find: mean 3.0
    judge = human + bias + rng.normal(0, noise, n)
    picked = rng.choice(n, reviewed, replace=False)
    return judge, {int(i): human[i] for i in picked}


def test_the_calibrated_interval_covers_the_truth_where_the_judge_alone_misses_it():
    judge, human = _biased_cell(1)
    [row] = calibrated_leaderboard(*_frames(judge, human)).iter_rows(named=True)
    assert not row["judge_only_ci_low"] <= 3.0 <= row["judge_only_ci_high"], "the biased judge misses the truth"
    assert row["ci_low"] <= 3.0 <= row["ci_high"]
    assert row["ci_high"] - row["ci_low"] < 0.6 * (row["human_only_ci_high"] - row["human_only_ci_low"]), \
        "a judge that tracks the humans narrows the interval"
    assert 0.5 < row["lam"] <= 1 and row["n"] == 2000 and row["n_human"] == 200


def test_coverage_over_repetitions_holds_at_the_nominal_level():
    hits = 0
    for seed in range(200):
        judge, human = _biased_cell(seed, n=600, reviewed=40)
        [row] = calibrated_leaderboard(*_frames(judge, human)).iter_rows(named=True)
        hits += row["ci_low"] <= 3.0 <= row["ci_high"]
    assert hits / 200 >= 0.9


def test_a_useless_judge_gives_about_the_human_only_interval():
    rng = np.random.default_rng(7)
    judge = rng.normal(0, 5, 500)  # pure noise, unrelated to the humans
    human = {i: float(v) for i, v in zip(range(0, 500, 10), rng.normal(3, 1, 50))}
    [row] = calibrated_leaderboard(*_frames(judge, human)).iter_rows(named=True)
    width = row["ci_high"] - row["ci_low"]
    assert width <= 1.1 * (row["human_only_ci_high"] - row["human_only_ci_low"])
    assert row["estimate"] == pytest.approx(row["human_only"], abs=0.05)
    assert "human-only" in row["note"] or row["lam"] < 0.1


def test_too_few_reviews_give_no_estimate_and_say_so():
    judge, _ = _biased_cell(3, n=50, reviewed=5)
    for human in ({}, {0: 3.0}):
        [row] = calibrated_leaderboard(*_frames(judge, human)).iter_rows(named=True)
        assert row["estimate"] is None and row["ci_low"] is None
        assert row["note"].startswith("not enough reviews") and row["n_human"] == len(human)
        assert row["judge_only"] == pytest.approx(float(judge.mean()))


def test_reviews_to_halve_follow_the_variance_formula():
    judge, human = _biased_cell(5, n=5000, reviewed=50)
    y = np.array(list(human.values()))
    f = judge[list(human)]
    g = np.delete(judge, list(human))
    p = ppi_mean(y, f, g)
    more = reviews_to_halve(p, len(y))
    assert more is not None and more > 0
    # with n + more reviews of the same residual spread, the standard error is (about) half
    se_then = (p.judge_part + p.human_part * len(y) / (len(y) + more)) ** 0.5
    assert se_then == pytest.approx(p.se / 2, rel=0.02)
    stuck = ppi_mean(y, f, g[:30])  # few judged items: the judge term dominates, reviews alone cannot halve it
    assert reviews_to_halve(stuck, len(y)) is None or stuck.judge_part * 4 < stuck.se ** 2


def test_each_judge_and_cell_gets_its_own_row():
    a = _frames(*_biased_cell(8, n=100, reviewed=10), cell="a/p@v1")
    b = _frames(*_biased_cell(9, n=100, reviewed=10), cell="b/p@v1", judge="k")
    board = calibrated_leaderboard(pl.concat([a[0], b[0]]), pl.concat([a[1], b[1]]))
    assert board.select("judge", "cell").rows() == [("j", "a/p@v1"), ("k", "b/p@v1")]


def _judgments_frame(scores: pl.DataFrame) -> pl.DataFrame:
    """The judgments frame holding the same composite scores as a scores frame."""
    from bench.analysis.tables import JUDGMENT_SCHEMA  # noqa: PLC0415 (one test's need)

    head = scores.select(pl.col("judgment").alias("id"), "judge", "cell",
                         pl.coalesce("candidate", "judgment").alias("candidate"), pl.col("value").alias("score"),
                         pl.lit("rubric").alias("mode"))
    return head.with_columns(*(pl.lit(None, dtype).alias(c) for c, dtype in JUDGMENT_SCHEMA.items()
                               if c not in head.columns)).select(list(JUDGMENT_SCHEMA))


def test_the_judgments_frame_gives_the_same_board_as_the_scores_frame():
    scores, reviews = _frames(*_biased_cell(12, n=300, reviewed=30))
    assert calibrated_leaderboard(_judgments_frame(scores), reviews).equals(calibrated_leaderboard(scores, reviews))
    with pytest.raises(ValueError, match="criterion 'accuracy' needs the long scores frame"):
        calibrated_leaderboard(_judgments_frame(scores), reviews, criterion="accuracy")


def test_a_judges_repeats_of_one_answer_count_as_one_answer_not_three():
    judge, human = _biased_cell(13, n=300, reviewed=30)
    once, reviews = _frames(judge, human)
    once = once.with_columns(pl.col("judgment").alias("candidate"))
    # the same judge grading every answer three times (distinct judgments, same candidate), one review each
    thrice = pl.concat([once.with_columns((pl.col("judgment") + f"#{r}").alias("judgment"), pl.lit(r).alias("repeat"))
                        for r in range(3)])
    reviewed = reviews.with_columns(pl.col("judgment") + "#1")
    a = calibrated_leaderboard(once, reviews).row(0, named=True)
    b = calibrated_leaderboard(thrice, reviewed).row(0, named=True)
    assert (b["n"], b["n_human"]) == (300, 30)
    for key in ("estimate", "ci_low", "ci_high", "judge_only_ci_low", "judge_only_ci_high"):
        assert b[key] == pytest.approx(a[key]), key


def test_a_review_calibrates_every_judge_of_the_same_rubric_version_on_that_answer():
    judge, human = _biased_cell(14, n=200, reviewed=20)
    base, reviews = _frames(judge, human)
    base = base.with_columns(pl.col("judgment").alias("candidate"), pl.lit("tip@1").alias("rubric"))
    other = base.with_columns(pl.lit("k").alias("judge"), pl.col("judgment") + "-k", pl.col("value") - 1)
    elsewhere = base.with_columns(pl.lit("m").alias("judge"), pl.col("judgment") + "-m", pl.lit("tip@2").alias("rubric"))
    board = {r["judge"]: r for r in calibrated_leaderboard(pl.concat([base, other, elsewhere]), reviews)
             .iter_rows(named=True)}  # the reviews were saved on judge j's judgments only
    assert board["j"]["n_human"] == board["k"]["n_human"] == 20
    assert board["k"]["human_only"] == pytest.approx(board["j"]["human_only"])
    assert board["m"]["n_human"] == 0, "another rubric version's grades are not calibrated by these reviews"
