"""How far a judge can be trusted: failures and nulls, agreement with other judges, with humans,
and between packed and single-item grading of the same items."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.agreement import cohen_kappa, complete_pairs, krippendorff_alpha, why_undefined
from bench.analysis.tables import COMPOSITE

AGREEMENT_SCHEMA = {"rubric": pl.Utf8, "criterion": pl.Utf8, "a": pl.Utf8, "b": pl.Utf8, "n": pl.Int64,
                    "dropped": pl.Int64, "kappa": pl.Float64, "exact": pl.Float64, "mean_abs_diff": pl.Float64,
                    "note": pl.Utf8}
# ``n``: pairs both graded (every statistic's base); ``dropped``: pairs one side left ungraded (never a category);
# ``note``: why a statistic is undefined (NaN, "n/a"), e.g. "kappa n/a: every grade is 4"; null when all are defined


def judge_health(judgments: pl.DataFrame) -> pl.DataFrame:
    """Return per judge: judgments, failures, parse-failure rate, null rate (no usable grade), failure kinds."""
    require(judgments, ["judge", "mode", "rubric", "error", "error_kind", "score", "verdict"], "judge_health",
            "judgments")
    usable = pl.col("error").is_null() & (pl.col("score").is_not_null() | pl.col("verdict").is_not_null())
    return (judgments.group_by("judge", "mode", "rubric")
            .agg(pl.len().alias("judgments"), pl.col("error").is_not_null().sum().alias("failed"),
                 (pl.col("error_kind") == "parse").fill_null(False).mean().alias("parse_failure_rate"),
                 (~usable).mean().alias("null_rate"),
                 pl.col("error_kind").drop_nulls().unique().sort().str.join(", ").alias("failure_kinds"))
            .sort("judge"))


def _agreement_row(x: np.ndarray, y: np.ndarray, weights: str | None, what: str = "grade") -> dict:
    """Return n, dropped, kappa, exact, mean |a − b| (None for categories) and note over the complete pairs."""
    x, y, dropped = complete_pairs(x, y)
    kappa = cohen_kappa(x, y, weights) if len(x) else float("nan")
    numeric = x.dtype.kind in "iuf" and y.dtype.kind in "iuf"
    return {"n": len(x), "dropped": dropped, "kappa": kappa,
            "exact": float(np.mean(x == y)) if len(x) else float("nan"),
            "mean_abs_diff": (float(np.mean(np.abs(x - y))) if len(x) else float("nan")) if numeric else None,
            "note": _note("kappa", kappa, x, y, what=what)}


def _note(statistic: str, value: float, *ratings: np.ndarray, what: str = "grade") -> str | None:
    """Return why ``value`` is undefined (NaN), or None when it is a number."""
    if value == value:
        return None
    why = why_undefined(*ratings, what=what) or "undefined for these ratings"
    return f"n/a: {why}" if why.startswith("no answer") else f"{statistic} n/a: {why}"


def inter_judge(scores: pl.DataFrame, *, criterion: str | None = None, weights: str | None = "quadratic") -> pl.DataFrame:
    """Return, per rubric and criterion, the agreement of every two judges that graded the same candidates:
    n, Cohen's kappa (quadratic by default), exact agreement, mean |a − b|; missing grades counted in ``dropped``."""
    require(scores, ["rubric", "criterion", "judge", "candidate", "value"], "inter_judge", "scores")
    s = scores if criterion is None else scores.filter(pl.col("criterion") == criterion)
    per = s.group_by("rubric", "criterion", "judge", "candidate").agg(pl.col("value").mean())
    rows = []
    for (rubric, crit), part in per.group_by(["rubric", "criterion"], maintain_order=True):
        judges = sorted(part["judge"].unique().to_list())
        for a, b in combinations(judges, 2):
            pair = part.filter(pl.col("judge") == a).join(part.filter(pl.col("judge") == b), on="candidate")
            rows.append({"rubric": rubric, "criterion": crit, "a": a, "b": b,
                         **_agreement_row(pair["value"].to_numpy(), pair["value_right"].to_numpy(), weights)})
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA).sort("rubric", "criterion", "a", "b")


def jury_alpha(scores: pl.DataFrame, *, level: str = "ordinal") -> pl.DataFrame:
    """Return Krippendorff's alpha per rubric and criterion over all judges of that rubric (units = candidates)."""
    require(scores, ["rubric", "criterion", "judge", "candidate", "value"], "jury_alpha", "scores")
    per = scores.group_by("rubric", "criterion", "judge", "candidate").agg(pl.col("value").mean())
    rows = []
    for (rubric, crit), part in per.group_by(["rubric", "criterion"], maintain_order=True):
        wide = part.pivot("judge", index="candidate", values="value")
        judges = [c for c in wide.columns if c != "candidate"]
        if len(judges) < 2:
            continue
        lvl = "interval" if crit == COMPOSITE and level == "ordinal" else level  # composites are averages
        x = wide.select(judges).to_numpy().astype(np.float64)
        alpha = krippendorff_alpha(x, lvl)
        rows.append({"rubric": rubric, "criterion": crit, "judges": len(judges), "units": wide.height,
                     "alpha": alpha, "level": lvl,
                     "note": _note("alpha", alpha, x[(~np.isnan(x)).sum(axis=1) >= 2])})  # pairable units
    return pl.DataFrame(rows, schema={"rubric": pl.Utf8, "criterion": pl.Utf8, "judges": pl.Int64,
                                      "units": pl.Int64, "alpha": pl.Float64, "level": pl.Utf8, "note": pl.Utf8})


def packed_vs_single(scores: pl.DataFrame, *, weights: str | None = "quadratic") -> pl.DataFrame:
    """Return per judge model, rubric and criterion how packed grades agree with single-item ones."""
    require(scores, ["judge_model", "rubric", "criterion", "candidate", "mode", "value"], "packed_vs_single", "scores")
    key = ["judge_model", "rubric", "criterion", "candidate"]
    packed = scores.filter(pl.col("mode") == "packed").group_by(key).agg(pl.col("value").mean())
    single = scores.filter(pl.col("mode") == "rubric").group_by(key).agg(pl.col("value").mean())
    both = packed.join(single, on=key, suffix="_single")
    rows = [{"judge_model": jm, "rubric": r, "criterion": c,
             **_agreement_row(g["value"].to_numpy(), g["value_single"].to_numpy(), weights)}
            for (jm, r, c), g in both.group_by(["judge_model", "rubric", "criterion"], maintain_order=True)]
    return pl.DataFrame(rows, schema={"judge_model": pl.Utf8, **{k: v for k, v in AGREEMENT_SCHEMA.items()
                                                                 if k not in ("a", "b")}}).sort("judge_model", "rubric", "criterion")


def judge_vs_human(scores: pl.DataFrame, judgments: pl.DataFrame, reviews: pl.DataFrame,
                   *, weights: str | None = "quadratic") -> pl.DataFrame:
    """Return per judge and criterion the agreement of the judge's grades with human reviews of the same
    judgments; a review of an ungraded judgment counts in ``dropped`` (``n`` + ``dropped`` = ``reviews``)."""
    require(scores, ["judgment", "judge", "criterion", "value"], "judge_vs_human", "scores")
    require(judgments, ["id", "judge", "verdict"], "judge_vs_human", "judgments")
    require(reviews, ["judgment", "reviewer", "criterion", "value", "verdict"], "judge_vs_human", "reviews")
    owner = pl.concat([judgments.select(pl.col("id").alias("judgment"), "judge"),
                       scores.select("judgment", "judge")]).unique("judgment", keep="first", maintain_order=True)
    scored = (reviews.filter(pl.col("criterion").is_not_null()).join(owner, on="judgment")
              .join(scores.select("judgment", "criterion", pl.col("value").alias("judge_value")),
                    on=["judgment", "criterion"], how="left"))
    rows = [{"judge": j, "criterion": c, "reviews": g.height,
             **_agreement_row(g["judge_value"].to_numpy(), g["value"].to_numpy(), weights)}
            for (j, c), g in scored.group_by(["judge", "criterion"], maintain_order=True)]
    verdicts = (reviews.filter(pl.col("verdict").is_not_null())
                .unique(["judgment", "reviewer"], keep="first", maintain_order=True)  # one row per review
                .join(judgments.select(pl.col("id").alias("judgment"), "judge",
                                       pl.col("verdict").alias("judge_verdict")), on="judgment"))
    for (j,), g in verdicts.group_by(["judge"], maintain_order=True):
        rows.append({"judge": j, "criterion": "verdict", "reviews": g.height,
                     **_agreement_row(g["judge_verdict"].to_numpy(), g["verdict"].to_numpy(), None, "verdict")})
    return pl.DataFrame(rows, schema={"judge": pl.Utf8, "criterion": pl.Utf8, "reviews": pl.Int64,
                                      **{k: v for k, v in AGREEMENT_SCHEMA.items()
                                         if k not in ("rubric", "criterion", "a", "b")}}).sort("judge", "criterion")


def disagreements(scores: pl.DataFrame, reviews: pl.DataFrame, *, limit: int = 50) -> pl.DataFrame:
    """Return the judge grades human reviews changed, largest change first: the next review round's list."""
    require(scores, ["judge", "cell", "scenario", "candidate", "judgment", "criterion", "value"], "disagreements",
            "scores")
    require(reviews, ["judgment", "criterion", "reviewer", "value", "created_at"], "disagreements", "reviews")
    human = reviews.filter(pl.col("criterion").is_not_null()).select(
        "judgment", "criterion", "reviewer", pl.col("value").alias("human"), "created_at")
    joined = scores.select("judge", "cell", "scenario", "candidate", "judgment", "criterion",
                           pl.col("value").alias("judge_value")).join(human, on=["judgment", "criterion"])
    return (joined.filter(pl.col("judge_value") != pl.col("human"))
            .with_columns((pl.col("human") - pl.col("judge_value")).alias("change"))
            .sort(pl.col("change").abs(), descending=True).head(limit)
            .select("judge", "cell", "criterion", "judge_value", "human", "change", "reviewer", "candidate",
                    "judgment"))
