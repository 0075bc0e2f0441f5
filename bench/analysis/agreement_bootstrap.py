"""Bootstrap draws of the agreement between two raters (a judge and a human): weighted Cohen's kappa, exact and
adjacent agreement, and a mean difference, all from the same resamples of items (one matrix product each)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.analysis.agreement import _kappa_weights
from bench.analysis.bootstrap import bootstrap_ratios, percentile_interval


@dataclass(frozen=True)
class AgreementDraws:
    """Bootstrap resamples of each statistic (1-d arrays of ``resamples`` values; NaN where undefined)."""

    kappa: np.ndarray
    exact: np.ndarray
    adjacent: np.ndarray | None  # None when ``within`` was not given (nominal labels with no order)

    def interval(self, name: str, level: float = 0.95) -> tuple[float | None, float | None]:
        """Return the percentile interval of one statistic's draws, or (None, None) when no resample defines it."""
        draws = getattr(self, name)
        if draws is None or draws.size == 0 or np.isnan(draws).all():
            return None, None
        lo, hi = percentile_interval(draws, level)
        return float(lo), float(hi)


def agreement_draws(x: np.ndarray, y: np.ndarray, items: np.ndarray, *, weights: str | None,
                    within: np.ndarray | None = None, resamples: int = 2000, seed: int = 0) -> AgreementDraws:
    """Return bootstrap draws of kappa, exact and (with ``within``) adjacent agreement of paired grades ``x``,
    ``y`` (no missing value), resampling ``items``: pairs of one item are drawn together."""
    x, y, items = np.asarray(x), np.asarray(y), np.asarray(items)
    if not x.shape == y.shape == items.shape == (x.shape if within is None else np.shape(within)) or x.ndim != 1:
        raise ValueError("agreement_draws needs equally long 1-d arrays of grades, items (and within)")
    if x.size == 0:
        empty = np.full(resamples, np.nan)
        return AgreementDraws(empty, empty, None if within is None else empty)
    values, codes = np.unique(np.concatenate([x, y]), return_inverse=True)
    k = values.size
    cell = codes[: x.size] * k + codes[x.size:]
    columns = [np.eye(k * k)[cell], (x == y)[:, None], np.ones((x.size, 1))]
    if within is not None:
        columns.insert(2, np.asarray(within, dtype=bool)[:, None])
    per_pair = np.hstack(columns).astype(np.float64)
    _labels, group = np.unique(items, return_inverse=True)
    per_item = np.zeros((group.max() + 1, per_pair.shape[1]))
    np.add.at(per_item, group, per_pair)
    sums = bootstrap_ratios(per_item, None, resamples, seed)  # each resample's column sums over its items / items
    pairs = sums[:, -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        exact = sums[:, k * k] / pairs
        adjacent = None if within is None else sums[:, k * k + 1] / pairs
    weight = _kappa_weights(values if weights is None else values.astype(np.float64), weights)
    return AgreementDraws(kappa_of_counts(sums[:, : k * k].reshape(-1, k, k), weight), exact, adjacent)


def kappa_of_counts(counts: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Return Cohen's kappa of each (k × k) confusion matrix in ``counts`` (rows the first rater) under the
    disagreement ``weight`` (0 on the diagonal); NaN where chance agreement is perfect."""
    total = counts.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = counts / total[..., None, None]
        expected = observed.sum(axis=-1)[..., :, None] * observed.sum(axis=-2)[..., None, :]
        chance = (weight * expected).sum(axis=(-2, -1))
        kappa = 1.0 - (weight * observed).sum(axis=(-2, -1)) / chance
    return np.where(chance > 0, kappa, np.nan)


def mean_draws(values: np.ndarray, items: np.ndarray, *, resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """Return bootstrap draws of the mean of ``values`` (e.g. judge − human), resampling ``items`` as above."""
    values, items = np.asarray(values, dtype=np.float64), np.asarray(items)
    if values.size == 0:
        return np.full(resamples, np.nan)
    _labels, group = np.unique(items, return_inverse=True)
    per_item = np.zeros((group.max() + 1, 2))
    np.add.at(per_item, group, np.column_stack([values, np.ones(values.size)]))
    sums = bootstrap_ratios(per_item, None, resamples, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[:, 0] / sums[:, 1]
