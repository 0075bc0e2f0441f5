"""`compare_runs`: two run folders compared on the items they share, as one :class:`Comparison` with what a
reader looks at next (most changed items, scenarios against the direction) and its JSON form."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis.tables import COMPOSITE, RunTables, load_run, with_reviews
from bench.compare.changes import cell_changes, refuse_rubric_changes
from bench.compare.matching import CHANGED, ITEM, match
from bench.compare.paired import N_EXACT, paired_rows, win_rate_rows
from bench.config.scenarios import describe
from bench.core.errors import BenchError

TOP_CHANGED = 5  # items shown per (cell pair, judge) among those whose composite changed most


@dataclass
class Comparison:
    """Run B compared with run A on their shared items: ``rows`` and ``pairwise`` are polars DataFrames."""

    run_a: str  # the run folders' names
    run_b: str
    rows: pl.DataFrame  # per (cell_a, cell_b, judge, criterion incl. "composite"): see bench.compare.paired.ROW_SCHEMA
    pairwise: pl.DataFrame  # per (cell_a, cell_b, pairwise judge): n, win_rate_b, ci_low, ci_high, wins, ties, losses
    only_in_a: list[dict[str, Any]]  # {"cell", "scenario_id", "sample"}: answers run B lacks
    only_in_b: list[dict[str, Any]]
    warnings: list[str]  # judge and rubric differences first, then unpaired cells and answers
    items: pl.DataFrame  # per paired item × judge × criterion: value_a, value_b, diff (bench.compare.matching)
    settings: dict[str, Any]  # mapping, seed, n_boot, alpha, human_overrides, exact_test_max_scenarios
    tables_a: RunTables | None = field(default=None, repr=False)  # the answers, rationales and scenario texts
    tables_b: RunTables | None = field(default=None, repr=False)
    battles: pl.DataFrame | None = field(default=None, repr=False)  # the pairwise battles both runs fought (matching)

    @property
    def name(self) -> str:
        """``<a>-vs-<b>``: the diff report's folder under ``reports/``."""
        return f"{self.run_a}-vs-{self.run_b}"

    def scenario_diffs(self, criterion: str = COMPOSITE) -> pl.DataFrame:
        """Return per (cell_a, cell_b, judge, scenario) A's and B's mean grade on ``criterion`` and their difference."""
        return (self.items.filter(pl.col("criterion") == criterion)
                .group_by("cell_a", "cell_b", "judge", "scenario")
                .agg(pl.col("value_a").mean().alias("mean_a"), pl.col("value_b").mean().alias("mean_b"),
                     pl.col("diff").mean().alias("diff"), pl.len().alias("items"))
                .sort("cell_a", "cell_b", "judge", "scenario"))

    def sign_disagreements(self) -> pl.DataFrame:
        """Return the scenarios that moved against their row's overall composite difference, largest first."""
        overall = (self.rows.filter((pl.col("criterion") == COMPOSITE) & (pl.col("diff").abs() > CHANGED))
                   .select("cell_a", "cell_b", "judge", pl.col("diff").alias("overall_diff")))
        per = self.scenario_diffs().join(overall, on=["cell_a", "cell_b", "judge"])
        against = per.filter((pl.col("diff") * pl.col("overall_diff") < 0) & (pl.col("diff").abs() > CHANGED))
        return (_with_questions(against, self.tables_a)
                .sort(["cell_a", "cell_b", "judge", pl.col("diff").abs()], descending=[False, False, False, True])
                .select("cell_a", "cell_b", "judge", "scenario", "question", "mean_a", "mean_b", "diff",
                        "overall_diff", "items"))

    def most_changed(self, top: int = TOP_CHANGED) -> pl.DataFrame:
        """Return per (cell pair, judge) the ``top`` most changed items, answers and rationales side by side."""
        moved = (self.items.filter((pl.col("criterion") == COMPOSITE) & (pl.col("diff").abs() > CHANGED))
                 .sort(["cell_a", "cell_b", "judge", pl.col("diff").abs(), "scenario", "sample"],
                       descending=[False, False, False, True, False, False])
                 .group_by("cell_a", "cell_b", "judge", maintain_order=True).head(top))
        for s, t in (("a", self.tables_a), ("b", self.tables_b)):
            answers, reasons = _texts(t, s)
            moved = moved.join(answers, on=f"candidate_{s}", how="left").join(reasons, on=f"judgment_{s}", how="left")
        return _with_questions(moved, self.tables_a).select(
            "cell_a", "cell_b", "judge", *ITEM, "question", pl.col("value_a").alias("score_a"),
            pl.col("value_b").alias("score_b"), "diff", "answer_a", "answer_b", "rationale_a", "rationale_b")

    def to_json(self) -> dict[str, Any]:
        """Return the comparison as JSON-ready data (NaN as null): what `bench compare --json` prints."""
        sig = self.rows.filter(pl.col("significant"))
        return {"run_a": self.run_a, "run_b": self.run_b, "warnings": list(self.warnings), "settings": self.settings,
                "counts": {"rows": self.rows.height, "significant": sig.height,
                           "better": sig.filter(pl.col("diff") > 0).height,
                           "worse": sig.filter(pl.col("diff") < 0).height,
                           "only_in_a": len(self.only_in_a), "only_in_b": len(self.only_in_b)},
                "rows": records(self.rows), "pairwise": records(self.pairwise),
                "only_in_a": self.only_in_a, "only_in_b": self.only_in_b,
                "most_changed": records(self.most_changed()), "sign_disagreements": records(self.sign_disagreements())}


def records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Return a frame's rows as dicts with NaN and infinities as None (valid JSON)."""
    clean = lambda v: None if isinstance(v, float) and not math.isfinite(v) else v  # noqa: E731
    return [{k: clean(v) for k, v in row.items()} for row in frame.to_dicts()]


def _texts(t: RunTables | None, side: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return a run's (candidate id → answer) and (judgment id → rationale) frames, columns suffixed by ``side``."""
    if t is None:
        return (pl.DataFrame(schema={f"candidate_{side}": pl.Utf8, f"answer_{side}": pl.Utf8}),
                pl.DataFrame(schema={f"judgment_{side}": pl.Utf8, f"rationale_{side}": pl.Utf8}))
    answers = t.candidates.select(pl.col("id").alias(f"candidate_{side}"), pl.col("output").alias(f"answer_{side}"))
    reasons = t.judgments.select(pl.col("id").alias(f"judgment_{side}"), pl.col("rationale").alias(f"rationale_{side}"))
    return answers.unique(f"candidate_{side}"), reasons.unique(f"judgment_{side}")


def _with_questions(frame: pl.DataFrame, t: RunTables | None) -> pl.DataFrame:
    """Add ``question``: each scenario's fields as one line (its id when the run has no scenario record)."""
    texts = {k: describe(s.fields) for k, s in (t.scenarios.items() if t is not None else ())}
    return frame.with_columns(pl.col("scenario").replace_strict(texts, default=pl.col("scenario"),
                                                                return_dtype=pl.Utf8).alias("question"))


def compare_runs(run_a: str | Path | RunTables, run_b: str | Path | RunTables,
                 mapping: Mapping[str, str] | None = None, *, seed: int = 0, n_boot: int = 2000,
                 alpha: float = 0.05, human_overrides: bool = False, allow_rubric_change: bool = False) -> Comparison:
    """Compare run B with run A (folders or ``load_run`` tables) on their shared items; ``mapping``: {A cell: B
    cell}. A changed rubric is refused unless ``allow_rubric_change``. Calls no model."""
    if not 0.0 < alpha < 1.0:
        raise BenchError(f"alpha must be between 0 and 1 (0.05 for 95% intervals), not {alpha!r}")
    if n_boot < 1:
        raise BenchError(f"n_boot (--resamples) must be a positive number of bootstrap resamples, not {n_boot!r}")
    a, b = (t if isinstance(t, RunTables) else load_run(t) for t in (run_a, run_b))
    changed = refuse_rubric_changes(a.run_dir, b.run_dir, allow_rubric_change) + cell_changes(a.run_dir, b.run_dir)
    if human_overrides:
        a, b = with_reviews(a), with_reviews(b)
    m = match(a, b, mapping)
    settings = {"mapping": dict(mapping or {}), "seed": seed, "n_boot": n_boot, "alpha": alpha,
                "human_overrides": human_overrides, "exact_test_max_scenarios": N_EXACT,
                "allow_rubric_change": allow_rubric_change}
    rows = paired_rows(m.items, m.shared, n_boot=n_boot, seed=seed, alpha=alpha, lost=m.lost)
    return Comparison(a.name, b.name, rows, win_rate_rows(m.battles, n_boot=n_boot, seed=seed, alpha=alpha),
                      m.only_in_a, m.only_in_b, changed + m.warnings + too_few(rows, alpha), m.items, settings, a, b,
                      m.battles)


def too_few(rows: pl.DataFrame, alpha: float) -> list[str]:
    """Return a line naming the rows with too few scenarios for any p-value to reach ``alpha``."""
    few = rows.filter((pl.col("n_scenarios") > 0) & (pl.col("min_p") >= alpha))
    if few.is_empty():
        return []
    cells = sorted({f"{r['judge']} · {r['cell_b']}" for r in few.iter_rows(named=True)})
    most = int(few["n_scenarios"].max())
    return [f"{few.height} row(s) have at most {most} scenario(s): no p-value can reach alpha {alpha:g} there (the "
            f"smallest possible is min_p = 2/2^n), so they can never be significant, whatever the difference: "
            f"{', '.join(cells)}"]
