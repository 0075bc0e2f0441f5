"""bench.analysis statistics against known truths: CI coverage, paired tests, Bradley–Terry recovery,
kappa and alpha against hand-computed and published values, win rates and position consistency."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from bench.analysis import (bradley_terry, cohen_kappa, holm, krippendorff_alpha, leaderboard, paired_differences,
                            position_consistency, win_rates)
from bench.analysis.pairwise import fit_bradley_terry

# A 1–5 grade distribution with an exactly known mean: 1·.1 + 2·.2 + 3·.3 + 4·.25 + 5·.15 = 3.15.
LEVELS, PROBS, TRUE_MEAN = np.arange(1, 6), np.array([0.1, 0.2, 0.3, 0.25, 0.15]), 3.15


def long_scores(values: dict[str, np.ndarray], criterion: str = "composite", judge: str = "j") -> pl.DataFrame:
    """A long score table: one row per (cell, scenario index) with the given values."""
    rows = []
    for cell, vals in values.items():
        model, prompt = cell.split("/")
        for s, v in enumerate(vals):
            rows.append((judge, "jm", "r@1", "rubric", cell, model, prompt, f"s{s:04d}", 0, f"{cell}:{s}",
                         f"j:{cell}:{s}", criterion, float(v)))
    return pl.DataFrame(rows, orient="row", schema=["judge", "judge_model", "rubric", "mode", "cell", "model", "prompt",
                                                     "scenario", "sample", "candidate", "judgment", "criterion",
                                                     "value"])


def test_bootstrap_ci_covers_the_true_mean_at_about_the_nominal_rate():
    rng = np.random.default_rng(11)
    reps, covered = 300, 0
    for rep in range(reps):
        board = leaderboard(long_scores({"m/p@v1": rng.choice(LEVELS, size=40, p=PROBS)}), resamples=1000, seed=rep)
        row = board.row(0, named=True)
        covered += row["ci_low"] <= TRUE_MEAN <= row["ci_high"]
    assert 0.90 <= covered / reps <= 0.98, f"95% intervals covered the true mean in {covered}/{reps} repetitions"


def test_leaderboard_means_ns_and_samples_averaged_per_scenario():
    frame = long_scores({"a/p@v1": [1, 2, 3, 4], "b/p@v1": [5, 5, 5]})
    extra = frame.filter(pl.col("scenario") == "s0000").with_columns(pl.lit(5.0).alias("value"), pl.lit(1, dtype=pl.Int64).alias("sample"))
    board = leaderboard(pl.concat([frame, extra]), resamples=200)
    a = board.filter(pl.col("cell") == "a/p@v1").row(0, named=True)
    # s0000 has samples 1 and 5 -> 3, then (3 + 2 + 3 + 4) / 4 = 3.0; every scenario counts once
    assert a["mean"] == pytest.approx(3.0) and a["n"] == 4 and a["items"] == 5
    b = board.filter(pl.col("cell") == "b/p@v1").row(0, named=True)
    assert (b["mean"], b["ci_low"], b["ci_high"], b["n"]) == (5.0, 5.0, 5.0, 3)
    assert board["cell"].to_list() == ["b/p@v1", "a/p@v1"]  # best first
    assert leaderboard(frame, resamples=200, seed=3).equals(leaderboard(frame, resamples=200, seed=3))  # seeded


def test_paired_difference_detects_a_real_gain_and_holds_its_size_under_the_null():
    rng = np.random.default_rng(5)
    base = rng.choice(LEVELS, size=60, p=PROBS).astype(float)
    better = np.clip(base + rng.choice([0, 1], size=60, p=[0.4, 0.6]), 1, 5)
    out = paired_differences(long_scores({"m/tip@v1": base, "m/tip@v2": better}), resamples=1000)
    row = out.row(0, named=True)
    assert (row["a"], row["b"]) == ("m/tip@v1", "m/tip@v2")
    assert row["diff"] == pytest.approx(float(np.mean(base - better)))
    assert row["ci_high"] < 0 and row["p_value"] < 0.001 and row["b_wins"] > row["a_wins"]
    rejections = 0
    for rep in range(120):  # two cells drawn from one distribution: p < .05 about 5% of the time
        x, y = rng.choice(LEVELS, size=30, p=PROBS), rng.choice(LEVELS, size=30, p=PROBS)
        p = paired_differences(long_scores({"m/p@v1": x, "m/p@v2": y}), resamples=10,
                               permutations=2000, seed=rep)["p_value"][0]
        rejections += p < 0.05
    assert rejections / 120 <= 0.11, f"{rejections}/120 false rejections at the 5% level"


def test_paired_differences_compare_prompts_within_a_model_only_and_holm_adjusts():
    rng = np.random.default_rng(2)
    cells = {f"{m}/tip@{v}": rng.choice(LEVELS, size=20, p=PROBS) for m in ("m1", "m2") for v in ("v1", "v2")}
    every = paired_differences(long_scores(cells), resamples=50, permutations=500)
    prompts = paired_differences(long_scores(cells), compare="prompts", resamples=50, permutations=500)
    assert every.height == 6
    assert sorted(zip(prompts["a"], prompts["b"])) == [("m1/tip@v1", "m1/tip@v2"), ("m2/tip@v1", "m2/tip@v2")]
    assert (every["p_holm"] >= every["p_value"]).all()
    assert holm(np.array([0.01, 0.04, 0.03, np.nan])).tolist()[:3] == pytest.approx([0.03, 0.06, 0.06])
    with pytest.raises(ValueError, match="compare must be"):
        paired_differences(long_scores(cells), compare="judges")


def simulated_battles(strengths: dict[str, float], n: int, seed: int, ties: float = 0.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    names = list(strengths)
    rows = []
    for k in range(n):
        a, b = rng.choice(len(names), size=2, replace=False)
        p = 1 / (1 + math.exp(strengths[names[b]] - strengths[names[a]]))
        outcome = 0.5 if rng.random() < ties else float(rng.random() < p)
        verdict = {1.0: "A>B", 0.5: "A=B", 0.0: "B>A"}[outcome]
        rows.append(("j", f"s{k}", 0, names[a], names[b], "AB", verdict, verdict, outcome, False))
    return pl.DataFrame(rows, orient="row", schema=["judge", "scenario", "sample", "a", "b", "order", "verdict",
                                                     "shown_verdict", "outcome", "strong"])


def test_bradley_terry_recovers_known_strengths_with_covering_intervals():
    truth = {"m0": -1.2, "m1": -0.5, "m2": 0.0, "m3": 0.4, "m4": 1.3}
    ratings = bradley_terry(simulated_battles(truth, 4000, seed=1), resamples=200, anchor="m2", base=0.0,
                            scale=math.log(10))  # scale ln(10): ratings are natural-log strengths
    got = dict(zip(ratings["cell"], ratings["rating"]))
    assert list(ratings["cell"]) == ["m4", "m3", "m2", "m1", "m0"]
    for name, value in truth.items():
        assert got[name] == pytest.approx(value, abs=0.12), (name, got[name], value)
    inside = sum(lo <= truth[c] <= hi for c, lo, hi in zip(ratings["cell"], ratings["ci_low"], ratings["ci_high"]))
    assert inside >= 4 and got["m2"] == 0.0


def test_bradley_terry_stays_finite_for_a_player_that_never_lost():
    i, j = np.array([0, 0, 1]), np.array([1, 2, 2])
    logs = fit_bradley_terry(i, j, np.array([1.0, 1.0, 0.5]), np.ones(3), 3)
    assert np.isfinite(logs).all() and logs[0] > logs[1] and logs[0] > logs[2]


def test_win_rates_count_ties_half_and_weight_strong_verdicts():
    rows = [("j", "s1", 0, "x", "base", "AB", "A>>B", "A>>B", 1.0, True),
            ("j", "s1", 0, "x", "base", "BA", "A>B", "B>A", 1.0, False),
            ("j", "s2", 0, "x", "base", "AB", "A=B", "A=B", 0.5, False),
            ("j", "s2", 0, "x", "base", "BA", "B>A", "A>B", 0.0, False)]
    b = pl.DataFrame(rows, orient="row", schema=["judge", "scenario", "sample", "a", "b", "order", "verdict",
                                                  "shown_verdict", "outcome", "strong"])
    plain = win_rates(b, resamples=100).row(0, named=True)
    assert (plain["cell"], plain["baseline"]) == ("x", "base")  # "auto": the cell in every battle
    assert plain["win_rate"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert (plain["wins"], plain["ties"], plain["losses"]) == (2, 1, 1)
    weighted = win_rates(b, strong_weight=3, resamples=100).row(0, named=True)
    assert weighted["win_rate"] == pytest.approx((3 + 1 + 0.5 + 0) / 6)
    pos = position_consistency(b).row(0, named=True)
    # s1: A wins in both orders (consistent); s2: tie then loss (inconsistent). Decisive verdicts: s1 AB
    # (first shown won), s1 BA (A shown second won: first lost), s2 BA (B shown first won).
    assert (pos["pairs"], pos["consistency"]) == (2, 0.5)
    assert pos["first_position_wins"] == pytest.approx(2 / 3)


def test_cohen_kappa_against_hand_computed_cases():
    # Wikipedia's example: 50 items, yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> po .7, pe .5, kappa .4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # a = 1 2 3 1, b = 1 3 3 2. Nominal: po = 1/2, pe = .5·.25 + .25·.25 + .25·.5 = .3125 -> 3/11.
    # Linear: observed Σ|d| = 2/4 = .5, expected 1.0 -> .5. Quadratic: observed .5, expected 1.625 -> 9/13.
    x, y = [1, 2, 3, 1], [1, 3, 3, 2]
    assert cohen_kappa(x, y) == pytest.approx(3 / 11)
    assert cohen_kappa(x, y, "linear") == pytest.approx(0.5)
    assert cohen_kappa(x, y, "quadratic") == pytest.approx(9 / 13)
    assert cohen_kappa([1, 2, 3], [1, 2, 3], "quadratic") == 1.0
    assert math.isnan(cohen_kappa([2, 2], [2, 2]))


def test_krippendorff_alpha_against_hand_computed_and_published_values():
    # Two raters, units (1,1), (2,2), (1,2): coincidences o11 = o22 = 2, o12 = o21 = 1; n1 = n2 = 3, n = 6.
    # alpha = 1 - (n - 1)·Σo·δ / Σ n_c·n_k·δ = 1 - 5·2 / 18 = 4/9.
    assert krippendorff_alpha([[1, 1], [2, 2], [1, 2]], "nominal") == pytest.approx(4 / 9)
    assert krippendorff_alpha([[1, 1], [3, 3], [2, 2]], "interval") == 1.0
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, missing data.
    nan = float("nan")
    data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
                     [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
                     [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
                     [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]).T
    published = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    for level, value in published.items():
        assert krippendorff_alpha(data, level) == pytest.approx(value, abs=5e-4), level
    with pytest.raises(ValueError, match="level must be"):
        krippendorff_alpha(data, "cardinal")


def test_position_consistency_compares_the_two_orders_of_one_repeat_not_repeats_with_each_other():
    # a judge with repeats: 2 agrees with itself across orders in each repeat, but its repeats differ
    # (repeat 0 says A wins, repeat 1 says B wins). That is test-retest noise, not position bias.
    rows = [("j", "s1", 0, "x", "y", "AB", "A>B", "A>B", 1.0, False, 0),
            ("j", "s1", 0, "x", "y", "BA", "A>B", "B>A", 1.0, False, 0),
            ("j", "s1", 0, "x", "y", "AB", "B>A", "B>A", 0.0, False, 1),
            ("j", "s1", 0, "x", "y", "BA", "B>A", "A>B", 0.0, False, 1)]
    b = pl.DataFrame(rows, orient="row", schema=["judge", "scenario", "sample", "a", "b", "order", "verdict",
                                                  "shown_verdict", "outcome", "strong", "repeat"])
    pos = position_consistency(b).row(0, named=True)
    assert (pos["pairs"], pos["consistency"]) == (2, 1.0)
