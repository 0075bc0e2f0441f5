"""The gate's one-sided tests against every sign pattern enumerated, scipy's exact binomial test and the percentile
interval, Holm against statsmodels, and the fewest scenarios a test needs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from bench.analysis.bootstrap import percentile_interval

from bench.gates.decide import (bootstrap_p, bound_tests_of, min_scenarios, needed, p_above, p_below,
                                sign_flip)


def enumerated(x: list[float], bound: float) -> float:
    d = np.asarray(x) - bound
    observed = d.sum()
    sums = [np.dot(s, np.abs(d)) for s in itertools.product((-1.0, 1.0), repeat=d.size)]
    return float(np.mean(np.array(sums) <= observed + 1e-12))


@pytest.mark.parametrize("x", [[-1, 0, 0, -1, 1, -2, 0, 0], [0.5, -0.5, -1.5, -1, -1, 0, 2, -1, -1, 0]])
def test_the_exact_one_sided_test_is_every_sign_pattern(x):
    assert p_below(x, -0.25) == pytest.approx(enumerated(x, -0.25))
    assert p_above(x, -0.25) == pytest.approx(enumerated([-v for v in x], 0.25))


def test_above_16_scenarios_random_patterns_come_near_the_normal_tail():
    x = np.r_[np.full(30, -1.0), np.zeros(70)]  # a drop of 0.3 on 100 scenarios
    d = np.abs(x + 0.1)
    z = (x + 0.1).sum() / np.sqrt((d ** 2).sum())
    from scipy.stats import norm
    assert p_below(x, -0.1) == pytest.approx(norm.cdf(z), abs=0.01)
    assert p_below(x, -0.1) == p_below(x, -0.1), "seeded: the same p every time"


def test_the_fewest_scenarios():
    assert [min_scenarios(a) for a in (0.05, 0.1, 0.01, 0.5)] == [5, 4, 7, 1]
    assert [needed(m, strict=False, alpha=0.05) for m in (1, 2, 3, 6, 12)] == [5, 6, 6, 7, 8]
    assert needed(12, strict=True, alpha=0.05) == 5, "strict: each check alone"
    few = bound_tests_of({k: sign_flip(np.zeros(n), 1.0, strict=False) for k, n in (("few", 5), ("ok", 6))},
                         strict=False, alpha=0.05)
    assert list(few) == ["ok"] and few["ok"].p == pytest.approx(1 / 64) and few["ok"].p_holm == pytest.approx(1 / 64)


@pytest.mark.parametrize(("wins", "ties", "losses"), [(3, 1, 12), (5, 4, 7), (0, 2, 10)])
def test_a_win_rate_against_one_half_is_the_exact_sign_test(wins, ties, losses):
    """Per-scenario win rates of 1, ½ and 0 against a floor of ½: the sign-flip test is scipy's exact binomial
    test of the wins among the scenarios not tied."""
    won = [1.0] * wins + [0.5] * ties + [0.0] * losses
    assert p_below(won, 0.5) == pytest.approx(binomtest(wins, wins + losses, 0.5, alternative="less").pvalue)
    assert p_above(won, 0.5) == pytest.approx(binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue)


def test_the_bootstrap_p_is_the_percentile_intervals_test():
    """p < a exactly when the one-sided 1 − a percentile bound lies beyond the floor; NaN draws are left out."""
    draws = np.r_[np.random.default_rng(3).normal(0.5, 0.1, 1999), np.nan]
    for floor in (0.6, 0.65, 0.7, 0.75):
        p, upper = bootstrap_p(draws, floor, strict=False), percentile_interval(draws[:-1], 0.9)[1]
        assert p == (1 + np.count_nonzero(draws[:-1] >= floor)) / 2000
        assert (p < 0.05) is bool(upper < floor), (floor, p, upper)
    assert bootstrap_p(draws, 0.3, strict=True) == (1 + np.count_nonzero(draws[:-1] <= 0.3)) / 2000
    assert np.isnan(bootstrap_p(np.full(5, np.nan), 0.5, strict=False))


def test_every_check_of_a_family_is_holm_adjusted_together():
    """Sign-flip checks and a bootstrap one in one family: the adjusted values are statsmodels' Holm of them all."""
    checks = {"drop": sign_flip([-1.0] * 8, -0.25, strict=False),
              "rate": sign_flip([0.0] * 6 + [1.0] * 2, 0.5, strict=False),
              "kappa": (40, lambda: 0.01), "few": (3, lambda: 0.0)}
    tests = bound_tests_of(checks, strict=False, alpha=0.05)
    p = [tests[k].p for k in ("drop", "rate", "kappa")]
    assert p == pytest.approx([1 / 256, binomtest(2, 8, 0.5, alternative="less").pvalue, 0.01])
    assert [tests[k].p_holm for k in ("drop", "rate", "kappa")] == pytest.approx(
        multipletests(p, method="holm")[1].tolist())
    assert "few" not in tests, "3 units of a family of 4: cannot decide (needs 7)"
