"""What a comparison says where its rows cannot be significant (too few scenarios: ``min_p``, a warning line),
and the row it keeps for a cell graded in run A only (its answers or judgments all failed in B)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from bench.compare.comparison import too_few
from bench.compare.matching import LOST_SCHEMA
from bench.compare.paired import min_p_value, paired_rows

SHARED = pl.DataFrame({"cell_a": ["x/p@v1", "y/p@v1"], "cell_b": ["x/p@v1", "y/p@v1"], "answers": [5, 6]})


def _items(n: int, diff: float) -> pl.DataFrame:
    return pl.DataFrame([{"cell_a": "x/p@v1", "cell_b": "x/p@v1", "judge": "j", "criterion": "composite",
                          "scenario": f"s{i}", "sample": 0, "value_a": 1.0, "value_b": 1.0 + diff, "diff": diff}
                         for i in range(n)])


def test_five_scenarios_can_never_be_significant_and_the_row_and_a_warning_say_so():
    """Every one of 5 scenarios up by 4 points (1 → 5): p = 2/32 = 0.0625, the floor min_p; not significant."""
    rows = paired_rows(_items(5, 4.0), SHARED, n_boot=200, seed=0, alpha=0.05)
    [row] = rows.to_dicts()
    assert row["p_value"] == pytest.approx(0.0625) and row["min_p"] == pytest.approx(0.0625)
    assert not row["significant"] and row["ci_low"] == row["ci_high"] == 4.0
    [line] = too_few(rows, 0.05)
    assert line.startswith("1 row(s) have at most 5 scenario(s): no p-value can reach alpha 0.05")
    assert line.endswith(": j · x/p@v1")
    assert too_few(rows, 0.1) == [], "0.0625 < 0.1: reachable"
    six = paired_rows(_items(6, 4.0), SHARED, n_boot=200, seed=0, alpha=0.05)
    assert six["min_p"][0] == pytest.approx(2 / 64) and six["significant"][0] and too_few(six, 0.05) == []


def test_min_p_is_two_over_two_to_the_n():
    assert min_p_value([0, 1, 4, 5, 17]).tolist() == pytest.approx([1.0, 1.0, 0.125, 0.0625, 2 / 2 ** 17])


def test_a_cell_graded_in_a_only_keeps_a_row_with_nothing_matched():
    lost = pl.DataFrame({"cell_a": ["y/p@v1"], "cell_b": ["y/p@v1"], "judge": ["j"], "criterion": ["composite"]},
                        schema=LOST_SCHEMA)
    rows = paired_rows(_items(8, 1.0), SHARED, n_boot=200, seed=0, alpha=0.05, lost=lost)
    gone = rows.filter(pl.col("cell_b") == "y/p@v1").row(0, named=True)
    assert (gone["n_matched"], gone["n_unscored"], gone["n_scenarios"], gone["significant"]) == (0, 6, 0, False)
    assert gone["diff"] != gone["diff"] and gone["test"] is None  # NaN: no difference to speak of
    kept = rows.filter(pl.col("cell_b") == "x/p@v1").row(0, named=True)
    assert kept["n_matched"] == 8 and kept["p_holm"] == pytest.approx(kept["p_value"]), "Holm over tested rows only"
    alone = paired_rows(pl.DataFrame(), SHARED, n_boot=10, seed=0, alpha=0.05,
                        lost=lost)
    assert alone.height == 1 and alone["n_matched"][0] == 0 and too_few(alone, 0.05) == []


def test_holm_counts_a_single_criterion_rubric_once_and_the_report_is_exact():
    """Two cells graded on one criterion: 4 rows (quality and its composite) but 2 tests; Holm was over 4."""
    items = pl.concat([_items(8, 1.0).with_columns(pl.lit(c).alias("criterion"))
                       for c in ("composite", "quality")])
    items = pl.concat([items, items.with_columns(pl.lit("y/p@v1").alias("cell_a"), pl.lit("y/p@v1").alias("cell_b"),
                                                 pl.col("diff") * 0 + 0.5, pl.col("value_b") * 0 + 1.5)])
    rows = paired_rows(items, SHARED, n_boot=100, seed=0, alpha=0.05)
    assert rows.height == 4 and rows["p_value"].to_list() == pytest.approx([2 / 256] * 4)
    assert rows["p_holm"].to_list() == pytest.approx([2 * 2 / 256] * 4), "a family of 2, not 4"
    from bench.analysis.bootstrap import sign_flip_pvalues
    assert sign_flip_pvalues(np.ones(5)) == 0.0625, "the report's paired differences: exact up to 16 (was 0.0665)"


def test_the_text_table_shows_p_and_p_holm(tmp_path):
    from bench.compare import compare_runs
    from bench.compare.command import comparison_text
    from bench.testing.graded_runs import write_run
    a = write_run(tmp_path / "a", {"m1/p@v1": [4.0] * 8})
    b = write_run(tmp_path / "b", {"m1/p@v1": [3.0] * 8})
    text = comparison_text(compare_runs(a, b, n_boot=100))
    header = next(line for line in text.splitlines() if "p_holm" in line)
    assert "p_value" in header and header.index("p_value") < header.index("p_holm")
