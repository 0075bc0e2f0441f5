"""The metrics tracking logs, from a run's :class:`bench.analysis.Summary`: ``answers.<metric>``,
``judge.<id>.<metric>`` and ``simulator.<id>.<metric>``, the same names for the sweep and each cell."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from bench.analysis.reliability import judge_health
from bench.analysis.summary import Summary
from bench.analysis.usage import usage_by_cell, usage_by_judge, usage_by_simulator

USAGE = ("calls", "cache_hits", "failed_records", "prompt_tokens", "completion_tokens", "cost_usd", "latency_p50_s",
         "latency_p95_s")


def _clean(metrics: dict[str, Any]) -> dict[str, float]:
    """Return the metrics MLflow can take: names without ``@``, values as floats, no None or NaN."""
    return {k.replace("@", "_at_"): float(v) for k, v in metrics.items()
            if v is not None and not (isinstance(v, float) and math.isnan(v))}


def _scope_metrics(s: Summary, cell: str | None) -> dict[str, Any]:
    """Return ``answers.*`` and ``judge.<id>.*`` of the whole sweep (``cell`` None) or of one cell. Usage counts
    every attempt; n and failure_rate the latest record of each item; a pairwise judgment belongs to both cells."""
    t = s.tables
    in_cell = (lambda f: f) if cell is None else (lambda f: f.filter(pl.col("cell") == cell))  # noqa: E731
    judged = (lambda f: f) if cell is None else (  # noqa: E731
        lambda f: f.filter((pl.col("cell") == cell) | (pl.col("cell_b") == cell)))
    answers = in_cell(t.candidates)
    m: dict[str, Any] = {"answers.n": answers.height}
    if answers.height:
        m["answers.failure_rate"] = answers["error"].is_not_null().mean()
    attempts = in_cell(t.candidate_attempts if t.candidate_attempts is not None else t.candidates)
    if attempts.height:
        one = pl.lit("")  # one group: the whole scope
        usage = usage_by_cell(attempts.with_columns(one.alias("cell"), one.alias("model"), one.alias("prompt")))
        m.update({f"answers.{k}": usage[k][0] for k in USAGE})
    judgments = judged(t.judgments)
    for r in (judgments.group_by("judge").agg(pl.len().alias("n"), pl.col("error").is_not_null().mean().alias("fr"))
              .iter_rows(named=True)):
        m[f"judge.{r['judge']}.n"], m[f"judge.{r['judge']}.failure_rate"] = r["n"], r["fr"]
    for r in usage_by_judge(judged(t.judgment_attempts if t.judgment_attempts is not None else t.judgments)
                            ).iter_rows(named=True):
        m.update({f"judge.{r['judge']}.{k}": r[k] for k in USAGE})
    sims = t.simulator_attempts  # a conversation's simulated user: its own usage, by user_simulator.id
    if sims is not None and in_cell(sims).height:
        for r in usage_by_simulator(in_cell(sims)).iter_rows(named=True):
            m.update({f"simulator.{r['simulator']}.{k}": r[k] for k in USAGE})
    for r in judge_health(judgments).iter_rows(named=True):
        m[f"judge.{r['judge']}.parse_failure_rate"] = r["parse_failure_rate"]
        m[f"judge.{r['judge']}.null_rate"] = r["null_rate"]
    return m


def cell_metrics(s: Summary, cell: str) -> dict[str, float]:
    """Return a cell's metrics: the scope metrics, each criterion's mean with its CI and n, pairwise win rates."""
    m = _scope_metrics(s, cell)
    for r in s.board.filter(pl.col("cell") == cell).iter_rows(named=True):
        for stat in ("mean", "ci_low", "ci_high", "n"):
            m[f"judge.{r['judge']}.{r['criterion']}.{stat}"] = r[stat]
    for r in s.win_rates.filter(pl.col("cell") == cell).iter_rows(named=True):
        for stat, key in (("win_rate", ""), ("ci_low", ".ci_low"), ("ci_high", ".ci_high")):
            m[f"judge.{r['judge']}.win_rate{key}"] = r[stat]
    return _clean(m)


def sweep_metrics(s: Summary) -> dict[str, float]:
    """Return the sweep's metrics: the scope metrics over every cell, and the failed items as grouped in the summary."""
    m = _scope_metrics(s, None)
    m["failed_items"] = int(s.failures["count"].sum()) if not s.failures.is_empty() else 0
    for r in s.failures.iter_rows(named=True):  # the same groups as the sweep's closing summary
        m[f"failed.{r['stage']}.{r['who']}.{r['kind']}"] = r["count"]
    return _clean(m)
