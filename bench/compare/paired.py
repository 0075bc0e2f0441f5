"""Paired statistics of two runs' grades of the same items: differences, intervals, tests, win rates.
The unit is the scenario; intervals bootstrap scenarios, tests are exact sign flips up to ``N_EXACT`` scenarios
else Wilcoxon, Holm-corrected across rows; ``min_p`` says when too few scenarios can never be significant."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
from scipy import stats

from bench.analysis.bootstrap import N_EXACT, bootstrap_means, column_means, exact_sign_flip, holm, percentile_interval
from bench.compare.matching import CHANGED

ROW = ["cell_a", "cell_b", "judge", "criterion"]  # a row of a comparison
ROW_SCHEMA = {"cell_a": pl.Utf8, "cell_b": pl.Utf8, "judge": pl.Utf8, "criterion": pl.Utf8, "n_matched": pl.Int64,
              "n_changed": pl.Int64, "mean_a": pl.Float64, "mean_b": pl.Float64, "diff": pl.Float64,
              "ci_low": pl.Float64, "ci_high": pl.Float64, "p_value": pl.Float64, "p_holm": pl.Float64,
              "min_p": pl.Float64, "test": pl.Utf8, "significant": pl.Boolean, "n_scenarios": pl.Int64,
              "n_unscored": pl.Int64}
PAIRWISE_SCHEMA = {"cell_a": pl.Utf8, "cell_b": pl.Utf8, "judge": pl.Utf8, "n": pl.Int64, "win_rate_b": pl.Float64,
                   "ci_low": pl.Float64, "ci_high": pl.Float64, "wins": pl.Int64, "ties": pl.Int64,
                   "losses": pl.Int64, "n_scenarios": pl.Int64}


def paired_test(d: np.ndarray) -> tuple[float, str | None]:
    """Return (two-sided p-value, test name) for paired differences ``d`` (one per scenario): the exact
    permutation test up to ``N_EXACT`` scenarios, Wilcoxon above; p = 1 when nothing changed, NaN with none."""
    d = np.where(np.abs(d) <= CHANGED, 0.0, np.asarray(d, dtype=np.float64))  # float residue is no change
    if d.size == 0:
        return float("nan"), None
    test = "permutation" if d.size <= N_EXACT else "wilcoxon"
    if not d.any():
        return 1.0, test
    if test == "permutation":
        return exact_sign_flip(d), test
    with warnings.catch_warnings():  # scipy says when ties or zeros switch it to the normal approximation
        warnings.simplefilter("ignore")
        return float(stats.wilcoxon(d).pvalue), test


class _Grid:
    """Rows of item-level values as sorted scenarios × sorted ``key`` columns; means and counts are bincount sums."""

    def __init__(self, frame: pl.DataFrame, key: list[str]):
        self.s = _sorted_codes(frame["scenario"])
        self.k = frame.select(pl.struct(key).rank("dense")).to_series().to_numpy().astype(np.int64) - 1
        self.shape = (int(self.s.max()) + 1, int(self.k.max()) + 1)
        self.flat = self.s * self.shape[1] + self.k
        first = np.empty(self.shape[1], dtype=np.int64)
        first[self.k[::-1]] = np.arange(self.k.size)[::-1]
        self.keys = frame[first].select(key)  # the key of each column
        self.count = self.sums(None)

    def sums(self, weights: np.ndarray | None) -> np.ndarray:
        """Return the scenarios × columns sums of ``weights`` (None: the number of rows)."""
        size = self.shape[0] * self.shape[1]
        return np.bincount(self.flat, weights=weights, minlength=size).reshape(self.shape)

    def means(self, values: pl.Series) -> np.ndarray:
        """Return the per-scenario mean of ``values`` in each column (NaN where a column has no row there)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self.sums(values.to_numpy().astype(np.float64)) / self.count, np.nan)

    def totals(self, values: pl.Series | None = None) -> np.ndarray:
        """Return the per-column sum of ``values`` over its rows (None: how many rows)."""
        weights = None if values is None else values.to_numpy().astype(np.float64)
        return np.bincount(self.k, weights=weights, minlength=self.shape[1]).astype(np.int64)


def _sorted_codes(values: pl.Series) -> np.ndarray:
    """Return each value's index among the distinct values in sorted order (hashed once, then 1 sort per value)."""
    codes = values.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    distinct, local = np.unique(codes, return_inverse=True)
    first = np.empty(distinct.size, dtype=np.int64)
    first[local[::-1]] = np.arange(local.size)[::-1]
    rank = np.empty(distinct.size, dtype=np.int64)
    rank[values.gather(first).arg_sort().to_numpy()] = np.arange(distinct.size)
    return rank[local]


def _interval(x: np.ndarray, n_boot: int, seed: int, alpha: float) -> tuple[pl.Series, pl.Series]:
    lo, hi = percentile_interval(bootstrap_means(x, n_boot, seed), 1.0 - alpha)
    return (pl.Series("ci_low", np.asarray(lo, dtype=np.float64)), pl.Series("ci_high", np.asarray(hi, dtype=np.float64)))


def min_p_value(n_scenarios: np.ndarray | int) -> np.ndarray:
    """Return the smallest two-sided p-value a paired test can give with ``n_scenarios`` scenarios: 2/2ⁿ (1 if none)."""
    n = np.asarray(n_scenarios, dtype=np.float64)
    return np.minimum(1.0, np.exp2(1.0 - n))  # 2/2ⁿ without 2ⁿ overflowing (a 0 for thousands of scenarios)


def paired_rows(items: pl.DataFrame, shared: pl.DataFrame, *, n_boot: int, seed: int, alpha: float,
                lost: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return one row per (cell_a, cell_b, judge, criterion): counts, means, B − A with CI and tests (``lost``: n 0)."""
    parts = [_tested(items, n_boot=n_boot, seed=seed, alpha=alpha)] if not items.is_empty() else []
    if lost is not None and not lost.is_empty():
        parts.append(_untested(lost))
    if not parts:
        return pl.DataFrame(schema=ROW_SCHEMA)
    rows = (pl.concat(parts).join(shared, on=["cell_a", "cell_b"], how="left")
            .with_columns((pl.col("answers").fill_null(0) - pl.col("n_matched")).clip(0).alias("n_unscored")))
    order = [pl.col(c) for c in ("cell_a", "cell_b", "judge")] + [pl.col("criterion") != "composite", "criterion"]
    return rows.sort(order).select(list(ROW_SCHEMA))


def _untested(lost: pl.DataFrame) -> pl.DataFrame:
    """Return the rows of (cell_a, cell_b, judge, criterion) graded in run A only: nothing matched, no statistic."""
    nan = pl.lit(float("nan"), dtype=pl.Float64)
    return lost.select(*ROW, n_matched=pl.lit(0, dtype=pl.Int64), n_changed=pl.lit(0, dtype=pl.Int64), mean_a=nan,
                       mean_b=nan, diff=nan, ci_low=nan, ci_high=nan, p_value=nan, p_holm=nan,
                       min_p=pl.lit(1.0, dtype=pl.Float64), test=pl.lit(None, dtype=pl.Utf8),
                       n_scenarios=pl.lit(0, dtype=pl.Int64), significant=pl.lit(False)
                       ).select([c for c in ROW_SCHEMA if c != "n_unscored"])


def _tested(items: pl.DataFrame, *, n_boot: int, seed: int, alpha: float) -> pl.DataFrame:
    """Return the statistics of each (cell_a, cell_b, judge, criterion) of ``items`` (ROW_SCHEMA but ``n_unscored``)."""
    g = _Grid(items, ROW)
    d = g.means(items["diff"])
    mean, n = column_means(d)
    tested = [paired_test(col[~np.isnan(col)]) for col in d.T]
    p = np.array([t[0] for t in tested], dtype=np.float64)
    rows = g.keys.with_columns(
        pl.Series("n_matched", g.totals()), pl.Series("n_changed", g.totals(items["diff"].abs() > CHANGED)),
        pl.Series("mean_a", column_means(g.means(items["value_a"]))[0]),
        pl.Series("mean_b", column_means(g.means(items["value_b"]))[0]), pl.Series("diff", mean),
        *_interval(d, n_boot, seed, alpha), pl.Series("p_value", p), pl.Series("p_holm", holm_once(g.keys, p)),
        pl.Series("min_p", min_p_value(n)), pl.Series("test", [t[1] for t in tested], dtype=pl.Utf8),
        pl.Series("n_scenarios", n.astype(np.int64)))
    rows = rows.with_columns(((pl.col("p_holm") < alpha) & ((pl.col("ci_low") > 0) | (pl.col("ci_high") < 0)))
                             .fill_null(False).alias("significant"))
    return rows.select([c for c in ROW_SCHEMA if c != "n_unscored"])


def holm_once(keys: pl.DataFrame, p: np.ndarray) -> np.ndarray:
    """Return Holm's adjusted p-values of the rows ``keys``, each criterion counted once: a judge's composite
    of one criterion is that criterion's test, so it stays out of the family and takes its adjusted value."""
    k = keys.with_row_index("i")
    one = (k.filter(pl.col("criterion") != "composite").group_by("cell_a", "cell_b", "judge")
           .agg(pl.len().alias("criteria"), pl.col("i").first().alias("twin")).filter(pl.col("criteria") == 1))
    twins = k.filter(pl.col("criterion") == "composite").join(one, on=["cell_a", "cell_b", "judge"])
    dup, twin = twins["i"].to_numpy().astype(np.int64), twins["twin"].to_numpy().astype(np.int64)
    family = np.asarray(p, dtype=np.float64).copy()
    same = np.isclose(family[dup], family[twin], rtol=1e-9, atol=0.0)  # the same test (a weighted composite is)
    dup, twin = dup[same], twin[same]
    family[dup] = np.nan
    adjusted = holm(family)
    adjusted[dup] = adjusted[twin]
    return adjusted


def win_rate_rows(fought: pl.DataFrame, *, n_boot: int, seed: int, alpha: float) -> pl.DataFrame:
    """Return per (cell_a, cell_b, pairwise judge) B's win rate over A's (ties ½, per scenario, bootstrapped)."""
    if fought.is_empty():
        return pl.DataFrame(schema=PAIRWISE_SCHEMA)
    won = battle_wins(fought)
    g = _Grid(fought, ["cell_a", "cell_b", "judge"])
    rate, scenarios = column_means(g.means(won))
    out = g.keys.with_columns(
        pl.Series("n", g.totals()), pl.Series("win_rate_b", rate), *_interval(g.means(won), n_boot, seed, alpha),
        pl.Series("wins", g.totals(won == 1.0)), pl.Series("ties", g.totals(won == 0.5)),
        pl.Series("losses", g.totals(won == 0.0)), pl.Series("n_scenarios", scenarios.astype(np.int64)))
    return out.sort("cell_a", "cell_b", "judge").select(list(PAIRWISE_SCHEMA))


def battle_wins(fought: pl.DataFrame) -> pl.Series:
    """Return each battle's win of B's answer over A's (``won``): 1 when it did better, ½ as well, 0 worse."""
    gap = fought["score_b"] - fought["score_a"]
    return pl.Series("won", np.where(gap > CHANGED, 1.0, np.where(gap < -CHANGED, 0.0, 0.5)))
