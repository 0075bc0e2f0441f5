"""Is a judge stable enough to trust? Test–retest agreement over its ``repeats: k`` gradings (``icc``, ``alpha``,
``within_var``, ``verdict``: "stable" at ICC ≥ 0.75), and a leaderboard including the judge's own variance."""

from __future__ import annotations

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.agreement import krippendorff_alpha
from bench.analysis.bootstrap import percentile_interval
from bench.analysis.tables import COMPOSITE

STABLE_ICC = 0.75
MIN_ITEMS = 3  # items graded at least twice before a judge's stability is stated

STABILITY_SCHEMA = {"judge": pl.Utf8, "criterion": pl.Utf8, "items": pl.Int64, "repeats": pl.Int64,
                    "icc": pl.Float64, "alpha": pl.Float64, "within_var": pl.Float64, "verdict": pl.Utf8}
WIDENED_SCHEMA = {"judge": pl.Utf8, "cell": pl.Utf8, "mean": pl.Float64, "ci_low": pl.Float64,
                  "ci_high": pl.Float64, "widened_ci_low": pl.Float64, "widened_ci_high": pl.Float64,
                  "widening": pl.Float64, "scenarios": pl.Int64}
ITEM_VARIANCE_SCHEMA = {"judge": pl.Utf8, "cell": pl.Utf8, "scenario": pl.Utf8, "candidate": pl.Utf8,
                        "repeats": pl.Int64, "mean": pl.Float64, "variance": pl.Float64, "min": pl.Float64,
                        "max": pl.Float64}


def icc_oneway(groups: list[np.ndarray]) -> float:
    """Return ICC(1,1) of items graded several times each (``groups``: one array of scores per item, ≥ 2 each)."""
    k = np.array([len(g) for g in groups], dtype=float)
    n, total = len(groups), k.sum()
    grand = np.concatenate(groups).mean()
    means = np.array([g.mean() for g in groups])
    msb = float((k * (means - grand) ** 2).sum() / (n - 1))
    msw = float(sum(((g - g.mean()) ** 2).sum() for g in groups) / (total - n))
    n0 = (total - (k ** 2).sum() / total) / (n - 1)
    if msb + (n0 - 1) * msw == 0:
        return float("nan")  # every score identical: nothing to correlate
    return (msb - msw) / (msb + (n0 - 1) * msw)


def judge_stability(scores: pl.DataFrame, *, criteria: list[str] | None = None) -> pl.DataFrame:
    """Return per (judge, criterion) the test–retest ICC, alpha, mean within-item variance and a verdict (an item:
    a candidate or a pair graded by one judge; ``criteria`` default: every one)."""
    require(scores, ("judge", "candidate", "criterion", "value", "repeat"), "judge_stability", "scores")
    wanted = scores if criteria is None else scores.filter(pl.col("criterion").is_in(criteria))
    rows = []
    for (judge, crit), part in wanted.sort("judge", "criterion").group_by("judge", "criterion", maintain_order=True):
        items = part.group_by("candidate").agg(pl.col("value")).filter(pl.col("value").list.len() >= 2)
        groups = [np.asarray(v, dtype=float) for v in items["value"].to_list()]
        most = int(part.group_by("candidate").len()["len"].max())
        if len(groups) < MIN_ITEMS:
            rows.append((judge, crit, len(groups), most, None, None, None, "not enough repeats"))
            continue
        icc = icc_oneway(groups)
        width = max(len(g) for g in groups)
        matrix = np.full((len(groups), width), np.nan)
        for r, g in enumerate(groups):
            matrix[r, :len(g)] = g
        alpha = krippendorff_alpha(matrix, "interval")
        within = float(np.mean([g.var(ddof=1) for g in groups]))
        verdict = "stable" if within == 0 or (np.isfinite(icc) and icc >= STABLE_ICC) else "unstable"
        rows.append((judge, crit, len(groups), most, None if np.isnan(icc) else icc,
                     None if np.isnan(alpha) else alpha, within, verdict))
    return pl.DataFrame(rows, schema=STABILITY_SCHEMA, orient="row")


def item_variance(scores: pl.DataFrame, *, criterion: str = COMPOSITE, top: int | None = None) -> pl.DataFrame:
    """Return per (judge, answer) graded at least twice the variance of its scores across repeats, with their
    mean, min and max, most variable first (``top``: that many per judge)."""
    require(scores, ("judge", "cell", "scenario", "candidate", "criterion", "value"), "item_variance", "scores")
    v = pl.col("value")
    items = (scores.filter(pl.col("criterion") == criterion)
             .group_by("judge", "cell", "scenario", "candidate")
             .agg(v.len().cast(pl.Int64).alias("repeats"), v.mean().alias("mean"), v.var(ddof=1).alias("variance"),
                  v.min().alias("min"), v.max().alias("max"))
             .filter(pl.col("repeats") >= 2)
             .sort(["judge", "variance", "cell", "scenario", "candidate"], descending=[False, True, False, False, False]))
    if top is not None:
        items = items.group_by("judge", maintain_order=True).head(top)
    return items.select(list(ITEM_VARIANCE_SCHEMA)).cast(ITEM_VARIANCE_SCHEMA)


def stability_leaderboard(scores: pl.DataFrame, *, criterion: str = COMPOSITE, resamples: int = 1000,
                          seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Return per (judge, cell) the mean score with the plain bootstrap interval (scenarios resampled) and the
    widened one (scenarios, then each item's repeats, resampled); ``widening`` = widened / plain width."""
    require(scores, ("judge", "cell", "scenario", "candidate", "criterion", "value"), "stability_leaderboard",
            "scores")
    part = scores.filter((pl.col("criterion") == criterion) & pl.col("cell").is_not_null())
    rows = []
    for (judge, cell), g in part.sort("judge", "cell").group_by("judge", "cell", maintain_order=True):
        rows.append((judge, cell, *_cell_intervals(g, resamples, seed, level)))
    return pl.DataFrame(rows, schema=WIDENED_SCHEMA, orient="row")


def _cell_intervals(g: pl.DataFrame, resamples: int, seed: int, level: float) -> tuple:
    items = g.group_by("scenario", "candidate", maintain_order=True).agg(pl.col("value")).sort("scenario",
                                                                                                "candidate")
    scen = np.unique(items["scenario"].to_numpy(), return_inverse=True)[1]
    values = [np.asarray(v, dtype=float) for v in items["value"].to_list()]
    s = int(scen.max()) + 1
    rng = np.random.default_rng(seed)
    plain_items = np.array([v.mean() for v in values])
    # each item's mean over its repeats drawn with replacement, per resample (B × items)
    redrawn = np.column_stack([v[rng.integers(0, len(v), (resamples, len(v)))].mean(axis=1) for v in values])
    counts = rng.multinomial(s, np.full(s, 1.0 / s), size=resamples)  # scenarios drawn per resample

    def cell_means(item_values: np.ndarray) -> np.ndarray:  # (B × items) → B means (scenario means averaged)
        sums = np.zeros((item_values.shape[0], s))
        np.add.at(sums.T, scen, item_values.T)
        per_scenario = sums / np.bincount(scen, minlength=s)
        return (per_scenario * counts).sum(axis=1) / s

    mean = float((np.bincount(scen, weights=plain_items, minlength=s) / np.bincount(scen, minlength=s)).mean())
    lo, hi = percentile_interval(cell_means(np.broadcast_to(plain_items, redrawn.shape)), level)
    wlo, whi = percentile_interval(cell_means(redrawn), level)
    width = float(hi - lo)
    return (mean, float(lo), float(hi), float(wlo), float(whi), (float(whi - wlo) / width) if width > 0 else None, s)
