"""compare_runs on two real sweeps (tests/compare/conftest.py): the difference is found exactly where the fake
provider's scores differ, the pairing agrees with scipy's Wilcoxon test and a bootstrap computed by hand from the
records, answers of one run only are listed, and `bench compare --json` prints the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from bench.analysis import compare_runs
from bench.testing.in_process import command
from tests.compare.conftest import CHANGED_A, CHANGED_B, SAME, STRONG_ANSWER

MAP = {CHANGED_A: CHANGED_B}


@pytest.fixture(scope="module")
def cmp(two_runs):
    _tmp, a, b = two_runs
    return compare_runs(a, b, mapping=MAP, seed=0, n_boot=2000, alpha=0.05)


def test_the_changed_prompt_is_significant_exactly_where_the_scripted_scores_differ(cmp):
    rows = cmp.rows
    assert set(rows["criterion"]) == {"composite", "quality", "clarity"}
    assert {(r["cell_a"], r["cell_b"]) for r in rows.iter_rows(named=True)} == {(SAME, SAME), (CHANGED_A, CHANGED_B)}
    changed, same = rows.filter(pl.col("cell_a") == CHANGED_A), rows.filter(pl.col("cell_a") == SAME)
    assert changed["significant"].all() and (changed["diff"] > 1).all() and (changed["ci_low"] > 0).all()
    assert (changed["n_changed"] > 0).all() and (changed["mean_b"] > changed["mean_a"]).all()
    assert not same["significant"].any() and (same["diff"] == 0).all() and (same["n_changed"] == 0).all()
    assert (same["p_value"] == 1.0).all()
    assert (rows["n_matched"] == 19).all() and (rows["n_scenarios"] == 19).all() and (rows["n_unscored"] == 0).all()
    assert set(rows["test"]) == {"wilcoxon"}, "19 scenarios: above N_EXACT"
    assert rows["judge"].unique().to_list() == ["grader"], "the pairwise judge has win rates, not rows"


def _by_hand(run: Path, cell: str) -> dict[str, float]:
    """Return the grader's composite per scenario of ``cell``, read from the run's JSONL records directly."""
    cands = {c["id"]: c for c in map(json.loads, (run / "candidates.jsonl").read_text().splitlines())}
    out = {}
    for j in map(json.loads, (run / "judgments.jsonl").read_text().splitlines()):
        c = cands[j["candidate_ids"][0]]
        if j["judge_id"] == "grader" and j["error"] is None and f"{c['model_id']}/{c['prompt_id']}@{c['prompt_version']}" == cell:
            out[j["scenario_id"]] = j["score"]
    return out


def test_the_pairing_agrees_with_scipy_wilcoxon_and_a_bootstrap_by_hand(cmp, two_runs):
    _tmp, a, b = two_runs
    ga, gb = _by_hand(a, CHANGED_A), _by_hand(b, CHANGED_B)
    shared = sorted(ga.keys() & gb.keys())  # the scenarios in sorted id order, as the bootstrap resamples them
    d = np.array([gb[s] - ga[s] for s in shared])
    assert len(shared) == 19 and len(set(d)) > 1, "differences that vary: the bootstrap interval means something"
    row = cmp.rows.filter((pl.col("cell_a") == CHANGED_A) & (pl.col("criterion") == "composite")).row(0, named=True)
    assert row["diff"] == pytest.approx(d.mean())
    assert row["mean_a"] == pytest.approx(np.mean([ga[s] for s in shared]))
    assert row["p_value"] == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-12)
    rng = np.random.default_rng(0)
    means = np.array([d[rng.integers(0, d.size, size=d.size)].mean() for _ in range(2000)])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), rel=1e-9)
    every = cmp.rows["p_value"].to_numpy()
    order = np.argsort(every)
    holm = np.minimum(1, np.maximum.accumulate((every.size - np.arange(every.size)) * every[order]))
    assert cmp.rows["p_holm"].to_numpy()[order] == pytest.approx(holm)


def test_answers_of_one_run_only_are_listed(cmp, two_runs):
    _tmp, a, b = two_runs
    scenario = {json.loads(line)["fields"]["topic"]: json.loads(line)["id"]
                for run in (a, b) for line in (run / "scenarios.jsonl").read_text().splitlines()}
    assert cmp.only_in_a == [{"cell": c, "scenario_id": scenario["t0"], "sample": 0} for c in (SAME, CHANGED_A)]
    assert sorted(cmp.only_in_b, key=lambda x: x["cell"]) == [
        {"cell": c, "scenario_id": scenario["t20"], "sample": 0} for c in (SAME, CHANGED_B)]
    assert any("2 answer(s) only in run A (ca) and 2 only in run B (cb)" in w for w in cmp.warnings)


def test_the_pairwise_judge_gives_the_win_rate_of_b_over_a(cmp):
    # p@v1 was judged against q@v1's answers in A and q@v2's in B: not the same pair, so not compared
    assert cmp.pairwise["cell_a"].to_list() == [CHANGED_A]
    pw = cmp.pairwise.row(0, named=True)
    assert pw["judge"] == "arena" and pw["n"] == 19 and pw["n_scenarios"] == 19
    assert pw["win_rate_b"] > 0.5 and pw["ci_low"] > 0.5 and pw["wins"] > pw["losses"]
    assert pw["win_rate_b"] == pytest.approx((pw["wins"] + pw["ties"] / 2) / pw["n"])


def test_items_that_changed_most_show_both_answers(cmp):
    top = cmp.most_changed()
    assert set(top["cell_a"]) == {CHANGED_A} and top.height == 5
    assert (top["answer_b"] == STRONG_ANSWER).all() and top["answer_a"].str.starts_with("fake answer").all()
    assert top["rationale_a"].is_not_null().all() and top["rationale_b"].is_not_null().all()
    assert top["question"].str.starts_with("topic: t").all()


def test_bench_compare_json_prints_the_same_numbers(cmp, two_runs):
    tmp, a, b = two_runs
    out = command(tmp, "compare", str(a), str(b), "--map", f"{CHANGED_A}={CHANGED_B}", "--json", "--no-track")
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout)  # stdout is the JSON document alone; the report's path went to stderr
    assert f"report: {tmp / 'reports' / 'ca-vs-cb' / 'index.html'}" in out.stderr
    expected = cmp.to_json()
    assert data["rows"] == expected["rows"] and data["pairwise"] == expected["pairwise"]
    assert data["only_in_a"] == cmp.only_in_a and data["warnings"] == cmp.warnings
    assert data["counts"] == {"rows": 6, "significant": 3, "better": 3, "worse": 0, "only_in_a": 2, "only_in_b": 2}
    saved = json.loads((tmp / "reports" / "ca-vs-cb" / "comparison.json").read_text())
    assert saved["rows"] == data["rows"]


def test_a_mapping_naming_a_missing_cell_is_refused(two_runs):
    tmp, a, b = two_runs
    out = command(tmp, "compare", str(a), str(b), "--map", "m/q@v9=m/q@v2", "--no-track", "--no-report")
    assert out.returncode == 2
    assert "--map names cell(s) 'm/q@v9' that run A (ca) does not have; its cells: m/p@v1, m/q@v1" in out.stderr
