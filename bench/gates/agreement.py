"""Each judge's agreement with human reviews, with a bootstrap interval: what ``agreement_min`` gates.

The value is one row of `bench judges`' agreement table (:func:`bench.analysis.human_agreement`): Cohen's kappa of
the judge's grades against the latest blind human reviews of the same items (a review saved with the judges shown is
left out, as everywhere agreement is measured), quadratic-weighted on the composite score (rubric scales are
ordinal) and on a pairwise judge's verdicts by their order (A>>B … B>>A), with its interval over the reviewed items
(bench.analysis.agreement_bootstrap). A review covers an answer on a rubric version, for every judge (and repeat)
of that version (docs/review.md), so each review is counted for each of their judgments. A gate reads a kappa
from a single review on: the floor, not a minimum count, decides, and the interval shows how little few reviews say.
It is named ``gate_agreement`` so that ``human_agreement`` means one thing: the full table it reads.
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
