"""The gate's statistics: one-sided tests of a bound, Holm across all the gate's checks, the units a test needs
(means by sign flips, kappas by bootstrap draws; too few units cannot decide). See docs/gates.md."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.analysis.bootstrap import N_EXACT, holm
from bench.compare.matching import CHANGED

DRAWS = 10_000  # random sign patterns above N_EXACT scenarios: p within ±0.005 of exact at 0.05, the same every run
CHUNK = 2_000  # patterns drawn at once (memory: CHUNK × scenarios floats)


def p_below(x: np.ndarray, bound: float) -> float:
    """Return the one-sided p-value that the mean of ``x`` is below ``bound`` (NaN with no value).
    A sign-flip test of x − bound: exact up to ``N_EXACT`` scenarios, else ``DRAWS`` random patterns (seed 0)."""
    d = np.asarray(x, dtype=np.float64).ravel() - bound
    d = d[~np.isnan(d)]
    d = np.where(np.abs(d) <= CHANGED, 0.0, d)  # float residue is no difference
    if d.size == 0:
        return math.nan
    observed, d = float(d.sum()), np.abs(d[d != 0])  # a zero flips to itself: it changes no pattern's sum
    if d.size == 0:
        return 1.0
    tol = 1e-9 * max(1.0, abs(observed))
    if d.size <= N_EXACT:
        patterns = np.arange(2 ** d.size, dtype=np.int64)[:, None]
        signs = ((patterns >> np.arange(d.size)) & 1) * 2.0 - 1.0
        return float(np.mean(signs @ d <= observed + tol))
    rng, below = np.random.default_rng(0), 0
    for start in range(0, DRAWS, CHUNK):
        signs = np.where(rng.random((min(CHUNK, DRAWS - start), d.size), dtype=np.float32) < 0.5,
                         np.float32(-1), np.float32(1))
        below += int(np.count_nonzero(signs.astype(np.float64) @ d <= observed + tol))
    return (1 + below) / (1 + DRAWS)


def p_above(x: np.ndarray, bound: float) -> float:
    """Return the one-sided p-value that the mean of ``x`` is above ``bound`` (H0: at most ``bound``)."""
    return p_below(-np.asarray(x, dtype=np.float64), -bound)


def min_scenarios(alpha: float) -> int:
    """Return the fewest scenarios with which a one-sided test can reach ``alpha`` (1/2ⁿ ≤ alpha: 5 at 0.05)."""
    return max(1, math.ceil(math.log2(1.0 / alpha) - 1e-12))


@dataclass(frozen=True)
class BoundTest:
    """One check's one-sided test: its p-value, Holm's adjustment of it (= p when strict) and its scenarios."""

    p: float
    p_holm: float
    n: int


def needed(checks: int, *, strict: bool, alpha: float) -> int:
    """Return the scenarios each of a gate's ``checks`` tested checks needs to decide: not strict, enough for Holm's
    first step, alpha/checks; strict, enough for alpha (each check is tested alone)."""
    return min_scenarios(alpha if strict else alpha / max(1, checks))


Check = tuple[int, Callable[[], float]]  # a check's units (scenarios, reviewed answers) and its one-sided p, lazily


def sign_flip(x: np.ndarray, bound: float, *, strict: bool) -> Check:
    """Return the check of the mean of ``x`` against ``bound``: p that it is below (``strict``: above) it."""
    x = np.asarray(x, dtype=np.float64)
    return int(np.count_nonzero(~np.isnan(x))), lambda: (p_above if strict else p_below)(x, bound)


def bootstrap_p(draws: np.ndarray, bound: float, *, strict: bool) -> float:
    """Return the one-sided bootstrap p-value that a statistic is below ``bound`` (``strict``: above) from ``draws``.
    (1 + draws at or beyond it) / (1 + draws), NaN draws left out; NaN with none."""
    d = np.asarray(draws, dtype=np.float64)
    d = d[~np.isnan(d)]
    return (1 + int(np.count_nonzero(d <= bound if strict else d >= bound))) / (1 + d.size) if d.size else math.nan


def bound_tests_of(checks: dict[Any, Check], *, strict: bool, alpha: float) -> dict[Any, BoundTest]:
    """Return the test of each of ``checks`` (key -> units, p) that has units enough (:func:`needed`): not strict,
    its p Holm-adjusted across them all; strict, each on its own."""
    need = needed(sum(1 for n, _p in checks.values() if n), strict=strict, alpha=alpha)
    p = {k: v for k, (n, test) in checks.items() if n >= need and not math.isnan(v := test())}
    adjusted = list(p.values()) if strict else holm(np.array(list(p.values()), dtype=np.float64))
    return {k: BoundTest(v, float(a), checks[k][0]) for (k, v), a in zip(p.items(), adjusted)}
