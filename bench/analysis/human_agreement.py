"""How far each judge agrees with the people it stands in for: per judge and criterion, on the reviewed items.
Only blind reviews count, and judges' own grades are compared, never human overrides."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from bench.analysis.agreement import cohen_kappa, krippendorff_alpha
from bench.analysis.agreement_bootstrap import agreement_draws, mean_draws
from bench.analysis.bootstrap import percentile_interval
from bench.analysis.pairwise import OUTCOME
from bench.analysis.reliability import _note
from bench.analysis.tables import COMPOSITE, RunTables, _unit_reviews

VERDICT = "verdict"  # the criterion name of a pairwise judge's verdicts
STATES = ("ok", "not_enough_reviews", "undefined")
AGREEMENT_SCHEMA = {"judge": pl.Utf8, "criterion": pl.Utf8, "rubric": pl.Utf8, "n": pl.Int64, "items": pl.Int64,
                    "kappa": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                    "exact": pl.Float64, "exact_ci_low": pl.Float64, "exact_ci_high": pl.Float64,
                    "adjacent": pl.Float64, "adjacent_ci_low": pl.Float64, "adjacent_ci_high": pl.Float64,
                    "state": pl.Utf8, "note": pl.Utf8, "not_blind": pl.Int64}
BIAS_SCHEMA = {"judge": pl.Utf8, "criterion": pl.Utf8, "human_score": pl.Float64, "n": pl.Int64,
               "mean_bias": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64}
CEILING_SCHEMA = {"rubric": pl.Utf8, "criterion": pl.Utf8, "reviewers": pl.Int64, "items": pl.Int64,
                  "alpha": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "level": pl.Utf8,
                  "state": pl.Utf8, "note": pl.Utf8}
_PAIR = ["judge", "rubric", "criterion", "item", "reviewer", "judge_value", "human"]
_KEY = ["judge", "rubric", "criterion"]
VERDICT_ORDER = {label: float(n) for n, label in enumerate(("A>>B", "A>B", "A=B", "B>A", "B>>A"))}
BLIND_NEEDED = "blind reviews (the review panel, or bench review export without --show-judges, then apply)"


def human_agreement(t: RunTables, *, resamples: int = 2000, seed: int = 0, level: float = 0.95,
                    min_reviews: int = 10) -> pl.DataFrame:
    """Return one row per judge × criterion (a pairwise judge: "verdict") of the judge's agreement with the human
    reviews of its judgments (:data:`AGREEMENT_SCHEMA`); every judge of the run has its rows, reviewed or not."""
    scored, verdicts = score_pairs(t, blind_only=False), verdict_pairs(t, blind_only=False)
    rows = []
    for judge, rubric, criterion in _judge_criteria(t, pl.concat([scored.select(_KEY), verdicts.select(_KEY)])):
        part = (verdicts if criterion == VERDICT else scored).filter(
            (pl.col("judge") == judge) & (pl.col("criterion") == criterion) & (pl.col("rubric") == rubric))
        shown = int((~part["blind"]).sum())
        part = part.filter(pl.col("blind"))
        row = _agreement(judge, rubric, criterion, part, resamples, seed, level, min_reviews)
        rows.append(row | {"not_blind": shown, "note": _with_shown(row.get("note"), shown)})
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)


def _with_shown(note: str | None, shown: int) -> str | None:
    """Return the row's note with how many pairs came from reviews that showed the judges (left out), if any."""
    if not shown:
        return note
    left = f"{shown} pair(s) from reviews saved with the judges shown were left out (only blind reviews count)"
    return left if note is None else f"{note}; {left}"


def _blind(t: RunTables) -> pl.Expr:
    """Return whether each review row was saved blind (tables without the column: taken as blind)."""
    return pl.col("blind").fill_null(False) if "blind" in t.reviews.columns else pl.lit(True)


def score_pairs(t: RunTables, *, blind_only: bool = True) -> pl.DataFrame:
    """Return every (judgment, review) pair of scores: judge, rubric, criterion, item, reviewer, judge_value,
    human, blind, one row per criterion both graded; ``blind_only`` (default): blind reviews only."""
    return (_unit_reviews(t).with_columns(_blind(t).alias("blind"))
            .filter(pl.col("criterion").is_not_null() & (pl.col("blind") | (not blind_only)))
            .join(t.scores.select("judgment", "criterion", "judge", "rubric", "candidate",
                                  pl.col("value").alias("judge_value")), on=["judgment", "criterion"])
            .with_columns(pl.concat_str("candidate", "rubric", separator="|").alias("item"),
                          pl.col("value").alias("human"))
            .select(*_PAIR, "blind"))


def verdict_pairs(t: RunTables, *, blind_only: bool = True) -> pl.DataFrame:
    """Return every (judgment, review) pair of pairwise verdicts, as :func:`score_pairs` (criterion "verdict",
    judge_value and human the verdict labels in the original order, e.g. "A>B")."""
    return (_unit_reviews(t).with_columns(_blind(t).alias("blind"))
            .filter(pl.col("verdict").is_not_null() & (pl.col("blind") | (not blind_only)))
            .unique(["judgment", "reviewer"], keep="first", maintain_order=True)  # one row per review
            .join(t.judgments.filter(pl.col("verdict").is_not_null() & pl.col("error").is_null())
                  .select(pl.col("id").alias("judgment"), "judge", "rubric", "candidate", "candidate_b",
                          pl.col("verdict").alias("judge_value")), on="judgment")
            .with_columns(pl.lit(VERDICT).alias("criterion"), pl.col("verdict").alias("human"),
                          pl.concat_str("candidate", "candidate_b", "rubric", separator="|").alias("item"))
            .select(*_PAIR, "blind"))


def _pairs_of(t: RunTables, criterion: str, scored: pl.DataFrame | None = None,
              verdicts: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return the blind (judgment, review) pairs of one criterion (``scored``/``verdicts``: those already built)."""
    if criterion == VERDICT:
        return verdict_pairs(t) if verdicts is None else verdicts
    return (score_pairs(t) if scored is None else scored).filter(pl.col("criterion") == criterion)


def _judge_criteria(t: RunTables, pairs: pl.DataFrame) -> list[tuple[str, str | None, str]]:
    """Return (judge, rubric, criterion) for each criterion a judge of the run grades (composite first), reviewed
    or not: a judge nobody reviewed still gets its rows, in the state "not_enough_reviews"."""
    graded = pl.concat([t.scores.select(_KEY), pairs,
                        t.judgments.filter(pl.col("mode") == "pairwise").select(
                            "judge", "rubric", pl.lit(VERDICT).alias("criterion"))]).unique()
    rubric = dict(t.judgments.select("judge", "rubric").unique("judge", keep="first", maintain_order=True).iter_rows())
    ungraded = [(j, rubric.get(j), COMPOSITE) for j in t.judgments["judge"].drop_nulls().unique().to_list()
                if j not in set(graded["judge"].to_list())]  # every judgment failed: its composite, unreviewable
    found = [*graded.iter_rows(), *ungraded]
    return sorted(found, key=lambda r: (r[0], r[2] not in (COMPOSITE, VERDICT), r[2]))


def _agreement(judge: str, rubric: str | None, criterion: str, part: pl.DataFrame, resamples: int, seed: int,
               level: float, min_reviews: int) -> dict:
    """Return one row of :func:`human_agreement` from the judge's pairs on one criterion."""
    items = part["item"].n_unique()
    row = {"judge": judge, "criterion": criterion, "rubric": rubric, "n": part.height, "items": items}
    if items < max(min_reviews, 1):
        why = (f"no blind human review of its judgments: agreement needs {BLIND_NEEDED}" if not items
               else f"{items} answer(s) reviewed blind; at least {min_reviews} are needed (min_reviews)")
        return {**row, "state": "not_enough_reviews", "note": why}
    x, y, within, weights = rated(part, criterion)
    kappa = cohen_kappa(x, y, weights)  # on verdicts, exact agreement is on the five labels (positions equal)
    draws = agreement_draws(x, y, part["item"].to_numpy(), weights=weights, within=within, resamples=resamples,
                            seed=seed)
    row |= {"kappa": kappa, "exact": float(np.mean(x == y)),
            "adjacent": None if within is None else float(np.mean(within))}
    for name, prefix in (("kappa", ""), ("exact", "exact_"), ("adjacent", "adjacent_")):
        row[f"{prefix}ci_low"], row[f"{prefix}ci_high"] = draws.interval(name, level) if row[name] is not None \
            else (None, None)
    note = _note("kappa", kappa, x, y, what="verdict" if criterion == VERDICT else "grade")
    return {**row, "state": "ok" if note is None else "undefined", "note": note}


def rated(part: pl.DataFrame, criterion: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str | None]:
    """Return (judge grades, human grades, which pairs are adjacent or None, kappa weights) of one criterion."""
    if criterion == VERDICT:
        x, y = part["judge_value"].to_numpy().astype(str), part["human"].to_numpy().astype(str)
        if not set(x) | set(y) <= set(VERDICT_ORDER):  # labels of a custom scale: no order, nominal kappa
            return x, y, None, None
        ox, oy = np.array([OUTCOME[v] for v in x]), np.array([OUTCOME[v] for v in y])
        px, py = (np.array([VERDICT_ORDER[v] for v in z]) for z in (x, y))  # ordered positions: weighted kappa
        return px, py, np.abs(ox - oy) <= 0.5, "quadratic"  # adjacent: the same winner, or one side said tie
    x, y = part["judge_value"].to_numpy(), part["human"].to_numpy()
    return x, y, np.abs(x - y) <= 1.0 + 1e-9, "quadratic"


def confusion(t: RunTables, judge: str, criterion: str) -> pl.DataFrame:
    """Return the judge's grades against the humans' (blind reviews) on one criterion: judge_score, human_score,
    count (scores as numbers, verdicts as their labels), every pair counted once."""
    return _confusion(_pairs_of(t, criterion).filter(pl.col("judge") == judge), criterion)


def _confusion(pairs: pl.DataFrame, criterion: str) -> pl.DataFrame:
    kind = pl.Utf8 if criterion == VERDICT else pl.Float64
    return (pairs.group_by("judge_value", "human").agg(pl.len().cast(pl.Int64).alias("count"))
            .select(pl.col("judge_value").cast(kind).alias("judge_score"), pl.col("human").cast(kind)
                    .alias("human_score"), "count").sort("human_score", "judge_score"))


@dataclass
class JudgeAgreement:
    """Everything about the judges' agreement with human reviews that `bench judges` and the report show."""

    agreement: pl.DataFrame  # :func:`human_agreement`
    confusions: dict[tuple[str, str], pl.DataFrame]  # (judge, criterion) -> :func:`confusion`, reviewed ones only
    bias: pl.DataFrame  # :func:`bias_by_level`
    ceiling: pl.DataFrame  # :func:`reviewer_ceiling`
    reviews: int  # usable blind reviews of the run (answer × rubric version × reviewer): what agreement reads
    not_blind: int = 0  # usable reviews saved with the judges shown: left out of every statistic here


def judge_agreement(t: RunTables, *, resamples: int = 2000, seed: int = 0, level: float = 0.95,
                    min_reviews: int = 10) -> JudgeAgreement:
    """Return :class:`JudgeAgreement` of a run: the four tables above from one set of options; below
    ``min_reviews`` a judge × criterion gets no confusion matrix and no bias by grade."""
    table = human_agreement(t, resamples=resamples, seed=seed, level=level, min_reviews=min_reviews)
    shown = table.filter(pl.col("state") != "not_enough_reviews").select("judge", "criterion")
    scored, verdicts = score_pairs(t), verdict_pairs(t)
    confusions = {(judge, criterion): _confusion(_pairs_of(t, criterion, scored, verdicts)
                                                 .filter(pl.col("judge") == judge), criterion)
                  for judge, criterion in shown.iter_rows()}
    bias = bias_by_level(t, resamples=resamples, seed=seed, level=level).join(shown, on=["judge", "criterion"],
                                                                             how="semi", maintain_order="left")
    if t.reviewed is not None:
        blind = sum(r.blind for r in t.reviewed.latest.values())
        reviews, not_blind = blind, len(t.reviewed.latest) - blind
    else:
        reviews, not_blind = t.reviews.filter(_blind(t)).select("judgment", "reviewer").n_unique(), 0
    return JudgeAgreement(table, confusions, bias, reviewer_ceiling(t, resamples=resamples, seed=seed, level=level,
                                                                   min_items=min_reviews), reviews, not_blind)


def bias_by_level(t: RunTables, *, resamples: int = 2000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Return, per judge, scored criterion and human grade, the judge's mean (judge − human) at that grade, with
    a bootstrap interval over items (none below two): negative is harsher than the reviewers."""
    pairs = score_pairs(t)
    rows = []
    for (judge, criterion, human), g in pairs.group_by(["judge", "criterion", "human"]):
        d, items = (g["judge_value"] - g["human"]).to_numpy(), g["item"].to_numpy()
        lo = hi = None
        if np.unique(items).size >= 2:
            lo, hi = (float(v) for v in percentile_interval(mean_draws(d, items, resamples=resamples, seed=seed),
                                                            level))
        rows.append({"judge": judge, "criterion": criterion, "human_score": human, "n": g.height,
                     "mean_bias": float(d.mean()), "ci_low": lo, "ci_high": hi})
    return pl.DataFrame(rows, schema=BIAS_SCHEMA).sort(
        "judge", pl.col("criterion") != COMPOSITE, "criterion", "human_score")


def reviewer_ceiling(t: RunTables, *, resamples: int = 2000, seed: int = 0, level: float = 0.95,
                     min_items: int = 10) -> pl.DataFrame:
    """Return per rubric and criterion the reviewers' Krippendorff's alpha on items two or more reviewed blind,
    with a bootstrap interval over them, and a state ("not_enough_reviews" below ``min_items``)."""
    reviews = _reviews_by_item(t)
    rows = []
    for (rubric, criterion), g in reviews.group_by(["rubric", "criterion"], maintain_order=True):
        wide = g.pivot("reviewer", index="item", values="value", aggregate_function="first")
        reviewers = [c for c in wide.columns if c != "item"]
        x = wide.select(reviewers).to_numpy().astype(np.float64)
        x = x[(~np.isnan(x)).sum(axis=1) >= 2]  # items at least two reviewers reviewed
        row = {"rubric": rubric, "criterion": criterion, "reviewers": len(reviewers), "items": x.shape[0],
               "level": g["level"][0]}
        rows.append(row | _ceiling(x, row["level"], resamples, seed, level, min_items))
    return pl.DataFrame(rows, schema=CEILING_SCHEMA).sort("rubric", pl.col("criterion") != COMPOSITE, "criterion")


def _reviews_by_item(t: RunTables) -> pl.DataFrame:
    """Return each reviewer's blind grade of each item: rubric, criterion (verdicts coded by their order A>>B …
    B>>A, or alphabetically for a custom scale), item, reviewer."""
    keys = t.judgments.select(pl.col("id").alias("judgment"), "rubric", "candidate", "candidate_b")
    own = t.reviews.filter(_blind(t)).join(keys, on="judgment").with_columns(
        pl.concat_str("candidate", pl.col("candidate_b").fill_null(""), "rubric", separator="|").alias("item"))
    scores = own.filter(pl.col("criterion").is_not_null()).select("rubric", "criterion", "item", "reviewer", "value",
                                                                  pl.lit("interval").alias("level"))
    seen = own["verdict"].drop_nulls().unique().to_list()
    if not seen:
        return scores
    labels = VERDICT_ORDER if set(seen) <= set(VERDICT_ORDER) else {v: float(n) for n, v in enumerate(sorted(seen))}
    verdicts = (own.filter(pl.col("verdict").is_not_null()).unique(["item", "reviewer"], keep="first")
                .select("rubric", pl.lit(VERDICT).alias("criterion"), "item", "reviewer",
                        pl.col("verdict").replace_strict(labels, return_dtype=pl.Float64).alias("value"),
                        pl.lit("interval" if labels is VERDICT_ORDER else "nominal").alias("level")))
    return pl.concat([scores, verdicts]).sort("rubric", "criterion", "item", "reviewer")


def _ceiling(x: np.ndarray, level_of: str, resamples: int, seed: int, level: float, min_items: int) -> dict:
    """Return alpha, its interval (items resampled), state and note of a units × reviewers matrix."""
    if x.shape[1] < 2 or x.shape[0] < max(min_items, 1):
        why = ("one reviewer: the ceiling needs two or more reviewers of the same answers" if x.shape[1] < 2 else
               f"{x.shape[0]} answer(s) reviewed by two or more reviewers; at least {min_items} are needed")
        return {"state": "not_enough_reviews", "note": why}
    alpha = krippendorff_alpha(x, level_of)
    if alpha != alpha:
        return {"alpha": alpha, "state": "undefined", "note": _note("alpha", alpha, x)}
    rng = np.random.default_rng(seed)
    draws = np.array([krippendorff_alpha(x[rng.integers(0, x.shape[0], x.shape[0])], level_of)
                      for _ in range(resamples)])
    lo, hi = percentile_interval(draws, level) if not np.isnan(draws).all() else (None, None)
    return {"alpha": alpha, "ci_low": None if lo is None else float(lo), "ci_high": None if hi is None else float(hi),
            "state": "ok", "note": None}
