"""The gate's statistics: one-sided tests of a bound, Holm across the gate's checks, the scenarios a test needs.

A bound is a tolerance: by default a check fails only when breaking it is shown (a one-sided sign-flip test of the
mean, shifted by the bound, after Holm's correction, its interval wholly beyond the bound); ``strict`` passes a check
only when keeping it is shown. Too few scenarios for any test to reach alpha cannot decide (exit 6). The rule, why
not Wilcoxon, and its calibration: docs/gates.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.analysis.bootstrap import N_EXACT, holm
from bench.compare.matching import CHANGED

DRAWS = 10_000  # random sign patterns above N_EXACT scenarios: p within ±0.005 of exact at 0.05, the same every run
CHUNK = 2_000  # patterns drawn at once (memory: CHUNK × scenarios floats)


def p_below(x: np.ndarray, bound: float) -> float:
    """Return the one-sided p-value that the mean of the per-scenario values ``x`` is below ``bound`` (H0: it is
    at least ``bound``); NaN with no value. The sign-flip test of the mean of x − bound: exact (all 2ⁿ sign
    patterns) up to ``N_EXACT`` scenarios off the bound, ``DRAWS`` random patterns (seed 0, p = (1 + k)/(1 +
    DRAWS)) above."""
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
    """Return the fewest scenarios with which a one-sided test can reach ``alpha``: the smallest n with 1/2ⁿ ≤
    alpha (every scenario on the same side of the bound), 5 at alpha 0.05."""
    return max(1, math.ceil(math.log2(1.0 / alpha) - 1e-12))


def holm_adjusted(p: list[float | None]) -> list[float | None]:
    """Return Holm's adjusted p-values of the gate's tested checks (None: a check with no test, left out)."""
    kept = [i for i, v in enumerate(p) if v is not None and not math.isnan(v)]
    out: list[float | None] = [None] * len(p)
    for i, v in zip(kept, holm(np.array([p[i] for i in kept], dtype=np.float64)) if kept else ()):
        out[i] = float(v)
    return out


@dataclass(frozen=True)
class BoundTest:
    """One check's one-sided test: its p-value, Holm's adjustment of it (= p when strict) and its scenarios."""

    p: float
    p_holm: float
    n: int


def needed(checks: int, *, strict: bool, alpha: float) -> int:
    """Return the scenarios each of a gate's ``checks`` tested checks needs to decide: not strict, enough for Holm's
    first step, alpha/checks (with fewer, no check could fail: 6 scenarios cannot fail a gate of 4 checks at 0.05);
    strict, enough for alpha (each check is tested alone)."""
    return min_scenarios(alpha if strict else alpha / max(1, checks))


def bound_tests_of(samples: dict[Any, tuple[np.ndarray, float]], *, strict: bool,
                   alpha: float) -> dict[Any, BoundTest]:
    """Return the test of each check of ``samples`` (key -> per-scenario values, bound) that has scenarios enough
    (:func:`needed`): not strict, p that the mean is below the bound, Holm-adjusted across them all; strict, p
    that it is above, each on its own (the gate passes only when every one does)."""
    arrays = {k: (np.asarray(x, dtype=np.float64), b) for k, (x, b) in samples.items()}
    counts = {k: int(np.count_nonzero(~np.isnan(x))) for k, (x, _b) in arrays.items()}
    need = needed(sum(1 for n in counts.values() if n), strict=strict, alpha=alpha)
    p = {k: (p_above if strict else p_below)(x, b) for k, (x, b) in arrays.items() if counts[k] >= need}
    keys = list(p)
    adjusted = [p[k] for k in keys] if strict else holm_adjusted([p[k] for k in keys])
    return {k: BoundTest(p[k], float(a), counts[k]) for k, a in zip(keys, adjusted)}
