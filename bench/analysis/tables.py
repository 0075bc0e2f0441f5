"""A run folder as polars tables: candidates, judgments, long-format scores, reviews, scenario texts. Every later
computation reads these frames, so a synthetic frame with the same columns goes through the same code."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis import row_frames as rf
from bench.analysis.off_scale import off_scale_judgments
from bench.analysis.record_reader import read_rows
from bench.analysis.row_frames import COMPOSITE, frame_of
from bench.config.rubrics import run_scales
from bench.core.digests import SetAside, made_rows, set_aside_made
from bench.core.paths import project_root
from bench.core.records import Candidate, Judgment, Review, Scenario
from bench.core.reviewed import Reviewed, reviewed
from bench.core.store import RunStore


_USAGE = {"prompt_tokens": pl.Int64, "completion_tokens": pl.Int64, "cost_usd": pl.Float64,
          "latency_s": pl.Float64, "cached": pl.Boolean, "calls": pl.Int64, "cache_hits": pl.Int64,
          "schema_version": pl.Int64, "reasoning_tokens": pl.Int64,  # of completion_tokens: thinking (None: unsaid)
          "paid_usd": pl.Float64,  # what its requests paid now (bench.core.spend.paid_cost: cache hits cost nothing)
          "cached_tokens": pl.Int64, "cache_saved_usd": pl.Float64}  # of prompt_tokens, the provider's prompt cache
CANDIDATE_SCHEMA = {"id": pl.Utf8, "model": pl.Utf8, "prompt": pl.Utf8, "cell": pl.Utf8, "scenario": pl.Utf8,
                    "sample": pl.Int64, "output": pl.Utf8, "error": pl.Utf8, "error_kind": pl.Utf8, **_USAGE,
                    "flags": pl.List(pl.Utf8), "ended": pl.Utf8,  # ended: why a conversation stopped (None: one reply)
                    "model_string": pl.Utf8,  # the LiteLLM model string (the judge audit reads its model family)
                    "reasoning": pl.Utf8}  # the reply's thinking, apart from its output (None: none returned)
# one row per candidate record with a simulated user: its requests
SIMULATOR_SCHEMA = {"simulator": pl.Utf8, "cell": pl.Utf8, "scenario": pl.Utf8, "sample": pl.Int64,
                    "candidate": pl.Utf8, "error": pl.Utf8, **_USAGE}
JUDGMENT_SCHEMA = {"id": pl.Utf8, "judge": pl.Utf8, "judge_model": pl.Utf8, "mode": pl.Utf8, "rubric": pl.Utf8,
                   "candidate": pl.Utf8, "candidate_b": pl.Utf8, "cell": pl.Utf8, "model": pl.Utf8, "prompt": pl.Utf8,
                   "cell_b": pl.Utf8,
                   "scenario": pl.Utf8, "sample": pl.Int64, "order": pl.Utf8, "score": pl.Float64,
                   "verdict": pl.Utf8, "shown_verdict": pl.Utf8, "rationale": pl.Utf8, "error": pl.Utf8,
                   "error_kind": pl.Utf8, "pack_id": pl.Utf8, **_USAGE,
                   "repeat": pl.Int64, "expected_score": pl.Float64,
                   "turn": pl.Int64}  # a per_turn judge's graded turn (None: a whole answer)
SCORE_SCHEMA = {"judge": pl.Utf8, "judge_model": pl.Utf8, "rubric": pl.Utf8, "mode": pl.Utf8, "cell": pl.Utf8, "model": pl.Utf8, "prompt": pl.Utf8,
                "scenario": pl.Utf8, "sample": pl.Int64, "candidate": pl.Utf8, "judgment": pl.Utf8,
                "criterion": pl.Utf8, "value": pl.Float64,
                "repeat": pl.Int64, "expected": pl.Float64,  # the judge's repeat; the probability-weighted value
                "turns": pl.Int64}  # a per_turn judge: the turns its mean is over (bench.analysis.conversation_scores)
REVIEW_SCHEMA = {"judgment": pl.Utf8, "reviewer": pl.Utf8, "criterion": pl.Utf8, "value": pl.Float64,
                 "verdict": pl.Utf8, "created_at": pl.Utf8}
RUN_REVIEW_SCHEMA = {**REVIEW_SCHEMA, "blind": pl.Boolean}  # a run's reviews: saved with the judges hidden?


@dataclass
class RunTables:
    """The records of one run folder as polars frames (latest record per id)."""

    run_dir: Path
    candidates: pl.DataFrame
    judgments: pl.DataFrame
    scores: pl.DataFrame  # long: one row per (judgment, criterion) incl. "composite"; successes only
    reviews: pl.DataFrame  # long: the latest review per (answer × rubric version, reviewer), one row per criterion
    scenarios: dict[str, Scenario]
    candidate_attempts: pl.DataFrame | None = None  # as candidates, one row per record: every attempt
    judgment_attempts: pl.DataFrame | None = None  # as judgments, every attempt (what was paid for)
    set_aside: SetAside | None = None  # records of an earlier content of a cell, judge or rubric version: left out
    reviewed: Reviewed | None = None  # the reviews as every count reads them (bench.core.reviewed); damaged: out
    simulator_attempts: pl.DataFrame | None = None  # every attempt's simulated-user requests (SIMULATOR_SCHEMA)

    @property
    def name(self) -> str:
        return self.run_dir.name


def load_run(run_dir: str | Path) -> RunTables:
    """Read a run folder into :class:`RunTables` (earlier contents in ``set_aside``); raise if it has no records."""
    run_dir = _run_folder(run_dir)
    with _gc_paused():  # and the rows freed before it ends: no full collection over them when it is resumed
        return _tables_of_rows(run_dir, RunStore(run_dir))


def _tables_of_rows(run_dir: Path, store: RunStore) -> RunTables:
    """Return :func:`load_run`'s tables of the run's records read as rows (positions into them pick each table)."""
    cand_rows, read = read_rows(store, Candidate), read_rows(store, Judgment)  # read: set-aside ones too
    kept_c, kept_j, aside = set_aside_made(run_dir, made_rows("candidate", cand_rows), made_rows("judgment", read))
    cand_at, judg_at = rf.latest_at(cand_rows, kept_c), rf.latest_at(read, kept_j)  # positions in the rows read
    graded = rf.GradedRows(read, judg_at)
    every = rf.GradedRows(read, rf.latest_at(read, range(len(read)))) if len(kept_j) < len(read) else graded
    scales = run_scales(run_dir, every.by_rubric(), project_root())
    reviews = reviewed(graded, store.read(Review), scales, every, graded.units())
    cells = rf.cells_of(cand_rows, cand_at)
    cand_all, judg_all = rf.candidate_frame(cand_rows, CANDIDATE_SCHEMA), rf.judgment_frame(read, cells, JUDGMENT_SCHEMA)
    latest = _taken(judg_all, judg_at)
    scores = rf.score_frame(latest, read if len(judg_at) == len(read) else [read[n] for n in judg_at], cells,
                            SCORE_SCHEMA)
    by_key = {g.rubric_key: scales[g.rubric_hash] for g in every.by_rubric() if g.rubric_hash in scales}
    latest, scores = _in_scale(run_dir, latest, scores, by_key)
    return RunTables(run_dir, _taken(cand_all, cand_at), latest, scores,
                     _frame(_review_rows(reviews.latest.values()), RUN_REVIEW_SCHEMA),
                     {s.id: s for s in store.read(Scenario)},
                     cand_all[kept_c] if len(kept_c) < len(cand_rows) else cand_all,  # the set-aside rows left out
                     judg_all[kept_j] if len(kept_j) < len(read) else judg_all, aside, reviews,
                     rf.simulator_frame(cand_rows, kept_c, SIMULATOR_SCHEMA))


def _in_scale(run_dir: Path, judgments: pl.DataFrame, scores: pl.DataFrame, scales: dict[str, Any]
              ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return judgments and scores without off-scale grades (warned: bench.analysis.off_scale); attempts keep them."""
    bad = off_scale_judgments(scores, scales, run_dir)
    if not bad:
        return judgments, scores
    return (judgments.filter(~pl.col("id").is_in(list(bad))), scores.filter(~pl.col("judgment").is_in(list(bad))))


def _taken(frame: pl.DataFrame, at: list[int]) -> pl.DataFrame:
    """Return the rows of ``frame`` at positions ``at`` (the frame itself when they are all its rows, in order)."""
    return frame if len(at) == frame.height else frame[at]


def _run_folder(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder (run `bench sweep params/<grid>.yaml` first)")
    return run_dir


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while a run folder is read: its many new records (no cycles) set off full collections."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _frame(rows: list[tuple], schema: dict[str, Any]) -> pl.DataFrame:
    """Return row tuples as a frame of ``schema``, built column by column (twice as fast as row by row)."""
    if not rows:
        return pl.DataFrame(schema=schema)
    return frame_of(zip(*rows, strict=True), schema)


def with_reviews(t: RunTables) -> RunTables:
    """Return the tables with each reviewed judgment's grade replaced by its latest human review."""
    every = _unit_reviews(t)  # a review covers every judge and repeat of its answer on its rubric version
    latest = (every.sort("created_at").group_by("judgment", maintain_order=True)
              .agg(pl.col("reviewer").last()))
    rev = every.join(latest, on=["judgment", "reviewer"])
    values = rev.filter(pl.col("criterion").is_not_null()).select("judgment", "criterion",
                                                                  pl.col("value").alias("human"))
    scores = (t.scores.join(values, on=["judgment", "criterion"], how="left")
              .with_columns(pl.coalesce("human", "value").alias("value")).drop("human"))
    first_turn = pl.col("turn").is_null() | (pl.col("turn") == pl.col("turn").min().over(
        "judge", "rubric", "candidate", "repeat"))  # a conversation's turns: the record standing for them all
    head = t.judgments.filter((pl.col("mode") != "pairwise") & first_turn).select(
        "judge", "judge_model", "rubric", "mode", "cell", "model", "prompt", "scenario", "sample",
        "candidate", pl.col("id").alias("judgment"), "repeat")
    added = (values.join(t.scores.select("judgment").unique(), on="judgment", how="anti")
             .join(head, on="judgment").rename({"human": "value"})
             .with_columns(pl.lit(None, pl.Float64).alias("expected"), pl.lit(None, pl.Int64).alias("turns"))
             .select(list(SCORE_SCHEMA)))
    verdicts = rev.filter(pl.col("verdict").is_not_null()).select(pl.col("judgment").alias("id"),
                                                                  pl.col("verdict").alias("human")).unique("id")
    judgments = (t.judgments.join(verdicts, on="id", how="left")
                 .with_columns(pl.coalesce("human", "verdict").alias("verdict"),
                               pl.when(pl.col("human").is_not_null()).then(None).otherwise(pl.col("error"))
                               .alias("error")).drop("human"))
    return RunTables(t.run_dir, t.candidates, judgments, pl.concat([scores, added]), t.reviews, t.scenarios,
                     set_aside=t.set_aside, reviewed=t.reviewed, simulator_attempts=t.simulator_attempts)


def _unit_reviews(t: RunTables) -> pl.DataFrame:
    """Return the review rows copied onto every judgment of the unit (answer and rubric version) each review covers."""
    keys = t.judgments.select(pl.col("id").alias("judgment"), "candidate", "candidate_b", "rubric")
    unit = ["candidate", "candidate_b", "rubric"]
    return (t.reviews.join(keys, on="judgment").drop("judgment")
            .join(keys, on=unit, nulls_equal=True).drop(unit).select(t.reviews.columns))


def _review_rows(latest: Any) -> list[tuple]:
    """Return the rows of each reviewer's latest usable review of each answer and rubric version."""
    rows = []
    for r in latest:
        for crit, value in (r.scores or {}).items():
            rows.append((r.judgment_id, r.reviewer, crit, float(value), r.verdict, r.created_at, r.blind))
        if r.score is not None:
            rows.append((r.judgment_id, r.reviewer, COMPOSITE, float(r.score), r.verdict, r.created_at, r.blind))
        if not r.scores:
            rows.append((r.judgment_id, r.reviewer, None, None, r.verdict, r.created_at, r.blind))
    return rows
