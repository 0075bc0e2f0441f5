"""The gate's one-sided tests against every sign pattern enumerated, Holm against statsmodels, and the fewest
scenarios a test needs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from bench.gates.decide import bound_tests_of, holm_adjusted, min_scenarios, needed, p_above, p_below


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


def test_the_fewest_scenarios_and_holm():
    assert [min_scenarios(a) for a in (0.05, 0.1, 0.01, 0.5)] == [5, 4, 7, 1]
    p = [0.01, 0.04, None, 0.03, 0.2]
    expected = multipletests([0.01, 0.04, 0.03, 0.2], method="holm")[1]
    assert holm_adjusted(p) == pytest.approx([expected[0], expected[1], None, expected[2], expected[3]])
    assert [needed(m, strict=False, alpha=0.05) for m in (1, 2, 3, 6, 12)] == [5, 6, 6, 7, 8]
    assert needed(12, strict=True, alpha=0.05) == 5, "strict: each check alone"
    few = bound_tests_of({"few": (np.zeros(5), 1.0), "ok": (np.zeros(6), 1.0)}, strict=False, alpha=0.05)
    assert list(few) == ["ok"] and few["ok"].p == pytest.approx(1 / 64) and few["ok"].p_holm == pytest.approx(1 / 64)
