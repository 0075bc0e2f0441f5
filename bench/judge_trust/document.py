"""The JSON document of `bench judges RUN --json`: per judge, its agreement with the blind human reviews, its
confusion matrices, its bias at each human grade and its bias audit; and the reviewers' own agreement (the
ceiling). An undefined value (NaN) is written as null, so the document is strict JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis import RunTables, judge_agreement, load_run
from bench.core.errors import BenchError
from bench.analysis.judge_audit import judge_audit

SCHEMA_VERSION = 1  # raised when a key changes meaning or goes away


def judges_document(t: RunTables, *, resamples: int = 2000, seed: int = 0, level: float = 0.95,
                    min_reviews: int = 10) -> dict[str, Any]:
    """Return the document of the run's judges (plain JSON types; NaN as None)."""
    agreement = judge_agreement(t, resamples=resamples, seed=seed, level=level, min_reviews=min_reviews)
    audit = judge_audit(t, resamples=resamples, seed=seed, level=level)
    judges = sorted(set(t.judgments["judge"].drop_nulls().to_list()) | set(audit))
    table = agreement.agreement
    return plain({
        "schema_version": SCHEMA_VERSION, "run": t.name, "reviews": agreement.reviews,
        "not_blind_reviews": agreement.not_blind,
        "resamples": resamples, "seed": seed, "level": level, "min_reviews": min_reviews,
        "judges": [{"judge": judge,
                    "agreement": table.filter(pl.col("judge") == judge).to_dicts(),
                    "confusion": {criterion: [list(r) for r in m.iter_rows()]
                                  for (owner, criterion), m in agreement.confusions.items() if owner == judge},
                    "bias_by_level": agreement.bias.filter(pl.col("judge") == judge).drop("judge").to_dicts(),
                    "audit": audit.get(judge, {})}
                   for judge in judges],
        "reviewer_ceiling": agreement.ceiling.to_dicts()})


def judged_run(folder: Path) -> RunTables:
    """Return the tables of a run folder that has judgments; raise BenchError saying what is missing otherwise."""
    try:
        t = load_run(folder)
    except FileNotFoundError as err:
        raise BenchError(str(err)) from None
    if t.judgments.is_empty():
        raise BenchError(f"{folder}: the run has no judgments yet; nothing to say about its judges "
                         f"(bench sweep params/<grid>.yaml judges it)")
    return t


def plain(value: Any) -> Any:
    """Return ``value`` with every NaN or infinite float replaced by None, in nested dicts and lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
