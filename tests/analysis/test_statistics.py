"""Statistics that never mislead (issue 14, point 6): bench.analysis agrees with scikit-learn, krippendorff,
choix, statsmodels, scipy and exact enumeration on valid input, and at the edges it says what it did (drops
and counts missing ratings, names its prior) or refuses with a ValueError that names the problem."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

import bench.analysis as analysis
from bench.analysis import (battles, bootstrap_means, bradley_terry, cohen_kappa, complete_pairs, fit_bradley_terry,
                            holm, inter_judge, judge_health, judge_vs_human, jury_alpha, krippendorff_alpha,
                            leaderboard, packed_vs_single, paired_differences, percentile_interval,
                            position_consistency, sign_flip_pvalues, usage_by_cell, usage_by_judge, win_matrix,
                            win_rates)
from bench.analysis.bootstrap import bootstrap_ratios
from bench.analysis.pairwise import BATTLE_SCHEMA
from bench.analysis.reliability import disagreements
from bench.analysis.tables import JUDGMENT_SCHEMA, REVIEW_SCHEMA, SCORE_SCHEMA

NAN = float("nan")


def frame(schema: dict, rows: list[dict]) -> pl.DataFrame:
    """A frame of ``schema`` from partial rows (absent columns are null)."""
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


def random_battles(seed: int, players: int = 5, n: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Battles (i, j, i's outcome 0/½/1, weight 1 or 3 for a strong verdict) among players of spread strengths."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.0, 1.0, players)
    i = rng.integers(0, players, n)
    j = (i + rng.integers(1, players, n)) % players  # never i itself
    p = 1 / (1 + np.exp(theta[j] - theta[i]))
    u = rng.random(n)
    score = np.where(u < 0.15, 0.5, (rng.random(n) < p).astype(float))
    weight = np.where(rng.random(n) < 0.1, 3.0, 1.0)
    return i, j, score, weight


def as_choix_data(i, j, score, weight, players: int, prior: float) -> list[tuple[int, int]]:
    """The same likelihood as whole (winner, loser) comparisons for choix: every count doubled (ties and the
    prior are halves), a tie a win each way, and ``prior`` virtual wins each way for every pair that met."""
    data: list[tuple[int, int]] = []
    for a, b, s, w in zip(i, j, score, weight):
        data += [(int(a), int(b))] * round(2 * w * s) + [(int(b), int(a))] * round(2 * w * (1 - s))
    met = {tuple(sorted((int(a), int(b)))) for a, b in zip(i, j)}
    for a, b in sorted(met):
        data += [(a, b), (b, a)] * round(2 * prior)
    return data


# --- agreement with the reference libraries on valid input ---------------------------------------------------


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_scikit_learn(weights):
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.integers(1, 6, 60)
        b = np.clip(a + rng.integers(-2, 3, 60), 1, 5)
        # scikit-learn weights by the position in ``labels``: listing every level of the 1–5 scale makes the
        # position the value, so the two agree even when a level is unused (as here when 3 is dropped)
        for x, y in ((a, b), (np.where(a == 3, 4, a), np.where(b == 3, 2, b))):
            want = cohen_kappa_score(x, y, weights=weights, labels=[1, 2, 3, 4, 5])
            assert cohen_kappa(x, y, weights) == pytest.approx(want, abs=1e-12)
    verdicts = rng.choice(["A>B", "A=B", "B>A"], size=(2, 80))
    assert cohen_kappa(*verdicts) == pytest.approx(cohen_kappa_score(*verdicts), abs=1e-12)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_matches_the_krippendorff_package_transposed(level):
    import krippendorff

    rng = np.random.default_rng(8)
    for _ in range(10):
        truth = rng.integers(1, 6, 40)
        x = np.clip(truth[:, None] + rng.integers(-1, 2, (40, 4)), 1, 5).astype(float)  # units × raters
        x[rng.random(x.shape) < 0.2] = NAN  # missing ratings
        want = krippendorff.alpha(reliability_data=x.T, level_of_measurement=level)  # raters × units
        assert krippendorff_alpha(x, level) == pytest.approx(want, abs=1e-10)
    # Krippendorff's (2011) example, as published (observers × units) and as bench takes it (units × observers)
    published = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
                          [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
                          [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
                          [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN]])
    assert krippendorff_alpha(published.T, level) == pytest.approx(
        krippendorff.alpha(reliability_data=published, level_of_measurement=level), abs=1e-10)


@pytest.mark.parametrize("prior", [0.5, 2.0, 0.0])
def test_bradley_terry_matches_choix_with_the_prior_as_virtual_comparisons(prior):
    """choix's own ``alpha`` is a different regularization (it adds alpha to each player's wins and MM
    denominators, or to every chain rate in ILSR), so bench's prior is given to choix as what it is:
    ``prior`` virtual wins each way per pair that met, with alpha=0. Both then maximize the same strictly
    concave log-likelihood (log-strengths of mean 0, choix's normalization too), so they may differ only by
    where their iterations stop (bench: relative step < 1e-10; choix: L1 step < 1e-10). 1e-6 in
    log-strength, a strength ratio within one part per million, is far above that and far below anything
    that could reorder or visibly move a rating (1e-6 · 400/ln 10 ≈ 0.0002 Elo points)."""
    import choix

    for seed in range(4):
        i, j, score, weight = random_battles(seed)
        ours = fit_bradley_terry(i, j, score, weight, 5, prior=prior)
        data = as_choix_data(i, j, score, weight, 5, prior)
        for theirs in (choix.ilsr_pairwise(5, data, alpha=0.0, tol=1e-10, max_iter=1000),
                       choix.mm_pairwise(5, data, alpha=0.0, tol=1e-10, max_iter=100000)):
            assert list(np.argsort(ours)) == list(np.argsort(theirs))  # the same ranking
            assert np.exp(ours - ours[0]) == pytest.approx(np.exp(theirs - theirs[0]), rel=1e-6)  # strength ratios
            assert ours == pytest.approx(theirs, abs=1e-6)


def test_bradley_terry_elo_ratings_are_choix_strengths_on_the_elo_scale():
    import choix

    i, j, score, weight = random_battles(11, players=4, n=200)
    names = [f"m{k}" for k in range(4)]
    b = frame(BATTLE_SCHEMA, [{"judge": "j", "scenario": f"s{k}", "sample": 0, "a": names[x], "b": names[y],
                               "order": "AB", "outcome": s, "strong": bool(w == 3.0)}
                              for k, (x, y, s, w) in enumerate(zip(i, j, score, weight))])
    ratings = bradley_terry(b, resamples=20, strong_weight=3.0)
    theta = choix.ilsr_pairwise(4, as_choix_data(i, j, score, weight, 4, 0.5), tol=1e-10, max_iter=1000)
    want = 1000.0 + (theta - theta.mean()) * 400.0 / math.log(10)
    got = dict(zip(ratings["cell"], ratings["rating"]))
    assert [got[n] for n in names] == pytest.approx(list(want), abs=1e-3)
    assert ratings["prior"].to_list() == [0.5] * 4


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(4)
    for m in (1, 2, 5, 30):
        p = rng.random(m) ** 3
        p[: m // 3] = p[0]  # ties
        assert holm(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-15)
    p = np.array([0.01, NAN, 0.04, 0.03, NAN, 0.5])  # NaN = no test: left out of the family, stays NaN
    out = holm(p)
    assert np.isnan(out[[1, 4]]).all()
    assert out[[0, 2, 3, 5]] == pytest.approx(multipletests(p[[0, 2, 3, 5]], method="holm")[1])


def test_percentile_interval_and_bootstrap_means_match_numpy_and_scipy():
    from scipy import stats

    rng = np.random.default_rng(6)
    samples = rng.normal(size=(999, 3))
    samples[rng.random(999) < 0.1, 2] = NAN  # resamples where a column had no value: ignored
    lo, hi = percentile_interval(samples, 0.9)
    assert lo == pytest.approx(np.nanpercentile(samples, 5, axis=0)) and hi == pytest.approx(
        np.nanpercentile(samples, 95, axis=0))
    kept = samples[~np.isnan(samples[:, 2]), 2]
    assert (lo[2], hi[2]) == pytest.approx(tuple(stats.scoreatpercentile(kept, [5, 95])))
    # bootstrap means are means of uniform resamples of the scenarios: scipy's percentile bootstrap draws
    # the same indices from the same seeded generator, so the whole interval is the same
    x = rng.integers(1, 6, 40).astype(float)
    ours = percentile_interval(bootstrap_means(x, 2000, seed=5), 0.95)
    theirs = stats.bootstrap((x,), np.mean, n_resamples=2000, method="percentile", confidence_level=0.95,
                             rng=np.random.default_rng(5)).confidence_interval
    assert (float(ours[0]), float(ours[1])) == pytest.approx((theirs.low, theirs.high), abs=1e-12)
    idx = np.random.default_rng(5).integers(0, 40, size=(2000, 40))
    assert bootstrap_means(x, 2000, seed=5) == pytest.approx(x[idx].mean(axis=1), abs=1e-12)


def test_sign_flip_pvalues_match_exact_enumeration_for_small_n():
    """The p-value is a Monte Carlo estimate of the exact two-sided sign-flip p-value (all 2^n sign
    vectors): with R = 200,000 flips its standard error is at most 0.0012, so 0.006 is five of them."""
    rng = np.random.default_rng(9)
    d = np.round(rng.normal(0.4, 1.0, size=(10, 3)), 1)
    d[3, 1] = 0.0  # a tie
    d[[0, 7], 2] = NAN  # unpaired scenarios: the exact test is over the other 8
    got = sign_flip_pvalues(d, permutations=200_000, seed=1)
    for k in range(3):
        x = d[~np.isnan(d[:, k]), k]
        flips = np.array(list(itertools.product([-1.0, 1.0], repeat=x.size)))
        exact = np.mean(np.abs(flips @ x) >= abs(x.sum()) - 1e-9)
        assert got[k] == pytest.approx(exact, abs=0.006), (k, got[k], exact)


# --- edges: say what was done, or refuse with a ValueError that names the problem ---------------------------


def test_cohen_kappa_refuses_missing_ratings_and_complete_pairs_drops_and_counts_them():
    with pytest.raises(ValueError, match="2 of 4 pairs have a missing rating"):
        cohen_kappa([1, 2, NAN, 3], [1, 2, 3, NAN])
    with pytest.raises(ValueError, match="missing rating"):
        cohen_kappa(["A>B", "B>A", None], ["A>B", None, "B>A"])
    a, b, dropped = complete_pairs([1, 2, NAN, 3, 4], [1, 2, 3, NAN, 5])
    assert (a.tolist(), b.tolist(), dropped) == ([1.0, 2.0, 4.0], [1.0, 2.0, 5.0], 2)
    assert cohen_kappa(a, b, "quadratic") == pytest.approx(cohen_kappa([1, 2, 4], [1, 2, 5], "quadratic"))
    assert complete_pairs(["x", None], ["x", "y"])[2] == 1


def test_inter_judge_drops_and_counts_pairs_with_a_missing_grade():
    rows = [{"judge": judge, "rubric": "r@1", "criterion": "a", "candidate": f"c{k}", "value": v}
            for judge, values in (("p", [1, 2, 3, 4, 5]), ("q", [1, 3, 3, None, 5])) for k, v in enumerate(values)]
    row = inter_judge(frame(SCORE_SCHEMA, rows)).row(0, named=True)
    assert (row["n"], row["dropped"]) == (4, 1)
    assert row["kappa"] == pytest.approx(cohen_kappa([1, 2, 3, 5], [1, 3, 3, 5], "quadratic"))
    assert row["exact"] == pytest.approx(3 / 4) and row["mean_abs_diff"] == pytest.approx(1 / 4)


def test_judge_vs_human_excludes_and_counts_missing_verdicts_and_grades():
    judge_verdicts = ["A>B", "B>A", None, "A=B", "B>A"]  # the third judgment failed: no verdict
    human_verdicts = ["A>B", "A>B", "B>A", "A=B", "B>A"]
    judgments = [{"id": f"pw{k}", "judge": "pw", "mode": "pairwise", "verdict": v,
                  "error": None if v else "no JSON object in the reply"} for k, v in enumerate(judge_verdicts)]
    judgments += [{"id": f"r{k}", "judge": "rub", "mode": "rubric", "score": float(k + 1),
                   "error": None if k < 3 else "timeout"} for k in range(4)]  # r3 failed: no grade
    scores = [{"judgment": f"r{k}", "judge": "rub", "criterion": "a", "value": float(k + 1)} for k in range(3)]
    reviews = [{"judgment": f"pw{k}", "reviewer": "ann", "verdict": v} for k, v in enumerate(human_verdicts)]
    reviews += [{"judgment": f"r{k}", "reviewer": "ann", "criterion": "a", "value": v}
                for k, v in enumerate([1.0, 2.0, 2.0, 4.0])]
    out = judge_vs_human(frame(SCORE_SCHEMA, scores), frame(JUDGMENT_SCHEMA, judgments), frame(REVIEW_SCHEMA, reviews))
    verdict = out.filter(pl.col("criterion") == "verdict").row(0, named=True)
    assert (verdict["reviews"], verdict["n"], verdict["dropped"]) == (5, 4, 1)
    kept = [0, 1, 3, 4]
    assert verdict["kappa"] == pytest.approx(cohen_kappa([judge_verdicts[k] for k in kept],
                                                         [human_verdicts[k] for k in kept]))
    assert verdict["exact"] == pytest.approx(3 / 4) and verdict["mean_abs_diff"] is None
    graded = out.filter(pl.col("criterion") == "a").row(0, named=True)
    assert (graded["judge"], graded["reviews"], graded["n"], graded["dropped"]) == ("rub", 4, 3, 1)
    assert graded["exact"] == pytest.approx(2 / 3)


def test_bradley_terry_prior_is_a_documented_parameter_shown_in_the_output():
    i, j, score, weight = random_battles(2, players=3, n=40)
    b = frame(BATTLE_SCHEMA, [{"judge": "j", "scenario": f"s{k}", "a": f"m{x}", "b": f"m{y}", "outcome": s,
                               "strong": False} for k, (x, y, s) in enumerate(zip(i, j, score))])
    default = bradley_terry(b, resamples=30)
    assert default.equals(bradley_terry(b, resamples=30, prior=0.5))  # the default is unchanged: ½ each way
    assert default["prior"].to_list() == [0.5] * 3
    strong = bradley_terry(b, resamples=30, prior=20.0)  # a stronger prior pulls the ratings together
    spread = lambda r: r["rating"].max() - r["rating"].min()  # noqa: E731
    assert spread(strong) < spread(default) and strong["prior"][0] == 20.0
    assert "virtual wins" in bradley_terry.__doc__ and "prior" in bradley_terry.__doc__
    with pytest.raises(ValueError, match="prior must be"):
        bradley_terry(b, resamples=5, prior=-1.0)
    # prior=0 is the plain maximum likelihood, which does not exist when a player never lost
    with pytest.raises(ValueError, match="do not exist"):
        fit_bradley_terry(np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([1.0, 1.0, 0.5]), np.ones(3), 3,
                          prior=0.0)


def test_bootstrap_means_and_sign_flip_pvalues_take_a_1d_vector_as_one_column():
    x = np.array([1.0, 3.0, NAN, 2.0, 5.0, 4.0])
    means = bootstrap_means(x, 200, seed=1)
    assert means.shape == (200,) and means == pytest.approx(bootstrap_means(x[:, None], 200, seed=1)[:, 0])
    p = sign_flip_pvalues(x, 500, seed=2)
    assert isinstance(p, float) and p == sign_flip_pvalues(x[:, None], 500, seed=2)[0]
    rates = bootstrap_ratios(np.nan_to_num(x), (~np.isnan(x)).astype(float), 200, seed=1)
    assert rates == pytest.approx(means)
    lo, hi = percentile_interval(means)
    assert lo.ndim == 0 and lo <= np.nanmean(x) <= hi
    for f in (bootstrap_means, sign_flip_pvalues):
        with pytest.raises(ValueError, match="1-d vector .* or a 2-d scenarios × columns matrix"):
            f(np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="between 0 and 1"):
        percentile_interval(means, 95)


SCORES = frame(SCORE_SCHEMA, [{"judge": "j", "judge_model": "jm", "rubric": "r@1", "mode": "rubric", "cell": c,
                               "model": c.split("/")[0], "prompt": "p@v1", "scenario": f"s{k}", "sample": 0,
                               "candidate": f"{c}:{k}", "judgment": f"j:{c}:{k}", "criterion": "composite",
                               "value": float(v)}
                              for c, vals in (("a/p@v1", [1, 2, 3, 4]), ("b/p@v1", [2, 2, 4, 5]))
                              for k, v in enumerate(vals)])
JUDGMENTS = frame(JUDGMENT_SCHEMA, [])
BATTLES = battles(JUDGMENTS)


@pytest.mark.parametrize("call, missing", [
    (lambda: leaderboard(SCORES.drop("scenario"), resamples=5), "'scenario'"),
    (lambda: leaderboard(pl.DataFrame(), resamples=5), "'judge', 'cell', 'criterion', 'scenario', 'value'"),
    (lambda: paired_differences(SCORES.drop("value"), resamples=5), "'value'"),
    (lambda: paired_differences(SCORES.drop("model"), compare="prompts"), "'model'"),
    (lambda: win_rates(pl.DataFrame(), resamples=5), "'judge'"),  # once: __POLARS_GB_ROW_INDEX
    (lambda: win_rates(BATTLES.drop("judge"), resamples=5), "'judge'"),
    (lambda: bradley_terry(BATTLES.drop("judge"), resamples=5), "'judge'"),
    (lambda: bradley_terry(BATTLES.drop("strong"), resamples=5), "'strong'"),
    (lambda: win_matrix(BATTLES.drop("outcome")), "'outcome'"),
    (lambda: position_consistency(BATTLES.drop("order")), "'order'"),
    (lambda: battles(JUDGMENTS.drop("cell_b")), "'cell_b'"),
    (lambda: judge_health(JUDGMENTS.drop("error_kind")), "'error_kind'"),
    (lambda: inter_judge(SCORES.drop("candidate")), "'candidate'"),
    (lambda: jury_alpha(SCORES.drop("rubric")), "'rubric'"),
    (lambda: packed_vs_single(SCORES.drop("judge_model")), "'judge_model'"),
    (lambda: judge_vs_human(SCORES, JUDGMENTS.drop("verdict"), frame(REVIEW_SCHEMA, [])), "'verdict'"),
    (lambda: disagreements(SCORES, frame(REVIEW_SCHEMA, []).drop("reviewer")), "'reviewer'"),
    (lambda: usage_by_cell(JUDGMENTS.drop("cost_usd")), "'cost_usd'"),
    (lambda: usage_by_judge(JUDGMENTS.drop("pack_id")), "'pack_id'"),
])
def test_a_frame_missing_a_column_raises_a_value_error_naming_the_function_and_the_column(call, missing):
    with pytest.raises(ValueError) as caught:
        call()
    message = str(caught.value)
    assert missing in message and "__POLARS" not in message
    assert message.split(":")[0] in {"leaderboard", "paired_differences", "win_rates", "bradley_terry", "win_matrix",
                                     "position_consistency", "battles", "judge_health", "inter_judge", "jury_alpha",
                                     "packed_vs_single", "judge_vs_human", "disagreements", "usage_by_cell",
                                     "usage_by_judge"}


def test_the_leaderboard_needs_only_the_columns_it_uses():
    full = leaderboard(SCORES, resamples=100)
    bare = leaderboard(SCORES.select("judge", "cell", "criterion", "scenario", "value"), resamples=100)
    assert bare.columns == full.columns and bare["model"].null_count() == bare.height
    assert bare.drop("model", "prompt").equals(full.drop("model", "prompt"))
    pairs = paired_differences(SCORES.select("judge", "cell", "criterion", "scenario", "value"), resamples=50,
                               permutations=200)
    assert pairs.height == 1 and pairs["diff"][0] == pytest.approx(-0.75)


def test_empty_results_have_the_columns_of_full_ones():
    assert paired_differences(SCORES.head(0)).columns == paired_differences(SCORES, resamples=5,
                                                                            permutations=5).columns
    b = frame(BATTLE_SCHEMA, [{"judge": "j", "scenario": "s", "a": "x", "b": "y", "outcome": 1.0, "strong": False}])
    assert win_rates(b.head(0)).schema == win_rates(b, resamples=5).schema
    assert bradley_terry(b.head(0)).columns == bradley_terry(b, resamples=5).columns


def test_percentile_interval_and_fit_bradley_terry_are_exported():
    for name in ("percentile_interval", "fit_bradley_terry", "complete_pairs"):
        assert name in analysis.__all__ and callable(getattr(analysis, name))


def test_alpha_docstring_states_its_orientation_against_the_krippendorff_package():
    doc = krippendorff_alpha.__doc__
    assert "units × raters" in doc and "raters × units" in doc and "x.T" in doc
