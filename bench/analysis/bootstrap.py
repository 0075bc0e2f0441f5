"""Seeded bootstrap and sign-flip tests over a scenarios × columns matrix, as matrix products: scenarios are
resampled, and a NaN mask lets columns of different coverage share the same resamples."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

BLOCK_ENTRIES = 2_000_000  # resamples × scenarios per block: about 16 MB of float64 counts


def _blocks(total: int, n: int) -> Iterator[int]:
    size = max(1, min(total, BLOCK_ENTRIES // max(n, 1)))
    for start in range(0, total, size):
        yield min(size, total - start)


def resample_counts(rng: np.random.Generator, b: int, n: int) -> np.ndarray:
    """Return a (b × n) float matrix: row r counts how often each of n units is drawn in resample r."""
    idx = rng.integers(0, n, size=(b, n), dtype=np.int64)
    idx += np.arange(b, dtype=np.int64)[:, None] * n
    return np.bincount(idx.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)


def _columns(values: np.ndarray, function: str) -> tuple[np.ndarray, bool]:
    """Return ``values`` as a float (S × K) matrix and whether it was a 1-d vector (one column of S values)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 1:
        return x[:, None], True
    if x.ndim != 2:
        raise ValueError(f"{function} needs a 1-d vector (one column) or a 2-d scenarios × columns matrix, "
                         f"not a {x.ndim}-d array of shape {x.shape}")
    return x, False


def bootstrap_means(values: np.ndarray, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Return (resamples × K) bootstrap means of each column of ``values`` (S × K, NaN = missing; a column with no
    value in a resample gives NaN); a 1-d vector is one column and gives a 1-d result."""
    values, vector = _columns(values, "bootstrap_means")
    mask = ~np.isnan(values)
    if mask.all():  # every resample has exactly S values per column: one product, no mask
        out = bootstrap_ratios(values, None, resamples, seed)
    else:
        out = bootstrap_ratios(np.where(mask, values, 0.0), mask.astype(np.float64), resamples, seed)
    return out[:, 0] if vector else out


def bootstrap_ratios(num: np.ndarray, den: np.ndarray | None, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Return (resamples × K) bootstrap values of Σ num / Σ den per column, resampling the S rows (``den=None``: 1
    everywhere, a mean); a 1-d ``num`` is one column and gives a 1-d result."""
    num, vector = _columns(num, "bootstrap_ratios")
    if den is not None:
        den = _columns(den, "bootstrap_ratios")[0]
        if den.shape != num.shape:
            raise ValueError(f"bootstrap_ratios needs num and den of one shape, not {num.shape} and {den.shape}")
    if vector:
        return bootstrap_ratios(num, den, resamples, seed)[:, 0]
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, num.shape[1]))
    row = 0
    for b in _blocks(resamples, num.shape[0]):
        counts = resample_counts(rng, b, num.shape[0])
        with np.errstate(invalid="ignore", divide="ignore"):
            out[row:row + b] = (counts @ num) / (num.shape[0] if den is None else counts @ den)
        row += b
    return out


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Return the (low, high) percentile interval of each column of bootstrap ``samples`` (resamples × K, or 1-d:
    two scalars), ignoring NaN resamples; linear interpolation as ``numpy.percentile``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1 (0.95 for a 95% interval), not {level!r}")
    samples = np.asarray(samples, dtype=np.float64)
    alpha = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore"):
        lo, hi = np.nanquantile(samples, [alpha, 1.0 - alpha], axis=0) if samples.size else (np.nan, np.nan)
    return np.asarray(lo), np.asarray(hi)


def column_means(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (mean, n) of each column over its non-missing values."""
    mask = ~np.isnan(values)
    n = mask.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(mask, values, 0.0).sum(axis=0) / n
    return mean, n


N_EXACT = 16  # up to this many scenarios a sign-flip p-value is exact: all 2^n patterns (65,536 at 16)


def exact_sign_flip(d: np.ndarray) -> float:
    """Return the exact two-sided p-value that paired differences ``d`` (at most ``N_EXACT``) have mean 0:
    the share of all 2ⁿ sign patterns whose |sum| reaches the observed |sum| (the observed one included)."""
    d = np.asarray(d, dtype=np.float64)
    if d.size > N_EXACT:
        raise ValueError(f"exact_sign_flip enumerates 2^n sign patterns: n must be at most {N_EXACT}, not {d.size}")
    patterns = np.arange(2 ** d.size, dtype=np.int64)[:, None]
    signs = ((patterns >> np.arange(d.size)) & 1) * 2.0 - 1.0
    observed = abs(float(d.sum()))
    return float(np.mean(np.abs(signs @ d) >= observed - 1e-9 * max(1.0, observed)))


def sign_flip_pvalues(diffs: np.ndarray, permutations: int = 10000, seed: int = 0) -> np.ndarray | float:
    """Return two-sided p-values that each column of paired differences (S × P, NaN = unpaired) has mean 0.
    Sign flips: p = (1 + #|flipped| ≥ |observed|) / (1 + R); exact to ``N_EXACT`` scenarios; 1-d: a float."""
    diffs, vector = _columns(diffs, "sign_flip_pvalues")
    if vector:
        return float(sign_flip_pvalues(diffs, permutations, seed)[0])
    filled = np.nan_to_num(diffs, nan=0.0)
    observed, n = column_means(diffs)
    rng = np.random.default_rng(seed)
    extreme = np.zeros(diffs.shape[1])
    tol = 1e-12 * np.maximum(1.0, np.abs(observed))
    for b in _blocks(permutations, diffs.shape[0]):
        signs = rng.integers(0, 2, size=(b, diffs.shape[0])).astype(np.float64) * 2.0 - 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            flipped = (signs @ filled) / n
        extreme += (np.abs(flipped) >= np.abs(observed) - tol).sum(axis=0)
    p = (1.0 + extreme) / (1.0 + permutations)
    for col in np.flatnonzero((n > 0) & (n <= N_EXACT)):  # few scenarios: every sign pattern, as compare
        p[col] = exact_sign_flip(diffs[~np.isnan(diffs[:, col]), col])
    return np.where(n > 0, p, np.nan)


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Return Holm–Bonferroni adjusted p-values (family-wise error control over the given tests)."""
    p = np.asarray(pvalues, dtype=np.float64)
    ok = ~np.isnan(p)
    out = np.full_like(p, np.nan)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    m = order.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adjusted, 1.0)
    return out
