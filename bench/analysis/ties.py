"""Which ties the probability-weighted scores break (``bench.judge.logprobs``), per judge."""

from __future__ import annotations

import polars as pl

from bench.analysis._inputs import require
from bench.analysis.tables import COMPOSITE


def ties_broken(scores: pl.DataFrame, *, criterion: str = COMPOSITE) -> pl.DataFrame:
    """Return per judge: how many pairs of answers tie on the sampled score and how many of those the expected
    score breaks; plus the cells whose rank differs between the sampled and the expected means."""
    require(scores, ("judge", "cell", "criterion", "value", "expected"), "ties_broken", "scores")
    part = scores.filter((pl.col("criterion") == criterion) & pl.col("expected").is_not_null())
    rows = []
    for (judge,), g in part.sort("judge").group_by(["judge"], maintain_order=True):
        values, expected = g["value"].to_list(), g["expected"].to_list()
        ties = broken = 0
        for i in range(len(values)):
            for j in range(i + 1, len(values)):
                if values[i] == values[j]:
                    ties += 1
                    broken += abs(expected[i] - expected[j]) > 1e-9
        cells = g.group_by("cell").agg(pl.col("value").mean(), pl.col("expected").mean())
        cells = cells.with_columns(pl.col("value").rank("min", descending=True).alias("r1"),
                                   pl.col("expected").rank("min", descending=True).alias("r2"))
        moved = cells.filter(pl.col("r1") != pl.col("r2"))["cell"].sort().to_list()
        rows.append((judge, g.height, ties, broken, ", ".join(moved)))
    return pl.DataFrame(rows, schema={"judge": pl.Utf8, "answers": pl.Int64, "tied_pairs": pl.Int64,
                                      "ties_broken": pl.Int64, "cells_reranked": pl.Utf8}, orient="row")
