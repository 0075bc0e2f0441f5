"""Agreement statistics: Cohen's kappa (nominal, linear or quadratic weights) and Krippendorff's alpha.
Weighted kappa measures disagreement by the distance between the values themselves, not their positions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LEVELS = ("nominal", "ordinal", "interval", "ratio")


def _categories(*arrays: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    values = np.unique(np.concatenate(arrays))
    return values, [np.searchsorted(values, a) for a in arrays]


def _missing(x: np.ndarray) -> np.ndarray:
    """Return which entries of a 1-d array are missing: None, NaN (or anything else unequal to itself)."""
    if x.dtype.kind in "fc":
        return np.isnan(x)
    if x.dtype.kind != "O":
        return np.zeros(x.shape, dtype=bool)

    def gone(v: object) -> bool:
        try:
            return v is None or bool(v != v)
        except (TypeError, ValueError):  # e.g. pandas.NA, whose truth value is ambiguous
            return True

    return np.fromiter((gone(v) for v in x), dtype=bool, count=x.size)


def complete_pairs(a: Sequence, b: Sequence) -> tuple[np.ndarray, np.ndarray, int]:
    """Return (a, b, dropped): the pairs of two raters' paired ratings where both rated (neither is None or
    NaN), and how many pairs were dropped because one or both ratings were missing."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("complete_pairs needs two equally long 1-d sequences of paired ratings")
    keep = ~(_missing(a) | _missing(b))
    return a[keep], b[keep], int(keep.size - keep.sum())


def cohen_kappa(a: Sequence, b: Sequence, weights: str | None = None) -> float:
    """Return Cohen's kappa of two raters' paired ratings; ``weights`` None (nominal), "linear" or "quadratic".
    NaN when chance agreement is already perfect; a missing rating raises ValueError (:func:`complete_pairs`)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("cohen_kappa needs two equally long 1-d sequences of paired ratings")
    gaps = int((_missing(a) | _missing(b)).sum())
    if gaps:
        raise ValueError(f"cohen_kappa: {gaps} of {a.size} pairs have a missing rating (None or NaN); drop "
                         "incomplete pairs first, e.g. a, b, dropped = complete_pairs(a, b)")
    if a.size == 0:
        return float("nan")
    values, (ia, ib) = _categories(a, b)
    k = len(values)
    observed = np.zeros((k, k))
    np.add.at(observed, (ia, ib), 1.0)
    observed /= a.size
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    w = _kappa_weights(values, weights)
    chance = (w * expected).sum()
    return float("nan") if chance == 0 else float(1.0 - (w * observed).sum() / chance)


def why_undefined(*ratings: Sequence | np.ndarray, what: str = "grade") -> str | None:
    """Return why agreement beyond chance is undefined for these ratings (NaN = not rated), or None: no ratings
    at all, or a single value everywhere (kappa and alpha divide 0 by 0)."""
    arrays = [np.asarray(r).ravel() for r in ratings]
    flat = np.concatenate(arrays) if arrays else np.array([])
    if flat.dtype.kind == "f":
        flat = flat[~np.isnan(flat)]
    distinct = np.unique(flat)
    if distinct.size == 0:
        return "no answer was rated by both, so agreement is undefined"
    if distinct.size > 1:
        return None
    v = distinct[0]
    shown = f"{float(v):g}" if isinstance(v, (int, float, np.number)) else str(v)
    return f"every {what} is {shown}, so agreement beyond chance is undefined"


def _kappa_weights(values: np.ndarray, weights: str | None) -> np.ndarray:
    if weights is None:
        return 1.0 - np.eye(len(values))
    if weights not in ("linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    dist = np.abs(values.astype(np.float64)[:, None] - values.astype(np.float64)[None, :])
    return dist if weights == "linear" else dist ** 2


def krippendorff_alpha(data: np.ndarray | Sequence[Sequence[float]], level: str = "interval") -> float:
    """Return Krippendorff's alpha of a units × raters matrix (NaN = not rated) at ``level``: "nominal",
    "ordinal", "interval" or "ratio"; the package takes raters × units: ``krippendorff.alpha`` of ``x.T``."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"krippendorff_alpha needs a 2-d units × raters matrix (one row per unit), not a "
                         f"{x.ndim}-d array")
    x = x[(~np.isnan(x)).sum(axis=1) >= 2]
    if x.size == 0:
        return float("nan")
    values = np.unique(x[~np.isnan(x)])
    counts = np.zeros((x.shape[0], len(values)))  # n_uc: how many raters gave unit u value c
    rows, cols = np.nonzero(~np.isnan(x))
    np.add.at(counts, (rows, np.searchsorted(values, x[rows, cols])), 1.0)
    m = counts.sum(axis=1)
    coincidence = np.einsum("uc,uk,u->ck", counts, counts, 1.0 / (m - 1)) - np.diag((counts / (m - 1)[:, None]).sum(0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    delta = _delta(values, n_c, level)
    expected = (np.outer(n_c, n_c) * delta).sum()
    if expected == 0:
        return float("nan")
    return float(1.0 - (n - 1) * (coincidence * delta).sum() / expected)


def _delta(values: np.ndarray, n_c: np.ndarray, level: str) -> np.ndarray:
    """Return the squared distance metric δ²(c, k) between every two values at ``level``."""
    c, k = values[:, None], values[None, :]
    if level == "nominal":
        return (c != k).astype(np.float64)
    if level == "interval":
        return (c - k) ** 2
    if level == "ratio":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nan_to_num(((c - k) / (c + k)) ** 2)
    cum = np.concatenate([[0.0], np.cumsum(n_c)])  # ordinal: ranks by the values' frequencies
    lo, hi = np.minimum.outer(np.arange(len(values)), np.arange(len(values))), \
        np.maximum.outer(np.arange(len(values)), np.arange(len(values)))
    between = cum[hi + 1] - cum[lo]
    return (between - (n_c[lo] + n_c[hi]) / 2.0) ** 2
