"""The bias audit of each judge of a run: where it leans, with a bootstrap interval and a one-line verdict per
measure (position, length, self-preference, score collapse, jury disagreement: docs/judges.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from bench.analysis.audit_verdicts import entry
from bench.analysis.bias_estimates import (MIN_UNITS, Estimate, mean, not_applicable, not_enough, ratio,
                                           reference_gap, spearman, spread)
from bench.analysis.model_family import model_family
from bench.analysis.pairwise import OUTCOME, battles, position_pairs
from bench.analysis.scales import judge_scales
from bench.analysis.style_control import battle_texts, style_battles, style_controlled_ratings
from bench.analysis.tables import COMPOSITE, RunTables

MEASURES = ("first_slot_preference", "flip_rate", "length_correlation", "length_gap", "style_length_coefficient",
            "self_preference", "modal_share", "entropy", "jury_disagreement")
STYLE_RESAMPLES = 500  # each resample of the style coefficient is two logistic fits: its interval stops here
AUDIT_SCHEMA = {  # n: the measure's units (pairs, answers, battles), but grades for modal_share and entropy
"judge": pl.Utf8, "measure": pl.Utf8, "value": pl.Float64, "ci_low": pl.Float64,
                "ci_high": pl.Float64, "n": pl.Int64, "state": pl.Utf8, "verdict": pl.Utf8}


def judge_audit(t: RunTables, *, resamples: int = 2000, seed: int = 0, level: float = 0.95
                ) -> dict[str, dict[str, dict]]:
    """Return judge id → measure (``MEASURES``) → {"value", "ci_low", "ci_high", "n", "verdict", "state"}, with a
    seeded bootstrap interval at ``level``; "state": "ok", "not_applicable" or "not_enough_data"."""
    opts = {"resamples": resamples, "seed": seed, "level": level}
    kinds = _kinds(t.judgments)
    scales = judge_scales(t.run_dir, t.judgments) if t.run_dir is not None else {}
    out = {}
    for judge, pairwise in kinds.items():
        found = _pairwise_measures(t, judge, opts) if pairwise else _scored_measures(t, judge, opts)
        found.update(_collapse(t, judge, pairwise, scales.get(judge, {}), opts))
        found["jury_disagreement"] = _jury(t, judge, pairwise, scales.get(judge, {}), opts)
        family = model_family(_judge_model(t.judgments, judge))
        out[judge] = {m: entry(m, found[m], family, pairwise, found["flip_rate"]) for m in MEASURES}
    return out


def audit_table(audit: dict[str, dict[str, dict]]) -> pl.DataFrame:
    """Return :func:`judge_audit`'s result as rows (judge, measure, value, ci_low, ci_high, n, state, verdict)."""
    rows = [{"judge": judge, "measure": m, **{k: found[m][k] for k in AUDIT_SCHEMA if k in found[m]}}
            for judge, found in audit.items() for m in MEASURES if m in found]
    return pl.DataFrame(rows, schema=AUDIT_SCHEMA)


def _kinds(judgments: pl.DataFrame) -> dict[str, bool]:
    """Return each judge (sorted) → whether it judges pairwise."""
    per = (judgments.filter(pl.col("judge").is_not_null()).group_by("judge")
           .agg((pl.col("mode") == "pairwise").any().alias("pairwise")).sort("judge"))
    return dict(per.iter_rows())


def _judge_model(judgments: pl.DataFrame, judge: str) -> str | None:
    models = judgments.filter(pl.col("judge") == judge)["judge_model"].drop_nulls()
    return models[0] if len(models) else None


def _rubric(t: RunTables, judge: str) -> str | None:
    rubrics = t.judgments.filter(pl.col("judge") == judge)["rubric"].drop_nulls()
    return rubrics[0] if len(rubrics) else None


def _pairwise_measures(t: RunTables, judge: str, opts: dict) -> dict[str, Estimate]:
    """Return the position measures and the style length coefficient of a pairwise judge (the rest: n/a)."""
    per = position_pairs(battles(t.judgments.filter(pl.col("judge") == judge)))
    both = per.filter(pl.col("orders") == 2)
    return {
        "first_slot_preference": ratio(per["first"].to_numpy(), per["decisive"].to_numpy(),
                                       unit="pairs with a decisive verdict", **opts),
        "flip_rate": mean((both["signs"] > 1).cast(pl.Float64).to_numpy(), unit="pairs seen in both orders", **opts),
        "length_correlation": not_applicable("a pairwise judge gives no scores: see style_length_coefficient"),
        "length_gap": not_applicable("a pairwise judge gives no scores: see style_length_coefficient"),
        "style_length_coefficient": _style_length(t, judge, opts),
        "self_preference": not_applicable("measured on scoring judges only (a pairwise judge gives no scores)"),
    }


def _style_length(t: RunTables, judge: str, opts: dict) -> Estimate:
    """Return the length coefficient of the judge's style-controlled Bradley–Terry fit, with its interval."""
    battle = style_battles(t.judgments.filter(pl.col("judge") == judge), battle_texts(t))
    scenarios = battle["scenario"].n_unique()
    if scenarios < MIN_UNITS:
        return not_enough(f"{scenarios} scenarios with both answers' texts (at least {MIN_UNITS} are needed)",
                          battle.height)
    fit = (style_controlled_ratings(battle, **{**opts, "resamples": min(opts["resamples"], STYLE_RESAMPLES)})
           .coefficients.filter(pl.col("feature") == "length"))
    if fit.is_empty():
        return not_enough("the answers' lengths do not vary across its battles (or fewer than two cells)",
                          battle.height)
    row = fit.row(0, named=True)
    return Estimate(row["coef"], row["ci_low"], row["ci_high"], battle.height)


def _composite(t: RunTables) -> pl.DataFrame:
    """Return (judge, rubric, candidate, value): each scoring judge's composite per answer (repeats averaged)."""
    return (t.scores.filter(pl.col("criterion") == COMPOSITE)
            .group_by("judge", "rubric", "candidate").agg(pl.col("value").mean()))


def _scored_measures(t: RunTables, judge: str, opts: dict) -> dict[str, Estimate]:
    """Return the length correlation and self-preference of a scoring judge (position measures: not applicable)."""
    mine = _composite(t).filter(pl.col("judge") == judge)
    lengths = t.candidates.select(pl.col("id").alias("candidate"),
                                  pl.col("output").fill_null("").str.len_chars().alias("chars"))
    scored = mine.join(lengths, on="candidate")
    seats = "not a pairwise judge: it sees one answer at a time, no seats"
    return {
        "first_slot_preference": not_applicable(seats), "flip_rate": not_applicable(seats),
        "length_correlation": spearman(scored["chars"].to_numpy(), scored["value"].to_numpy(),
                                       unit="graded answers", **opts),
        "length_gap": _length_gap(t, judge, scored, opts),
        "style_length_coefficient": not_applicable("a scoring judge has no pairwise battles: see length_correlation"),
        "self_preference": _self_preference(t, judge, opts),
    }


def _length_gap(t: RunTables, judge: str, scored: pl.DataFrame, opts: dict) -> Estimate:
    """Return how many more points the judge gives than each other judge of its rubric on answers longer than the
    median, minus the same on the rest, averaged over the other judges."""
    rubric = _rubric(t, judge)
    comp = _composite(t).filter((pl.col("rubric") == rubric) & (pl.col("judge") != judge))
    if comp.is_empty():
        return not_applicable(f"no other judge graded with {rubric}: the gap is measured against the rest of a jury")
    wide = scored.select("candidate", "value", "chars").join(comp.pivot("judge", index="candidate", values="value", aggregate_function="first"),
                       on="candidate")
    names = [j for j in comp["judge"].unique().sort().to_list() if j in wide.columns]
    split = wide["chars"].median() if not wide.is_empty() else None
    long, short = wide.filter(pl.col("chars") > split), wide.filter(pl.col("chars") <= split)
    if long.is_empty() or short.is_empty():
        return not_applicable("the answers it and the other judges graded are all of one length")
    diffs = [np.column_stack([(rows["value"] - rows[j]).to_numpy().astype(float) for j in names])
             for rows in (long, short)]
    return reference_gap(*diffs, groups=(f"answers longer than {split:.0f} characters", "not longer"), **opts)


def _families(t: RunTables) -> pl.DataFrame:
    """Return (candidate, family): each answer's model family, from its LiteLLM string (else its model label)."""
    source = "model_string" if "model_string" in t.candidates.columns else "model"
    return t.candidates.select(pl.col("id").alias("candidate"),
                               pl.coalesce(source, "model").map_elements(model_family, return_dtype=pl.Utf8)
                               .alias("family"))


def _self_preference(t: RunTables, judge: str, opts: dict) -> Estimate:
    """Return the judge's own-family gap against each reference judge of another family (same rubric), compared
    with it only on answers of neither's family, then averaged over the references."""
    family, rubric = model_family(_judge_model(t.judgments, judge)), _rubric(t, judge)
    if family is None:
        return not_applicable("its model string names no model family")
    comp = _composite(t).filter(pl.col("rubric") == rubric)
    refs = {j: f for j in comp["judge"].unique().sort().to_list()
            if j != judge and (f := model_family(_judge_model(t.judgments, j))) not in (None, family)}
    if not refs:
        return not_applicable(f"no judge of another family than {family} graded with {rubric}: a jury of two "
                              f"families or more is needed")
    mine = comp.filter(pl.col("judge") == judge).join(_families(t), on="candidate").select("candidate", "family",
                                                                                           "value")
    wide = mine.join(comp.filter(pl.col("judge").is_in(list(refs))).pivot("judge", index="candidate", values="value",
                                                                            aggregate_function="first"),
                     on="candidate")
    names = [j for j in refs if j in wide.columns]
    own_rows = wide.filter(pl.col("family") == family)
    if own_rows.is_empty():
        return not_applicable(f"no answer of its own family ({family}) among those it and the other judges graded")
    diffs = {k: np.column_stack([(rows["value"] - rows[j]).to_numpy().astype(float) for j in names])
             for k, rows in (("own", own_rows), ("other", wide.filter(pl.col("family") != family)))}
    fams = wide.filter(pl.col("family") != family)["family"].to_numpy()
    for col, j in enumerate(names):  # a reference judges its own family's answers with its own bias: not there
        diffs["other"][fams == refs[j], col] = np.nan
    usable = ~np.isnan(diffs["other"]).all(axis=1)
    if not usable.any():
        return not_applicable(f"needs a judge of a third family (neither {family} nor the answer's) on the other "
                              f"families' answers, to tell its self-preference from the other judges'")
    return reference_gap(diffs["own"], diffs["other"][usable], **opts)


def _collapse(t: RunTables, judge: str, pairwise: bool, scales: dict[str, tuple[float, float]], opts: dict
              ) -> dict[str, Estimate]:
    """Return the judge's modal share and normalized entropy over its grades (pairwise: its verdict labels);
    ``scales``: its criteria's declared (lowest, highest) grades (:func:`bench.analysis.scales.judge_scales`)."""
    rubric = _rubric(t, judge)
    if pairwise:
        grades = (t.judgments.filter((pl.col("rubric") == rubric) & (pl.col("mode") == "pairwise")
                                     & pl.col("error").is_null() & pl.col("verdict").is_not_null())
                  .select("judge", pl.col("id").alias("judgment"), pl.lit("verdict").alias("criterion"),
                          pl.col("verdict").alias("grade")))
    else:
        grades = (t.scores.filter((pl.col("rubric") == rubric) & (pl.col("criterion") != COMPOSITE))
                  .select("judge", "judgment", "criterion", pl.col("value").cast(pl.Utf8).alias("grade")))
    mine = grades.filter(pl.col("judge") == judge)
    units = mine["judgment"].unique().sort()
    codes, levels = [], []
    for criterion in sorted(mine["criterion"].unique().to_list()):
        scale = _levels(grades.filter(pl.col("criterion") == criterion)["grade"], pairwise, scales.get(criterion))
        index = {g: k for k, g in enumerate(scale)}
        at = dict(mine.filter(pl.col("criterion") == criterion).select("judgment", "grade").iter_rows())
        codes.append(np.array([index.get(at.get(u), -1) for u in units], dtype=np.int64))
        levels.append(len(scale))
    modal, entropy = spread(codes, levels, **opts)
    return {"modal_share": modal, "entropy": entropy}


def _levels(grades: pl.Series, pairwise: bool, declared: tuple[float, float] | None = None) -> list[str]:
    """Return the levels of a criterion's scale: every integer of the ``declared`` scale and of the range any judge
    used, else the grades seen (verdict labels, non-integer grades)."""
    seen = sorted(set(grades.drop_nulls().to_list()))
    if pairwise:
        return [label for label in OUTCOME if label in seen] + [g for g in seen if g not in OUTCOME]
    values = [float(g) for g in seen]
    if values and all(v.is_integer() for v in values):
        ends = [*values, *(declared if declared and all(float(d).is_integer() for d in declared) else ())]
        return [str(float(v)) for v in range(int(min(ends)), int(max(ends)) + 1)]
    return [str(v) for v in sorted(values)]


def _jury(t: RunTables, judge: str, pairwise: bool, scales: dict[str, tuple[float, float]], opts: dict
         ) -> Estimate:
    """Return the judge's mean |grade − median of the other judges' grades| of the same answers, same rubric, as a
    share of the scale's range (pairwise outcomes: 0 to 1)."""
    rubric = _rubric(t, judge)
    if pairwise:
        unit, key = ["candidate", "candidate_b"], ["candidate", "candidate_b", "order"]
        grades = (t.judgments.filter((pl.col("rubric") == rubric) & (pl.col("mode") == "pairwise")
                                     & pl.col("error").is_null() & pl.col("verdict").is_in(list(OUTCOME)))
                  .group_by("judge", *key).agg(pl.col("verdict").replace_strict(OUTCOME, return_dtype=pl.Float64)
                                               .mean().alias("value")))
    else:
        unit = key = ["candidate"]
        grades = _composite(t).filter(pl.col("rubric") == rubric)
    if grades.filter(pl.col("judge") != judge).is_empty():
        return not_applicable(f"no other judge graded with {rubric}: no jury to disagree with")
    rest = grades.filter(pl.col("judge") != judge).group_by(key).agg(pl.col("value").median().alias("rest"))
    per = (grades.filter(pl.col("judge") == judge).join(rest, on=key)
           .group_by(unit).agg((pl.col("value") - pl.col("rest")).abs().mean().alias("d")))
    if per.is_empty():
        return not_applicable(f"no other judge with {rubric} graded the same answers: no jury to disagree with")
    lo, hi = (0.0, 1.0) if pairwise else scales.get(COMPOSITE, (grades["value"].min(), grades["value"].max()))
    span = float(hi - lo) if hi is not None and lo is not None and hi > lo else 1.0
    units = "pairs" if pairwise else "answers"
    found = mean(per["d"].to_numpy() / span, unit=f"{units} graded by it and the jury", **opts)
    return replace(found, unit=units)
