"""The records as the collect and judge notebooks list them: one row per answer or judgment (latest record per
id), long text clipped, and counts per cell and per judge."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from bench.analysis.tables import COMPOSITE, RunTables, load_run
from bench.config.scenarios import describe

CANDIDATE_COLUMNS = ["model", "prompt", "scenario", "sample", "output", "error", "tokens", "latency_s", "cached",
                     "scenario_id", "id"]
JUDGMENT_COLUMNS = ["judge", "mode", "rubric", "model", "prompt", "scenario", "order", "score", "verdict", "scores",
                    "rationale", "error", "id"]
SCENARIO_WIDTH = 80  # characters of a scenario's fields on one line


def clipped(column: str, width: int) -> pl.Expr:
    """Return ``column`` on one line (newlines as spaces), cut to ``width`` characters ending in "…"."""
    text = pl.col(column).str.replace_all("\n", " ", literal=True)
    return (pl.when(text.str.len_chars() <= width).then(text)
            .otherwise(text.str.slice(0, width - 1) + "…").alias(column))


def _tables(run: str | Path | RunTables) -> RunTables:
    return run if isinstance(run, RunTables) else load_run(run)


def _scenario_text(t: RunTables) -> pl.Expr:
    """Return the ``scenario`` column (ids) as each scenario's fields on one line; an unknown id stays as it is."""
    texts = {sid: describe(s.fields, SCENARIO_WIDTH) for sid, s in t.scenarios.items()}
    return pl.col("scenario").replace(texts) if texts else pl.col("scenario")


def candidate_listing(run: str | Path | RunTables, width: int = 120) -> pl.DataFrame:
    """Return one row per candidate id (latest record): cell, scenario, sample, output or error, usage."""
    t = _tables(run)
    return t.candidates.select(
        "model", "prompt", _scenario_text(t), "sample", clipped("output", width), clipped("error", width),
        pl.col("completion_tokens").alias("tokens"), "latency_s", "cached", pl.col("scenario").alias("scenario_id"),
        "id").select(CANDIDATE_COLUMNS)


def judgment_listing(run: str | Path | RunTables, width: int = 100) -> pl.DataFrame:
    """Return one row per judgment id (latest record): judge, mode, item, scores (a dict per row), verdict or error."""
    t = _tables(run)
    scores: dict[str, dict[str, float]] = {}
    for jid, criterion, value in t.scores.filter(pl.col("criterion") != COMPOSITE).select(
            "judgment", "criterion", "value").iter_rows():
        scores.setdefault(jid, {})[criterion] = value
    by_id = pl.Series("scores", [scores.get(jid) for jid in t.judgments["id"]], dtype=pl.Object)
    return t.judgments.select(
        "judge", "mode", "rubric", "model", "prompt", _scenario_text(t), "order", "score", "verdict",
        clipped("rationale", width), clipped("error", width), "id").with_columns(by_id).select(JUDGMENT_COLUMNS)


def cell_counts(run: str | Path | RunTables) -> pl.DataFrame:
    """Return per (model, prompt) cell: candidates done, failed, and mean output tokens."""
    return (_tables(run).candidates.group_by("model", "prompt")
            .agg(pl.col("error").is_null().sum().cast(pl.Int64).alias("done"),
                 pl.col("error").is_not_null().sum().cast(pl.Int64).alias("failed"),
                 pl.col("completion_tokens").mean().alias("mean_tokens"))
            .sort("model", "prompt"))


def judge_counts(run: str | Path | RunTables) -> pl.DataFrame:
    """Return per (judge, model, prompt): judgments, failures and the mean composite score."""
    return (_tables(run).judgments.group_by("judge", "model", "prompt")
            .agg(pl.len().cast(pl.Int64).alias("judgments"),
                 pl.col("error").is_not_null().sum().cast(pl.Int64).alias("failed"),
                 pl.col("score").mean().alias("mean_score"))
            .sort("judge", "model", "prompt", nulls_last=True))
