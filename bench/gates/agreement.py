"""Each judge's agreement with human reviews, with a bootstrap interval and test: what ``agreement_min`` gates
(quadratic-weighted kappa against the latest blind reviews)."""

from __future__ import annotations

import polars as pl

from bench.analysis import COMPOSITE, RunTables
from bench.analysis.agreement_bootstrap import agreement_draws
from bench.analysis.human_agreement import VERDICT, human_agreement, rated, score_pairs, verdict_pairs
from bench.gates.decide import bootstrap_p

AGREEMENT_COLUMNS = {"judge": pl.Utf8, "criterion": pl.Utf8, "n": pl.Int64, "items": pl.Int64, "kappa": pl.Float64,
                     "ci_low": pl.Float64, "ci_high": pl.Float64, "p": pl.Float64, "note": pl.Utf8}


def gate_agreement(t: RunTables, *, floor: float | None = None, strict: bool = False, resamples: int = 1000,
                   seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Return per judge its agreement with human reviews: criterion, n, items, kappa and its bootstrap CI; with a
    ``floor``, the one-sided bootstrap p that kappa is below it (``strict``: above); ``note``: why kappa is missing."""
    pairwise = set(t.judgments.filter(pl.col("mode") == "pairwise")["judge"].to_list())
    table = human_agreement(t, resamples=resamples, seed=seed, level=level, min_reviews=1)
    pairs = {COMPOSITE: score_pairs(t), VERDICT: verdict_pairs(t)}
    rows = []
    for judge in sorted(t.judgments["judge"].drop_nulls().unique().to_list()):
        criterion = VERDICT if judge in pairwise else COMPOSITE
        found = table.filter((pl.col("judge") == judge) & (pl.col("criterion") == criterion)).to_dicts()
        row = found[0] if found else {"n": 0, "items": 0, "note": "no blind human review of its judgments (bench "
                                                                  "review export/apply, or the review panel)"}
        if floor is not None and row.get("kappa") is not None:
            part = pairs[criterion].filter((pl.col("judge") == judge) & (pl.col("criterion") == criterion)
                                           & (pl.col("rubric") == row["rubric"]))
            x, y, within, weights = rated(part, criterion)
            kappa = agreement_draws(x, y, part["item"].to_numpy(), weights=weights, within=within,
                                    resamples=resamples, seed=seed).kappa  # human_agreement's draws: its interval
            row = {**row, "p": bootstrap_p(kappa, floor, strict=strict)}
        rows.append({"judge": judge, "criterion": criterion, **{k: row.get(k) for k in AGREEMENT_COLUMNS
                                                                 if k not in ("judge", "criterion")}})
    return pl.DataFrame(rows, schema=AGREEMENT_COLUMNS)
