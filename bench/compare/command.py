"""`bench compare RUN_A RUN_B`: compare, write the diff report, log to MLflow, print the table; with ``--json``
the comparison is the only thing on stdout. Exit 0 whatever the differences (gates decide: `bench gate`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import bench.compare as compare
import bench.tracking as tracking
from bench.core.errors import BenchError
from bench.core.paths import resolve, run_dir
from bench.report.display import table_text

SHOWN_ONLY = 10  # answers of one run only, listed by the text output (the JSON and the report list them all)


def run_folder(arg: str | Path) -> Path:
    """Return the run folder ``arg`` names: a path, else a sweep name under ``runs/``; BenchError if neither."""
    path = resolve(arg)
    if path.is_dir():
        return path
    if isinstance(arg, str) and "/" not in arg and run_dir(arg).is_dir():
        return run_dir(arg)
    raise BenchError(f"{arg}: no such run folder (give runs/<sweep> or a sweep name; `bench sweep` makes one)")


def compare_command(run_a: str | Path, run_b: str | Path, *, mapping: Mapping[str, str] | None = None,
                    seed: int = 0, n_boot: int = 2000, alpha: float = 0.05, human_overrides: bool = False,
                    allow_rubric_change: bool = False,
                    as_json: bool = False, out: str | Path | None = None, report: bool = True,
                    track: bool = True) -> int:
    """Compare run B with run A, write the diff report and log to MLflow (unless False), print it; return 0."""
    cmp = compare.compare_runs(run_folder(run_a), run_folder(run_b), mapping, seed=seed, n_boot=n_boot, alpha=alpha,
                               human_overrides=human_overrides, allow_rubric_change=allow_rubric_change)
    path = compare.write_diff_report(cmp, out) if report else None
    tracked = tracking.log_comparison(cmp, path) if track else None
    said = sys.stderr if as_json else sys.stdout
    print(json.dumps(cmp.to_json(), allow_nan=False, indent=1, ensure_ascii=False) if as_json else
          comparison_text(cmp))
    if path is not None:
        print(f"report: {path}", file=said)
    if tracked:
        print(f"mlflow: comparison run {tracked} in {tracking.shown_uri(tracking.tracking_uri(cmp.tables_b.run_dir))}",
              file=said)
    return 0


def comparison_text(cmp: Any) -> str:
    """Return a comparison as text: warnings first, the rows, the pairwise win rates, the answers of one run only."""
    import polars as pl  # noqa: PLC0415 (polars: loaded with the comparison already; `bench --help` stays light)
    lines = [f"warning: {w}" for w in cmp.warnings]
    lines.append(f"bench compare: run B {cmp.run_b} against run A {cmp.run_a}")
    verdict = (pl.when(pl.col("significant") & (pl.col("diff") > 0)).then(pl.lit("better"))
               .when(pl.col("significant") & (pl.col("diff") < 0)).then(pl.lit("worse")).otherwise(pl.lit("-")))
    shown = cmp.rows.with_columns(verdict.alias("verdict")).select(
        "cell_a", "cell_b", "judge", "criterion", "n_matched", "n_changed", "mean_a", "mean_b", "diff", "ci_low",
        "ci_high", "p_value", "p_holm", "test", "verdict")
    lines.append(table_text(shown, max_rows=500) if shown.height else "no cell pair graded by one judge in both runs")
    if cmp.pairwise.height:
        lines += ["pairwise judges, B's answers against A's (0.5 = no change):", table_text(cmp.pairwise, max_rows=500)]
    for side, listed in (("A", cmp.only_in_a), ("B", cmp.only_in_b)):
        if listed:
            more = f" (first {SHOWN_ONLY}; --json lists all)" if len(listed) > SHOWN_ONLY else ""
            lines.append(f"{len(listed)} answer(s) only in run {side}{more}: " + ", ".join(
                f"{x['cell']} {x['scenario_id']}#{x['sample']}" for x in listed[:SHOWN_ONLY]))
    return "\n".join(lines)
