"""Everything the report shows, computed once from a run folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from bench.core.outcome import failures
from bench.config.scenarios import describe
from bench.analysis.accuracy import judge_accuracy
from bench.analysis.calibrated import calibrated_leaderboard
from bench.analysis.human_agreement import JudgeAgreement, judge_agreement
from bench.analysis.judge_audit import judge_audit
from bench.analysis.scales import judge_scales
from bench.analysis.judge_stability import item_variance, judge_stability, stability_leaderboard
from bench.analysis.leaderboard import composite, leaderboard, paired_differences
from bench.analysis.pairwise import battles, bradley_terry, position_consistency, win_matrix, win_rates
from bench.analysis.reliability import disagreements, inter_judge, judge_health, jury_alpha, packed_vs_single
from bench.analysis.style_control import StyleControl, battle_texts, style_battles, style_controlled_ratings
from bench.analysis.tables import COMPOSITE, SIMULATOR_SCHEMA, RunTables, load_run, with_reviews
from bench.analysis.ties import ties_broken
from bench.analysis.usage import run_spend, usage_by_cell, usage_by_judge, usage_by_simulator


@dataclass
class Summary:
    """The analysis of one run: every table of the report (polars frames)."""

    tables: RunTables
    board: pl.DataFrame  # per (judge, cell, criterion): mean and CI, answers a check did not apply to
    overview: pl.DataFrame  # composite per (judge, cell) with CI and failure rates
    paired: pl.DataFrame  # paired differences between cells (composite)
    battles: pl.DataFrame
    win_rates: pl.DataFrame
    ratings: pl.DataFrame  # Bradley–Terry
    win_matrix: pl.DataFrame
    position: pl.DataFrame  # per pairwise judge: pairs in both orders, consistency, first-seat wins (the audit's frame)
    health: pl.DataFrame
    agreement: pl.DataFrame  # inter-judge, per rubric and criterion
    alpha: pl.DataFrame
    packed: pl.DataFrame
    disagreements: pl.DataFrame  # judge grades that human reviews changed: the next review round
    usage_cells: pl.DataFrame
    usage_judges: pl.DataFrame
    usage_simulators: pl.DataFrame  # per simulated user (user_simulator.id): its own cost line
    spend: pl.DataFrame  # what the run paid: answers, simulated users, judges, total (bench.core.spend's sum)
    failures: pl.DataFrame  # items still failed: stage × model/judge × error kind → count, first error
    calibrated: pl.DataFrame  # per (judge, cell): the human-calibrated mean (PPI++) beside judge-only and human-only
    style: StyleControl  # pairwise ratings with and without style control, and the style coefficients
    stability: pl.DataFrame  # per (judge, criterion): test–retest agreement over `repeats`
    stability_board: pl.DataFrame  # per (judge, cell) of judges with repeats: intervals widened by their noise
    stability_items: pl.DataFrame  # per judge: the 10 answers whose grades varied most across its repeats
    ties: pl.DataFrame  # per judge with logprobs: sampled-score ties the expected score breaks
    accuracy: pl.DataFrame  # per judge, ground truth and category: agreement with labels / reference checks, with CI
    judges: JudgeAgreement  # each judge against the human reviews: kappa, confusion, bias by grade, the ceiling
    audit: dict[str, dict[str, dict]]  # judge -> measure -> value, CI, state, verdict (bench.analysis.judge_audit)


def summarize(run: str | Path | RunTables, *, resamples: int = 1000, seed: int = 0, level: float = 0.95,
              compare: str = "all", baseline: str | None = "auto", strong_weight: float = 1.0,
              human_overrides: bool = False) -> Summary:
    """Compute every table of the report for a run folder (or loaded tables); calls no model. ``human_overrides``
    puts human reviews in place of the judges' grades in the leaderboards and ratings."""
    raw = run if isinstance(run, RunTables) else load_run(run)
    t = with_reviews(raw) if human_overrides else raw
    board = _not_applicable(leaderboard(t.scores, resamples=resamples, seed=seed, level=level), t)
    b = battles(t.judgments)
    return Summary(
        tables=t, board=board, overview=_overview(t, board),
        paired=paired_differences(t.scores, compare=compare, resamples=resamples, seed=seed, level=level),
        battles=b, win_rates=win_rates(b, baseline=baseline, strong_weight=strong_weight, resamples=resamples,
                                       seed=seed, level=level),
        ratings=bradley_terry(b, anchor=None if baseline in (None, "auto") else baseline, resamples=resamples,
                              seed=seed, level=level, strong_weight=strong_weight),
        win_matrix=win_matrix(b), position=position_consistency(b), health=judge_health(t.judgments),
        agreement=inter_judge(t.scores), alpha=jury_alpha(t.scores), packed=packed_vs_single(t.scores),
        disagreements=disagreements(raw.scores, raw.reviews),
        usage_cells=usage_by_cell(_every(t.candidate_attempts, t.candidates)),
        usage_judges=usage_by_judge(_every(t.judgment_attempts, t.judgments)),
        usage_simulators=usage_by_simulator(_simulators(t)),
        spend=run_spend(_every(t.candidate_attempts, t.candidates), _simulators(t),
                        _every(t.judgment_attempts, t.judgments)),
        failures=failure_frame(t), calibrated=calibrated_leaderboard(raw.scores, raw.reviews, level=level, scale=_composite_scales(raw)),
        style=style_controlled_ratings(style_battles(t.judgments, battle_texts(t)), resamples=resamples, seed=seed,
                                       level=level),
        stability=judge_stability(t.scores, criteria=[COMPOSITE]),
        stability_board=stability_leaderboard(_repeated(t.scores), resamples=resamples, seed=seed, level=level),
        stability_items=item_variance(t.scores, top=10),
        ties=ties_broken(t.scores),
        accuracy=judge_accuracy(raw, resamples=resamples, seed=seed, level=level),
        judges=judge_agreement(raw, resamples=resamples, seed=seed, level=level),
        audit=judge_audit(raw, resamples=resamples, seed=seed, level=level))


def _not_applicable(board: pl.DataFrame, t: RunTables) -> pl.DataFrame:
    """Add ``not_applicable``: a checks judge's graded answers of the cell without a score on the criterion, a check
    that did not apply there (a numeric check on a reference with no number), left out of ``mean`` and ``items``."""
    graded = (t.judgments.filter(pl.col("mode").is_in(["automated", "hybrid"]) & pl.col("error").is_null()
                                 & pl.col("turn").is_null()).group_by("judge", "cell").agg(pl.len().alias("_graded")))
    missing = (pl.col("_graded").fill_null(0) - pl.col("items")).clip(lower_bound=0).cast(pl.Int64)
    return board.join(graded, on=["judge", "cell"], how="left").with_columns(missing.alias("not_applicable")
                                                                              ).drop("_graded")


def _composite_scales(t: RunTables) -> dict[str, tuple[float, float]]:
    """Return each rubric judge's composite scale from the run's rubrics: what bounds its calibrated interval.
    Other modes grade on 0-1 while a review's composite is on the rubric's scale: those keep the observed range."""
    graded = t.judgments.filter(pl.col("mode").is_in(["rubric", "packed"]))
    return {judge: s[COMPOSITE] for judge, s in judge_scales(t.run_dir, graded).items() if COMPOSITE in s}


def _repeated(scores: pl.DataFrame) -> pl.DataFrame:
    """Return the scores of the judges that graded some item more than once (``repeats``)."""
    judges = scores.filter(pl.col("repeat") > 0)["judge"].unique()
    return scores.filter(pl.col("judge").is_in(judges))


FAILURE_SCHEMA = {"stage": pl.Utf8, "who": pl.Utf8, "kind": pl.Utf8, "count": pl.Int64, "first_error": pl.Utf8}


def failure_frame(t: RunTables) -> pl.DataFrame:
    """Return the items still failed, grouped as the sweep's closing summary groups them (bench.core.outcome)."""
    rows = [(g.stage, g.who, g.kind, g.count, g.first_error) for g in failures(t.run_dir)] if t.run_dir else []
    return pl.DataFrame(rows, schema=FAILURE_SCHEMA, orient="row")


def _simulators(t: RunTables) -> pl.DataFrame:
    """Return the simulated users' rows (every attempt), empty when the tables have none."""
    return t.simulator_attempts if t.simulator_attempts is not None else pl.DataFrame(schema=SIMULATOR_SCHEMA)


def _every(attempts: pl.DataFrame | None, latest: pl.DataFrame) -> pl.DataFrame:
    """Return every attempt's rows when the tables have them (synthetic tables may hold only the latest)."""
    return latest if attempts is None else attempts


def _overview(t: RunTables, board: pl.DataFrame) -> pl.DataFrame:
    """Return the composite leaderboard with each cell's candidate and judgment failure rates."""
    cand = t.candidates.group_by("cell").agg(pl.col("error").is_not_null().mean().alias("answer_failure_rate"))
    judg = (t.judgments.filter(pl.col("mode") != "pairwise").group_by("judge", "cell")
            .agg(pl.col("error").is_not_null().mean().alias("judge_failure_rate")))
    return (composite(board).join(cand, on="cell", how="left").join(judg, on=["judge", "cell"], how="left")
            .select("judge", "model", "prompt", "mean", "ci_low", "ci_high", "n", "answer_failure_rate",
                    "judge_failure_rate", "cell"))


def examples(t: RunTables, *, judge: str | None = None, per_cell: int = 1) -> pl.DataFrame:
    """Return per judge and cell its best- and worst-graded answers, with scenario, thinking and rationale."""
    scored = t.scores.filter(pl.col("criterion") == COMPOSITE)
    if judge is not None:
        scored = scored.filter(pl.col("judge") == judge)
    if scored.is_empty():
        return pl.DataFrame(schema={"judge": pl.Utf8, "cell": pl.Utf8, "which": pl.Utf8, "score": pl.Float64,
                                    "scenario": pl.Utf8, "answer": pl.Utf8, "reasoning": pl.Utf8,
                                    "rationale": pl.Utf8})
    ranked = scored.sort("value", "candidate").group_by("judge", "cell", maintain_order=True)
    picked = pl.concat([ranked.tail(per_cell).with_columns(pl.lit("best").alias("which")),
                        ranked.head(per_cell).with_columns(pl.lit("worst").alias("which"))]).unique(
        ["judge", "cell", "candidate"], keep="first", maintain_order=True)
    texts = {k: describe(s.fields) for k, s in t.scenarios.items()}
    out = (picked.join(t.candidates.select(pl.col("id").alias("candidate"), pl.col("output").alias("answer"),
                                             "reasoning"),
                       on="candidate", how="left")
           .join(t.judgments.select(pl.col("id").alias("judgment"), "rationale"), on="judgment", how="left")
           .with_columns(pl.col("scenario").replace_strict(texts, default=pl.col("scenario")).alias("scenario")))
    return out.select("judge", "cell", "which", pl.col("value").alias("score"), "scenario", "answer",
                      "reasoning", "rationale").sort("judge", "cell", "which")
