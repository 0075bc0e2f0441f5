"""The JSON document of `bench judges RUN --json`: per judge its accuracy, agreement with blind reviews,
confusion matrices, bias and bias audit; and the reviewers' own agreement. NaN is written as null (strict JSON)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis import RunTables, judge_agreement, load_run
from bench.analysis.accuracy import ALL, judge_accuracy, label_agreement, not_measured
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
    truth = judge_accuracy(label_agreement(t), resamples=resamples, seed=seed, level=level)
    left_out = not_measured(t)
    return plain({
        "schema_version": SCHEMA_VERSION, "run": t.name, "reviews": agreement.reviews,
        "not_blind_reviews": agreement.not_blind,
        "resamples": resamples, "seed": seed, "level": level, "min_reviews": min_reviews,
        "judges": [{"judge": judge,
                    **_accuracy(truth.filter(pl.col("judge") == judge), audit.get(judge, {}), left_out.get(judge)),
                    "agreement": table.filter(pl.col("judge") == judge).to_dicts(),
                    "confusion": {criterion: [list(r) for r in m.iter_rows()]
                                  for (owner, criterion), m in agreement.confusions.items() if owner == judge},
                    "bias_by_level": agreement.bias.filter(pl.col("judge") == judge).drop("judge").to_dicts(),
                    "audit": audit.get(judge, {})}
                   for judge in judges],
        "reviewer_ceiling": agreement.ceiling.to_dicts()})


def _accuracy(rows: pl.DataFrame, audit: dict[str, dict[str, Any]], why: str | None) -> dict[str, Any]:
    """Return a judge's accuracy fields (pooled, per order, both orders), audit position measures, ``ground_truth``."""
    main = rows.filter(pl.col("category") == ALL).sort(~pl.col("against").str.starts_with("reference."), "against")
    top = main.row(0, named=True) if main.height else {}
    seats = {m: audit.get(m, {}).get("value") for m in ("first_slot_preference", "flip_rate")}
    by_order = {"AB": top.get("accuracy_ab"), "BA": top.get("accuracy_ba")}
    return {"accuracy": top.get("accuracy"), "accuracy_against": top.get("against"),
            "accuracy_by_order": by_order if any(v is not None for v in by_order.values()) else None,
            "accuracy_both_orders": top.get("accuracy_both_orders"), **seats,
            "kappa_against_label": {"kappa": top["kappa"], "ci_low": top["kappa_ci_low"],
                                    "ci_high": top["kappa_ci_high"]} if top else None,
            "accuracy_note": why or top.get("note") or (None if top else "no ground truth: no label on its scenarios "
                                                          "and no automated judge with reference checks"),
            "ground_truth": rows.to_dicts()}


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
