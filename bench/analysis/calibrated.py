"""A leaderboard calibrated by human reviews: prediction-powered inference (PPI++), per judge and cell.

A judge's mean score is a biased estimate of what a human would give; the mean of the reviewed
items alone is unbiased but wide. PPI combines them: with ``n`` reviewed judgments (judge score
``f_i``, human score ``y_i``) and ``N`` unreviewed ones (judge scores ``g_j``) of one cell,

    estimate = λ·mean(g) + mean(y − λ·f)
    variance = λ²·var(g)/N + var(y − λ·f)/n

The second term corrects the judge's bias, whatever it is, so the interval is valid however
biased the judge (Angelopoulos et al. 2023, "Prediction-powered inference"). PPI++ (Angelopoulos,
Duchi & Zrnic 2023) tunes λ to the variance-minimising ``cov(y, f) / ((1 + n/N)·var(f))``,
clipped to [0, 1]. λ = 0 is the human-only estimate, so when the tuned variance is not smaller
than the human-only one λ = 0 is used: the calibrated interval is never wider than the
human-only interval (with a useless judge it *is* the human-only interval). The intervals use Student's t with n − 1
degrees of freedom (the reviews' term dominates with few reviews; a normal quantile under-covers
there: 0.92 at 20 reviews in ``benchmarks/calibration.py``), valid for reviews drawn at random from the cell's
judgments (the review panel's "random" filter, ``ReviewSession.select``, proposes such a sample; a hand-picked
one can bias it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.tables import COMPOSITE

MIN_REVIEWS = 2  # fewer reviewed judgments in a cell: no estimate (a variance needs two)

CALIBRATED_SCHEMA = {"judge": pl.Utf8, "cell": pl.Utf8, "estimate": pl.Float64, "ci_low": pl.Float64,
                     "ci_high": pl.Float64, "n": pl.Int64, "n_human": pl.Int64, "judge_only": pl.Float64,
                     "judge_only_ci_low": pl.Float64, "judge_only_ci_high": pl.Float64, "human_only": pl.Float64,
                     "human_only_ci_low": pl.Float64, "human_only_ci_high": pl.Float64, "lam": pl.Float64,
                     "reviews_to_halve": pl.Int64, "note": pl.Utf8}


@dataclass(frozen=True)
class PPI:
    """One cell's calibrated mean: the estimate, its standard error and what went into it."""

    estimate: float
    se: float
    lam: float
    judge_part: float  # λ²·var(g)/N: the variance reviews cannot shrink
    human_part: float  # var(y − λf)/n: the variance that shrinks as 1/n


def ppi_mean(y: np.ndarray, f: np.ndarray, g: np.ndarray) -> PPI:
    """Return the PPI++ mean of ``y`` (human scores of the reviewed items, judged ``f``) given the judge
    scores ``g`` of the unreviewed items. Needs len(y) ≥ 2."""
    n, big_n = len(y), len(g)
    human_var = float(np.var(y, ddof=1)) / n
    if big_n < 2 or float(np.var(f, ddof=1)) == 0.0:
        return PPI(float(np.mean(y)), math.sqrt(human_var), 0.0, 0.0, human_var)
    cov = float(np.cov(y, f, ddof=1)[0, 1])
    lam = min(1.0, max(0.0, cov / ((1 + n / big_n) * float(np.var(f, ddof=1)))))
    judge_part = lam ** 2 * float(np.var(g, ddof=1)) / big_n
    human_part = float(np.var(y - lam * f, ddof=1)) / n
    if judge_part + human_part >= human_var:  # never wider than the reviews alone
        return PPI(float(np.mean(y)), math.sqrt(human_var), 0.0, 0.0, human_var)
    est = lam * float(np.mean(g)) + float(np.mean(y - lam * f))
    return PPI(est, math.sqrt(judge_part + human_part), lam, judge_part, human_part)


def reviews_to_halve(p: PPI, n_human: int) -> int | None:
    """Return how many more reviews would halve the interval, or None when reviews alone cannot (the judge
    term λ²·var(g)/N is already more than a quarter of the variance: more judged items are needed too)."""
    target = (p.se ** 2) / 4
    room = target - p.judge_part
    if p.human_part <= 0 or room <= 0:
        return None
    needed = p.human_part * n_human / room  # human_part scales as 1/n at a fixed residual variance
    return max(0, math.ceil(needed) - n_human)


def human_scores(reviews: pl.DataFrame, criterion: str = COMPOSITE) -> pl.DataFrame:
    """Return one human score per reviewed judgment: the latest review of each reviewer, averaged over reviewers."""
    require(reviews, ("judgment", "reviewer", "criterion", "value", "created_at"), "human_scores", "reviews")
    latest = (reviews.filter((pl.col("criterion") == criterion) & pl.col("value").is_not_null())
              .sort("created_at").group_by("judgment", "reviewer").agg(pl.col("value").last()))
    return latest.group_by("judgment").agg(pl.col("value").mean().alias("human"))


def calibrated_leaderboard(judged: pl.DataFrame, reviews: pl.DataFrame, *, criterion: str = COMPOSITE,
                           level: float = 0.95) -> pl.DataFrame:
    """Return the human-calibrated mean of each (judge, cell) with its interval, beside the judge-only and
    human-only ones.

    ``judged``: the judgments frame of ``bench.analysis.tables`` (its composite ``score``) or its long
    scores frame (any ``criterion``); ``reviews``: its reviews frame. The unit is an answer: a judge's
    ``repeats`` of one answer are averaged, so repeats never pass for more evidence than they are. A
    human review grades the answer on the rubric version it was shown with, so it calibrates every
    judge that graded that answer on the same rubric version, not only the judgment it was saved on.
    ``n`` counts the cell's judged answers, ``n_human`` the reviewed ones; a cell with fewer than 2
    gets no estimate and a ``note`` saying so. ``lam`` is PPI++'s λ (0: the judge did not help);
    ``reviews_to_halve`` how many more random reviews would halve the interval (null: reviews alone cannot).
    """
    z = NormalDist().inv_cdf(0.5 + level / 2)  # the judge-only interval's; reviews get Student's t
    values, keys = _judge_values(judged, criterion)
    human = (human_scores(reviews, criterion).join(keys, on="judgment")
             .group_by("item", "rubric").agg(pl.col("human").mean()))
    data = (values.group_by("judge", "cell", "item", "rubric").agg(pl.col("value").mean())
            .join(human, on=["item", "rubric"], how="left"))
    rows = [_row(judge, cell, part, z) for (judge, cell), part in
            data.sort("judge", "cell", "item").group_by("judge", "cell", maintain_order=True)]
    return pl.DataFrame(rows, schema=CALIBRATED_SCHEMA, orient="row")


def _judge_values(judged: pl.DataFrame, criterion: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (judge, cell, item, rubric and value of every successful grade on ``criterion``; judgment → item
    and rubric of every graded judgment a review may be saved on). The item is the answer graded."""
    rubric = (pl.col("rubric") if "rubric" in judged.columns else pl.lit(None, pl.Utf8)).fill_null("").alias("rubric")
    if "criterion" in judged.columns:  # the long scores frame
        require(judged, ("judge", "cell", "judgment", "criterion", "value"), "calibrated_leaderboard", "scores")
        item = pl.coalesce("candidate", "judgment") if "candidate" in judged.columns else pl.col("judgment")
        part = judged.filter(pl.col("criterion") == criterion).with_columns(item.alias("item"), rubric)
        keys = part.select("judgment", "item", "rubric").unique("judgment")
        return part.filter(pl.col("cell").is_not_null()).select("judge", "cell", "item", "rubric", "value"), keys
    require(judged, ("judge", "cell", "id", "candidate", "mode", "score", "error"), "calibrated_leaderboard",
            "judgments")
    if criterion != COMPOSITE:
        raise ValueError(f"calibrated_leaderboard: criterion {criterion!r} needs the long scores frame "
                         "(`load_run(...).scores`); the judgments frame has the composite score only")
    graded = judged.filter(pl.col("mode") != "pairwise").with_columns(pl.col("candidate").alias("item"), rubric)
    ok = pl.col("error").is_null() & pl.col("score").is_not_null() & pl.col("cell").is_not_null()
    values = graded.filter(ok).select("judge", "cell", "item", "rubric", pl.col("score").cast(pl.Float64).alias("value"))
    return values, graded.select(pl.col("id").alias("judgment"), "item", "rubric")


def _row(judge: str, cell: str, part: pl.DataFrame, z: float) -> tuple:
    f_all = part["value"].to_numpy().astype(float)
    reviewed = part.filter(pl.col("human").is_not_null())
    y, f = reviewed["human"].to_numpy().astype(float), reviewed["value"].to_numpy().astype(float)
    g = part.filter(pl.col("human").is_null())["value"].to_numpy().astype(float)
    j_mean = float(f_all.mean())
    j_half = z * float(f_all.std(ddof=1)) / math.sqrt(len(f_all)) if len(f_all) > 1 else None
    judge_only = (j_mean, None if j_half is None else j_mean - j_half, None if j_half is None else j_mean + j_half)
    n_h = len(y)
    if n_h < MIN_REVIEWS:
        note = f"not enough reviews: {n_h} of the {MIN_REVIEWS} a calibrated estimate needs"
        human = float(y.mean()) if n_h else None
        return (judge, cell, None, None, None, len(f_all), n_h, *judge_only, human, None, None, None, None, note)
    from scipy.stats import t as student_t  # noqa: PLC0415 (scipy: heavy, only a calibrated row needs it)

    p = ppi_mean(y, f, g)
    z = float(student_t.ppf(NormalDist().cdf(z), n_h - 1))  # the same level, with n_h − 1 degrees of freedom
    h_mean, h_half = float(y.mean()), z * float(y.std(ddof=1)) / math.sqrt(n_h)
    note = "" if p.lam > 0 else "the judge's scores did not narrow the interval: human-only estimate"
    return (judge, cell, p.estimate, p.estimate - z * p.se, p.estimate + z * p.se, len(f_all), n_h, *judge_only,
            h_mean, h_mean - h_half, h_mean + h_half, p.lam, reviews_to_halve(p, n_h), note)
