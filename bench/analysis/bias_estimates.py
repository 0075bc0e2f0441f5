"""The bias audit's statistics on plain arrays, each with a seeded percentile bootstrap interval over its units
(an answer, or an A/B pair with both its orders); each returns an :class:`Estimate`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from bench.analysis.bootstrap import bootstrap_means, bootstrap_ratios, percentile_interval, resample_counts

MIN_UNITS = 10  # fewer units than this: no estimate (its interval would say little but "too few")
BLOCK_ENTRIES = 2_000_000  # resamples × units drawn at once (index matrices of about 16 MB)


@dataclass(frozen=True)
class Estimate:
    """One measure of one judge: its value and bootstrap interval over ``n`` units, or the reason it has none."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    state: str = "ok"  # "ok" | "not_applicable" | "not_enough_data"
    why: str = ""  # when not "ok": the reason, as a plain clause
    unit: str = ""  # what ``n`` counts, when a verdict names it ("answers", "pairs")


def not_applicable(why: str) -> Estimate:
    """Return the estimate of a measure that does not exist for this judge, saying why."""
    return Estimate(None, None, None, 0, "not_applicable", why)


def not_enough(why: str, n: int) -> Estimate:
    """Return the estimate of a measure that exists but has too few (or too uniform) units, saying why."""
    return Estimate(None, None, None, n, "not_enough_data", why)


def _estimate(point: float, draws: np.ndarray, n: int, level: float) -> Estimate:
    """Return ``point`` with the percentile interval of its bootstrap ``draws`` (NaN draws ignored)."""
    finite = draws[np.isfinite(draws)]
    if not finite.size:
        return Estimate(float(point), None, None, n)
    lo, hi = percentile_interval(finite, level)
    return Estimate(float(point), float(lo), float(hi), n)


def ratio(num: np.ndarray, den: np.ndarray, *, unit: str, resamples: int, seed: int, level: float) -> Estimate:
    """Return Σ num / Σ den over the rows (units with den = 0 left out); ``n`` is Σ den."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    keep = den > 0
    n = int(den[keep].sum())
    if keep.sum() < MIN_UNITS:
        return not_enough(f"{int(keep.sum())} {unit} (at least {MIN_UNITS} are needed)", n)
    draws = bootstrap_ratios(num[keep], den[keep], resamples, seed)
    return _estimate(num[keep].sum() / den[keep].sum(), draws, n, level)


def mean(values: np.ndarray, *, unit: str, resamples: int, seed: int, level: float) -> Estimate:
    """Return the mean of one value per unit (NaN: left out) with its bootstrap interval."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size < MIN_UNITS:
        return not_enough(f"{values.size} {unit} (at least {MIN_UNITS} are needed)", int(values.size))
    return _estimate(values.mean(), bootstrap_means(values, resamples, seed), int(values.size), level)


def spearman(x: np.ndarray, y: np.ndarray, *, unit: str, resamples: int, seed: int, level: float) -> Estimate:
    """Return Spearman's rank correlation of paired ``x`` and ``y`` (one pair per unit; average ranks for ties),
    with an interval from resampling the pairs (ranks recomputed in every resample)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.size
    if n < MIN_UNITS:
        return not_enough(f"{n} {unit} (at least {MIN_UNITS} are needed)", n)
    for values, what in ((x, "answer length"), (y, "score")):
        if np.ptp(values) == 0:
            return not_enough(f"every {what} is the same ({values[0]:g}): no correlation to measure", n)
    point = _rank_correlations(x[None, :], y[None, :])[0]
    rng = np.random.default_rng(seed)
    draws, size = [], max(1, BLOCK_ENTRIES // n)
    for start in range(0, resamples, size):
        idx = rng.integers(0, n, size=(min(size, resamples - start), n))
        draws.append(_rank_correlations(x[idx], y[idx]))
    return _estimate(point, np.concatenate(draws), n, level)


def _rank_correlations(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Return each row's Pearson correlation of the average ranks of ``x`` and ``y`` (NaN where one is constant)."""
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Return the ranks (1-based, ties sharing their average rank) of each row of a 2-d array."""
    rows, n = values.shape
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    at = np.broadcast_to(np.arange(n), (rows, n))
    starts = np.ones((rows, n), bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones((rows, n), bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, at, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, at, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((rows, n))
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=1)
    return ranks


def reference_gap(own: np.ndarray, other: np.ndarray, *, resamples: int, seed: int, level: float,
                  groups: tuple[str, str] = ("answers of its own family", "of others")) -> Estimate:
    """Return the mean over reference columns of (column mean on ``own`` rows − column mean on ``other`` rows),
    NaN where a reference does not serve; rows are resampled within their group."""
    own, other = np.asarray(own, float), np.asarray(other, float)
    n = own.shape[0] + other.shape[0]
    if min(own.shape[0], other.shape[0]) < MIN_UNITS // 2 or n < MIN_UNITS:
        return not_enough(f"{own.shape[0]} {groups[0]} and {other.shape[0]} {groups[1]} (at least "
                          f"{MIN_UNITS // 2} of each and {MIN_UNITS} in all are needed)", n)
    point = _reference_gaps(own[None], other[None])[0]
    rng, draws = np.random.default_rng(seed), []
    size = max(1, BLOCK_ENTRIES // max(1, n * own.shape[1]))
    for start in range(0, resamples, size):
        b = min(size, resamples - start)
        draws.append(_reference_gaps(own[rng.integers(0, own.shape[0], (b, own.shape[0]))],
                                     other[rng.integers(0, other.shape[0], (b, other.shape[0]))]))
    return _estimate(point, np.concatenate(draws), n, level)


def _reference_gaps(own: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Return per resample (first axis) the mean over references of their own − other column means (NaN: none)."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a reference with no unit in a resample: NaN, skipped
        per = np.nanmean(own, axis=1) - np.nanmean(other, axis=1)
        return np.nanmean(per, axis=1)


def spread(codes: list[np.ndarray], levels: list[int], *, resamples: int, seed: int, level: float
           ) -> tuple[Estimate, Estimate]:
    """Return (modal share, normalized entropy) of a judge's grades per criterion (entropy over log(levels)),
    pooled weighted by grades. ``codes[c]``: each unit's level index on criterion c (−1: none)."""
    units = codes[0].size if codes else 0
    if units < MIN_UNITS:
        why = f"{units} graded judgments (at least {MIN_UNITS} are needed)"
        return not_enough(why, units), not_enough(why, units)
    onehot = np.hstack([(c[:, None] == np.arange(k)[None, :]).astype(float) for c, k in zip(codes, levels)])
    point_m, point_h = _spread_of(onehot.sum(axis=0)[None, :], levels)
    rng, size = np.random.default_rng(seed), max(1, BLOCK_ENTRIES // units)
    modal, entropy = [], []
    for start in range(0, resamples, size):
        m, h = _spread_of(resample_counts(rng, min(size, resamples - start), units) @ onehot, levels)
        modal.append(m)
        entropy.append(h)
    grades = int(onehot.sum())
    shares = _estimate(point_m[0], np.concatenate(modal), grades, level)
    if max(levels) < 2:
        return shares, not_enough("every judge uses one level only on every criterion: no scale to spread over",
                                  grades)
    return shares, _estimate(point_h[0], np.concatenate(entropy), grades, level)


def _spread_of(counts: np.ndarray, levels: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Return per row of level counts the pooled modal share and normalized entropy (criteria of 2+ levels)."""
    modal = entropy = graded = spread_over = np.zeros(counts.shape[0])
    at = 0
    for k in levels:
        block, at = counts[:, at:at + k], at + k
        total = block.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = block / total[:, None]
            logs = np.log(np.where(p > 0, p, 1.0))
        modal, graded = modal + block.max(axis=1), graded + total
        if k > 1:
            h = np.nan_to_num(-(p * logs).sum(axis=1) / np.log(k))
            entropy, spread_over = entropy + h * total, spread_over + total
    with np.errstate(invalid="ignore", divide="ignore"):
        return modal / graded, entropy / spread_over
