"""A leaderboard calibrated by human reviews: prediction-powered inference (PPI++), per judge and cell; λ is
clipped to [0, 1] and cross-fitted, so the interval is valid however biased the judge (docs/analysis.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.tables import COMPOSITE

MIN_REVIEWS = 2  # fewer reviewed judgments in a cell: no estimate (a variance needs two)
FEW_REVIEWS = 10  # fewer: flagged `small_sample` (benchmarks/calibration.py validates coverage from 10 reviews)

CALIBRATED_SCHEMA = {"judge": pl.Utf8, "cell": pl.Utf8, "estimate": pl.Float64, "ci_low": pl.Float64,
                     "ci_high": pl.Float64, "n": pl.Int64, "n_human": pl.Int64, "judge_only": pl.Float64,
                     "judge_only_ci_low": pl.Float64, "judge_only_ci_high": pl.Float64, "human_only": pl.Float64,
                     "human_only_ci_low": pl.Float64, "human_only_ci_high": pl.Float64, "lam": pl.Float64,
                     "reviews_to_halve": pl.Int64, "small_sample": pl.Boolean, "note": pl.Utf8}


@dataclass(frozen=True)
class PPI:
    """One cell's calibrated mean: the estimate, its standard error and what went into it."""

    estimate: float
    se: float
    lam: float
    judge_part: float  # λ²·var(g)/N: the variance reviews cannot shrink
    human_part: float  # var(y − λf)/n: the variance that shrinks as 1/n
    floored: bool = False  # the variance floor, not the reviews' own spread, set human_part


def variance_floor(n: int, scale: tuple[float, float]) -> float:
    """Return the least variance credited to ``n`` scores on ``scale``: ``(range/2)²/n``, so agreeing scores do
    not collapse the interval; the floor fades as ``1/n``."""
    lo, hi = scale
    return ((hi - lo) / 2) ** 2 / n


@dataclass(frozen=True)
class Intervals:
    """Calibrated and human-only intervals of many cells: one entry per row of ``calibrated_intervals``' inputs."""

    ppi: PPI  # each field an array, one entry per cell (the estimate clipped to the scale)
    ci_low: np.ndarray
    ci_high: np.ndarray
    human: np.ndarray
    human_low: np.ndarray
    human_high: np.ndarray


def _cross_fitted_lams(y: np.ndarray, f: np.ndarray, big_n: int) -> np.ndarray:
    """Return λ_i per review: PPI++'s ``cov(y, f) / ((1 + n/N)·var(f))`` over the *other* reviews, clipped to
    [0, 1]; 0 where those others' judge scores do not vary."""
    n = y.shape[1]
    if n < 3:  # one other review: no covariance to tune on
        return np.zeros_like(y)
    dy, df = y - y.mean(1, keepdims=True), f - f.mean(1, keepdims=True)
    shrink = n / (n - 1)  # removing point i from centred sums: S_(-i) = S − n/(n−1)·d_i·e_i
    sff = (df * df).sum(1, keepdims=True) - shrink * df * df
    syf = (dy * df).sum(1, keepdims=True) - shrink * dy * df
    varies = sff > 1e-9 * (n - 2)
    lam = np.where(varies, syf / np.where(varies, sff, 1.0), 0.0) / (1 + n / big_n)
    return np.clip(lam, 0.0, 1.0)


def ppi_arrays(y: np.ndarray, f: np.ndarray, g: np.ndarray, floor: float = 0.0) -> PPI:
    """Return the PPI++ means of many cells at once, one entry per row of ``y`` (human scores of reviewed items,
    judged ``f``; rows of ≥ 2) and ``g`` (judge scores of the unreviewed). Variances floored at ``floor``."""
    n, big_n = y.shape[1], g.shape[1]
    if big_n < 2:
        y_var, zero = y.var(1, ddof=1), np.zeros(len(y))
        return PPI(y.mean(1), np.sqrt(np.maximum(y_var, floor) / n), zero, zero, np.maximum(y_var, floor) / n,
                   y_var < floor)
    lam_i = _cross_fitted_lams(y, f, big_n)
    lam, rect = lam_i.mean(1), y - lam_i * f
    rect_var = rect.var(1, ddof=1)
    judge_part = lam ** 2 * g.var(1, ddof=1) / big_n
    human_part = np.maximum(rect_var, floor) / n
    return PPI(lam * g.mean(1) + rect.mean(1), np.sqrt(judge_part + human_part), lam, judge_part, human_part,
               rect_var < floor)


def ppi_mean(y: np.ndarray, f: np.ndarray, g: np.ndarray, floor: float = 0.0) -> PPI:
    """Return the PPI++ mean of ``y`` (human scores of the reviewed items, judged ``f``) given the judge
    scores ``g`` of the unreviewed items (``ppi_arrays`` for one cell). Needs len(y) ≥ 2."""
    p = ppi_arrays(y[None, :], f[None, :], g[None, :], floor)
    return PPI(*(float(getattr(p, k)[0]) for k in ("estimate", "se", "lam", "judge_part", "human_part")),
               bool(p.floored[0]))


def calibrated_intervals(y: np.ndarray, f: np.ndarray, g: np.ndarray, *, scale: tuple[float, float],
                         level: float = 0.95) -> Intervals:
    """Return the calibrated and human-only intervals at ``level`` of many cells (rows as in ``ppi_arrays``):
    variances floored (``variance_floor``), Student's t with n − 1 df, estimates and bounds clipped to ``scale``."""
    from scipy.stats import t as student_t  # noqa: PLC0415 (scipy: heavy, only a calibrated row needs it)

    lo, hi = scale
    n = y.shape[1]
    floor = variance_floor(n, scale)
    p = ppi_arrays(y, f, g, floor)
    t = float(student_t.ppf(0.5 + level / 2, n - 1))
    est, h_mean = np.clip(p.estimate, lo, hi), np.clip(y.mean(1), lo, hi)
    h_half = t * np.sqrt(np.maximum(y.var(1, ddof=1), floor) / n)
    return Intervals(PPI(est, p.se, p.lam, p.judge_part, p.human_part, p.floored),
                     np.maximum(est - t * p.se, lo), np.minimum(est + t * p.se, hi), h_mean,
                     np.maximum(h_mean - h_half, lo), np.minimum(h_mean + h_half, hi))


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
    """Return one human score per reviewed judgment: each reviewer's latest blind review, averaged over
    reviewers (finite values only; a frame without a ``blind`` column is taken as blind)."""
    require(reviews, ("judgment", "reviewer", "criterion", "value", "created_at"), "human_scores", "reviews")
    blind = pl.col("blind").fill_null(False).last() if "blind" in reviews.columns else pl.lit(True)
    latest = (reviews.filter((pl.col("criterion") == criterion) & pl.col("value").is_not_null())
              .sort("created_at").group_by("judgment", "reviewer").agg(pl.col("value").last(), blind.alias("blind")))
    return (latest.filter(pl.col("blind") & pl.col("value").is_finite())
            .group_by("judgment").agg(pl.col("value").mean().alias("human")))


def calibrated_leaderboard(judged: pl.DataFrame, reviews: pl.DataFrame, *, criterion: str = COMPOSITE,
                           level: float = 0.95,
                           scale: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None) -> pl.DataFrame:
    """Return the human-calibrated mean of each (judge, cell) with its interval, beside the judge-only and
    human-only ones (unit: an answer); ``reviews_to_halve``: how many more reviews would halve the interval."""
    given = dict(scale) if isinstance(scale, Mapping) else {}
    for pair in ([scale] if scale is not None and not isinstance(scale, Mapping) else given.values()):
        if not pair[0] < pair[1]:
            raise ValueError(f"calibrated_leaderboard: scale={pair!r} must be (lowest, highest) with lowest < "
                             "highest, e.g. the rubric's (1, 5)")
    z = NormalDist().inv_cdf(0.5 + level / 2)  # the judge-only interval's; reviews get Student's t
    values, keys = _judge_values(judged, criterion)
    human = (human_scores(reviews, criterion).join(keys, on="judgment")
             .group_by("item", "rubric").agg(pl.col("human").mean()))
    data = (values.group_by("judge", "cell", "item", "rubric").agg(pl.col("value").mean())
            .join(human, on=["item", "rubric"], how="left"))
    ranges = _observed_scales(data)
    pick = (lambda judge, part: given.get(judge) or _scale_of(part, ranges)) if given else (  # noqa: E731
        lambda judge, part: scale or _scale_of(part, ranges))
    rows = [_row(judge, cell, part, z, level, pick(judge, part)) for (judge, cell), part in
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


def _observed_scales(data: pl.DataFrame) -> dict[str, tuple[float, float]]:
    """Return each rubric's (lowest, highest) score seen from any judge or reviewer: the stand-in for the
    rubric's scale when none is given (never wider than the scale, so its floor is never larger)."""
    ranges = data.group_by("rubric").agg(pl.min_horizontal(pl.col("value").min(), pl.col("human").min()).alias("lo"),
                                         pl.max_horizontal(pl.col("value").max(), pl.col("human").max()).alias("hi"))
    return {r: (float(lo), float(hi)) for r, lo, hi in ranges.iter_rows()}


def _scale_of(part: pl.DataFrame, ranges: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """Return the observed scale spanning every rubric of one (judge, cell)."""
    spans = [ranges[r] for r in part["rubric"].unique()]
    return min(lo for lo, _ in spans), max(hi for _, hi in spans)


def _judge_only(f_all: np.ndarray, z: float, scale: tuple[float, float]) -> tuple:
    """Return the judge-only (mean, low, high): a normal interval, floored and clipped like the reviews'."""
    mean = float(f_all.mean())
    if len(f_all) < 2:
        return mean, None, None
    floor = variance_floor(len(f_all), scale) if scale[1] > scale[0] else 0.0
    half = z * math.sqrt(max(float(f_all.var(ddof=1)), floor) / len(f_all))
    return mean, max(mean - half, scale[0]), min(mean + half, scale[1])


def _row(judge: str, cell: str, part: pl.DataFrame, z: float, level: float, scale: tuple[float, float]) -> tuple:
    f_all = part["value"].to_numpy().astype(float)
    reviewed = part.filter(pl.col("human").is_not_null())
    y, f = reviewed["human"].to_numpy().astype(float), reviewed["value"].to_numpy().astype(float)
    g = part.filter(pl.col("human").is_null())["value"].to_numpy().astype(float)
    judge_only, n_h = _judge_only(f_all, z, scale), len(y)
    if n_h < MIN_REVIEWS or scale[1] <= scale[0]:
        note = (f"not enough reviews: {n_h} of the {MIN_REVIEWS} a calibrated estimate needs" if n_h < MIN_REVIEWS
                else f"every score on this rubric is {scale[0]:g}: pass `scale=` (the rubric's) to bound an interval")
        human = float(y.mean()) if n_h else None
        return (judge, cell, None, None, None, len(f_all), n_h, *judge_only, human, None, None, None, None,
                None, note)
    c = calibrated_intervals(y[None, :], f[None, :], g[None, :], scale=scale, level=level)
    p = PPI(*(float(getattr(c.ppi, k)[0]) for k in ("estimate", "se", "lam", "judge_part", "human_part")),
            bool(c.ppi.floored[0]))
    notes = [] if p.lam > 0 else ["the judge's scores did not narrow the interval: human-only estimate"]
    if n_h < FEW_REVIEWS:
        notes.append(f"few reviews: {n_h}, below the {FEW_REVIEWS} the interval's coverage is validated from")
    if p.floored:
        notes.append("the reviews vary less than the small-sample floor (range/2)²/n: the scale sets the width")
    return (judge, cell, p.estimate, float(c.ci_low[0]), float(c.ci_high[0]), len(f_all), n_h, *judge_only,
            float(c.human[0]), float(c.human_low[0]), float(c.human_high[0]), p.lam, reviews_to_halve(p, n_h),
            n_h < FEW_REVIEWS or p.floored, "; ".join(notes))
