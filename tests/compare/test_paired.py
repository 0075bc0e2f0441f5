"""The paired statistics of bench.compare.paired against references: every sign pattern enumerated by hand,
scipy's Wilcoxon test, statsmodels' Holm correction and a bootstrap loop written out by hand."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from bench.compare.paired import N_EXACT, exact_sign_flip, paired_rows, paired_test, win_rate_rows


def _enumerated(d: np.ndarray) -> float:
    observed = abs(d.sum())
    sums = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((-1, 1), repeat=d.size)]
    return sum(v >= observed - 1e-9 for v in sums) / len(sums)


@pytest.mark.parametrize("seed", range(5))
def test_the_exact_permutation_test_counts_every_sign_pattern(seed):
    rng = np.random.default_rng(seed)
    d = rng.integers(-2, 4, size=int(rng.integers(3, 12))).astype(float)  # ties and zeros, as 1-5 grades give
    assert exact_sign_flip(d) == pytest.approx(_enumerated(d), abs=1e-12)


def test_the_test_is_the_exact_permutation_up_to_n_exact_scenarios_and_wilcoxon_above():
    rng = np.random.default_rng(1)
    small, large = rng.normal(0.5, 1, N_EXACT), rng.normal(0.5, 1, N_EXACT + 1)
    assert paired_test(small) == (pytest.approx(exact_sign_flip(small)), "permutation")
    assert paired_test(large) == (pytest.approx(stats.wilcoxon(large).pvalue, rel=1e-12), "wilcoxon")
    assert paired_test(np.ones(4)) == (pytest.approx(2 / 16), "permutation"), "4 scenarios never reach p < 0.125"
    assert paired_test(np.zeros(30)) == (1.0, "wilcoxon") and paired_test(np.full(5, 1e-13)) == (1.0, "permutation")
    p, test = paired_test(np.array([]))
    assert np.isnan(p) and test is None
    with pytest.raises(ValueError, match="at most 16"):
        exact_sign_flip(np.ones(N_EXACT + 1))


def _items(diffs: dict[tuple[str, str], list[float]], base: float = 3.0) -> pl.DataFrame:
    rows = [{"cell_a": "x/p@v1", "cell_b": "x/p@v2", "judge": judge, "criterion": crit, "scenario": f"s{i:02d}",
             "sample": 0, "value_a": base, "value_b": base + v, "diff": v}
            for (judge, crit), values in diffs.items() for i, v in enumerate(values) if v is not None]
    return pl.DataFrame(rows)


def test_rows_match_a_bootstrap_loop_by_hand_and_holm_across_every_row():
    rng = np.random.default_rng(7)
    up = list(rng.integers(0, 3, 20).astype(float))
    flat = list(rng.integers(-1, 2, 20).astype(float))
    holes = [v if i % 3 else None for i, v in enumerate(rng.integers(-1, 3, 20).astype(float))]
    items = _items({("j", "composite"): up, ("j", "clarity"): flat, ("k", "composite"): holes})
    shared = pl.DataFrame({"cell_a": ["x/p@v1"], "cell_b": ["x/p@v2"], "answers": [20]})
    rows = paired_rows(items, shared, n_boot=1000, seed=3, alpha=0.05)
    first = rows.filter((pl.col("judge") == "j") & (pl.col("criterion") == "composite")).row(0, named=True)
    d = np.array(up)
    draws = np.random.default_rng(3).integers(0, 20, size=(1000, 20))  # one draw of the 20 scenarios per resample
    assert (first["ci_low"], first["ci_high"]) == pytest.approx(tuple(np.percentile(d[draws].mean(1), [2.5, 97.5])))
    assert first["p_value"] == pytest.approx(stats.wilcoxon(d).pvalue) and first["n_changed"] == int((d != 0).sum())
    holed = rows.filter(pl.col("judge") == "k").row(0, named=True)
    assert holed["n_matched"] == 13 and holed["n_unscored"] == 7 and holed["test"] == "permutation"
    assert rows["p_holm"].to_list() == pytest.approx(list(multipletests(rows["p_value"].to_list(), method="holm")[1]))
    rule = (rows["p_holm"] < 0.05) & ((rows["ci_low"] > 0) | (rows["ci_high"] < 0))
    assert rows["significant"].to_list() == rule.to_list() and rows["significant"].to_list()[0]
    assert rows["criterion"].to_list()[:2] == ["composite", "clarity"], "the composite first within a judge"


def test_the_win_rate_of_b_counts_wins_ties_and_losses_per_scenario():
    fought = pl.DataFrame({"cell_a": ["c"] * 4, "cell_b": ["c2"] * 4, "judge": ["arena"] * 4,
                           "scenario": ["s1", "s1", "s2", "s3"], "sample": [0, 1, 0, 0],
                           "score_a": [0.0, 0.5, 1.0, 0.5], "score_b": [1.0, 0.5, 0.0, 1.0]})
    (row,) = win_rate_rows(fought, n_boot=200, seed=0, alpha=0.05).iter_rows(named=True)
    assert (row["wins"], row["ties"], row["losses"], row["n"], row["n_scenarios"]) == (2, 1, 1, 4, 3)
    assert row["win_rate_b"] == pytest.approx((0.75 + 0.0 + 1.0) / 3), "samples of a scenario averaged first"
    assert 0 <= row["ci_low"] <= row["win_rate_b"] <= row["ci_high"] <= 1
