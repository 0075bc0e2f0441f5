"""Grades outside their rubric's scale (hand-edited, damaged), set aside with one warning before any table
counts them."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from bench.core.reviewed import COMPOSITE, off_scale

Scales = Mapping[str, Mapping[str, tuple[float, float]]]  # rubric key -> criterion (and composite) -> (lo, hi)


def off_scale_judgments(scores: pl.DataFrame, scales: Scales, run_dir: Path) -> set[str]:
    """Return the ids of the judgments of ``scores`` with a non-finite or off-scale grade, warning once if any."""
    bounds = pl.DataFrame([(key, name, lo, hi) for key, scale in scales.items() for name, (lo, hi) in scale.items()],
                          schema={"rubric": pl.Utf8, "criterion": pl.Utf8, "lo": pl.Float64, "hi": pl.Float64},
                          orient="row")
    value, lo, hi = pl.col("value"), pl.col("lo"), pl.col("hi")
    # a hybrid's composite is its own 0-1 mix of the criteria and the checks (bench.config.scoring.hybrid_score),
    # not on the rubric's composite scale: its criteria are checked, it is checked for being finite
    bounded = lo.is_not_null() & ~((pl.col("criterion") == COMPOSITE) & (pl.col("mode") == "hybrid"))
    bad = (scores.select("judge", "rubric", "mode", "judgment", "criterion", "value")
           .join(bounds, on=["rubric", "criterion"], how="left")
           .filter(value.is_nan() | value.is_infinite() | (bounded & ((value < lo) | (value > hi)))))
    if bad.height == 0:
        return set()
    ids = set(bad["judgment"].to_list())
    first = bad.row(0, named=True)
    said = off_scale({first["criterion"]: first["value"]}, scales.get(first["rubric"]))
    warnings.warn(f"{run_dir}: {len(ids)} judgment(s) set aside: a grade outside its rubric's scale (first: "
                  f"judgment {first['judgment']} of judge {first['judge']}, {', '.join(said)}); no table or count "
                  f"reads them: delete their records and run the judge stage again to re-grade them",
                  UserWarning, stacklevel=3)
    return ids
