"""Each judge's agreement with human reviews, with a bootstrap interval: what ``agreement_min`` gates.

One row of `bench judges`' agreement table (:func:`bench.analysis.human_agreement`): quadratic-weighted kappa
against the latest blind reviews, with its interval over the reviewed items. A gate reads a kappa from a single
review on: the floor decides, the interval shows how little few reviews say.
"""

from __future__ import annotations

import polars as pl

from bench.analysis import COMPOSITE, RunTables
from bench.analysis.human_agreement import VERDICT
from bench.analysis.human_agreement import human_agreement

AGREEMENT_COLUMNS = {"judge": pl.Utf8, "criterion": pl.Utf8, "n": pl.Int64, "kappa": pl.Float64,
                     "ci_low": pl.Float64, "ci_high": pl.Float64, "note": pl.Utf8}


def gate_agreement(t: RunTables, *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Return per judge of the run its agreement with human reviews: criterion ("composite", or "verdict" for a
    pairwise judge), n (reviewed judgments with a grade of both), kappa, its bootstrap CI and a note saying why
    kappa is missing (no review, or undefined), or null."""
    pairwise = set(t.judgments.filter(pl.col("mode") == "pairwise")["judge"].to_list())
    table = human_agreement(t, resamples=resamples, seed=seed, level=level, min_reviews=1)
    rows = []
    for judge in sorted(t.judgments["judge"].drop_nulls().unique().to_list()):
        criterion = VERDICT if judge in pairwise else COMPOSITE
        found = table.filter((pl.col("judge") == judge) & (pl.col("criterion") == criterion)).to_dicts()
        row = found[0] if found else {"n": 0, "note": "no blind human review of its judgments (bench review "
                                                      "export/apply, or the review panel)"}
        rows.append({"judge": judge, "criterion": criterion, **{k: row.get(k) for k in AGREEMENT_COLUMNS
                                                                 if k not in ("judge", "criterion")}})
    return pl.DataFrame(rows, schema=AGREEMENT_COLUMNS)
