"""Each judge's agreement with human reviews, with a bootstrap interval: what ``agreement_min`` gates.

The value is the statistic of the report's judge-vs-human table (:func:`bench.analysis.judge_vs_human`):
Cohen's kappa of the judge's grades against the latest human reviews of the same items, quadratic-weighted
on the composite score (rubric scales are ordinal), nominal on a pairwise judge's verdict. A review covers an
answer on a rubric version, for every judge (and repeat) of that version (docs/review.md), so each review is
counted for each of their judgments here, not only for the judgment it was saved on. The interval resamples
the pairs the kappa is computed over, with replacement.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from bench.analysis import COMPOSITE, RunTables, cohen_kappa, complete_pairs, judge_vs_human, percentile_interval

AGREEMENT_COLUMNS = {"judge": pl.Utf8, "criterion": pl.Utf8, "n": pl.Int64, "kappa": pl.Float64,
                     "ci_low": pl.Float64, "ci_high": pl.Float64, "note": pl.Utf8}


def human_agreement(t: RunTables, *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Return per judge of the run its agreement with human reviews: criterion ("composite", or "verdict" for a
    pairwise judge), n (reviewed judgments with a grade of both), kappa, its bootstrap CI and a note saying why
    kappa is missing (no review, or undefined), or null."""
    reviews = per_judgment(t)
    table = judge_vs_human(t.scores, t.judgments, reviews)
    pairwise = set(t.judgments.filter(pl.col("mode") == "pairwise")["judge"].to_list())
    rng = np.random.default_rng(seed)
    rows = []
    for judge in sorted(t.judgments["judge"].drop_nulls().unique().to_list()):
        criterion, weights = ("verdict", None) if judge in pairwise else (COMPOSITE, "quadratic")
        shown = table.filter((pl.col("judge") == judge) & (pl.col("criterion") == criterion))
        if shown.is_empty() or not shown["n"][0]:
            rows.append({"judge": judge, "criterion": criterion, "n": 0, "kappa": None, "ci_low": None,
                         "ci_high": None, "note": "no human review of its judgments (bench review export/apply)"})
            continue
        x, y = _pairs(t, reviews, judge, criterion)
        lo, hi = _interval(x, y, weights, rng, resamples, level)
        rows.append({"judge": judge, "criterion": criterion, "n": int(shown["n"][0]), "kappa": shown["kappa"][0],
                     "ci_low": lo, "ci_high": hi, "note": shown["note"][0]})
    return pl.DataFrame(rows, schema=AGREEMENT_COLUMNS)


def per_judgment(t: RunTables) -> pl.DataFrame:
    """Return the run's review rows copied onto every judgment of the answer (or pair) and rubric version each
    review covers, whichever of those judgments it was saved on."""
    keys = t.judgments.select(pl.col("id").alias("judgment"), "candidate", "candidate_b", "rubric")
    unit = ["candidate", "candidate_b", "rubric"]
    return (t.reviews.join(keys, on="judgment").drop("judgment")
            .join(keys, on=unit, nulls_equal=True).drop(unit).select(t.reviews.columns))


def _pairs(t: RunTables, reviews: pl.DataFrame, judge: str, criterion: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (the judge's grades, the human ones) of the reviewed judgments, paired as judge_vs_human pairs them."""
    owned = t.judgments.filter(pl.col("judge") == judge)
    if criterion == "verdict":
        pairs = (reviews.filter(pl.col("verdict").is_not_null())
                 .unique(["judgment", "reviewer"], keep="first", maintain_order=True)
                 .join(owned.select(pl.col("id").alias("judgment"), pl.col("verdict").alias("judge_value")),
                       on="judgment")
                 .rename({"verdict": "human"}))
    else:
        mine = t.scores.filter((pl.col("judge") == judge) & (pl.col("criterion") == criterion))
        pairs = (reviews.filter(pl.col("criterion") == criterion)
                 .join(owned.select(pl.col("id").alias("judgment")), on="judgment")
                 .join(mine.select("judgment", pl.col("value").alias("judge_value")), on="judgment", how="left")
                 .rename({"value": "human"}))
    x, y, _dropped = complete_pairs(pairs["judge_value"].to_numpy(), pairs["human"].to_numpy())
    if criterion == "verdict":  # nominal kappa reads labels only: integer codes make each resample cheap
        _values, codes = np.unique(np.concatenate([x.astype(str), y.astype(str)]), return_inverse=True)
        x, y = codes[: x.size], codes[x.size:]
    return x, y


def _interval(x: np.ndarray, y: np.ndarray, weights: str | None, rng: np.random.Generator, resamples: int,
              level: float) -> tuple[float | None, float | None]:
    """Return the percentile interval of kappa over resamples of the pairs (None when there is no pair); a
    resample whose kappa is undefined (every grade the same) is left out."""
    if x.size == 0:
        return None, None
    draws = rng.integers(0, x.size, size=(resamples, x.size))
    kappas = np.array([cohen_kappa(x[i], y[i], weights) for i in draws])
    if np.isnan(kappas).all():
        return None, None
    lo, hi = percentile_interval(kappas, level)
    return float(lo), float(hi)
