"""Every statistical check of a gate is one Holm family (issue 48, item 2): win rates and kappas with the drops.

Before, ``win_rate_min`` and ``agreement_min`` were decided by their interval alone, outside the family, so a gate
of many checks failed runs with no real change more often than alpha. The runs are written directly
(bench.testing.graded_runs): 3 cells × 16 scenarios, a pairwise judge ``arena`` against a fixed reference answer
(the baseline tied every battle) and a blind reviewer of both judges.
"""

from __future__ import annotations

import pytest
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests

from bench.gates import evaluate_gates
from bench.gates.spec import Gates
from bench.testing.graded_runs import write_run

CELLS = ("m1/p@v1", "m2/p@v1", "m3/p@v1")
N = 16
GRADES = [float(2 + i % 4) for i in range(N)]  # the same in both runs: no drop
LOST = ["A>B"] * 3 + ["A=B"] + ["B>A"] * 12  # 3 wins, 1 tie, 12 losses: one-sided exact p = 576/32768
MIRRORED = {(k, i) for k in range(3) for i in (0, 4, 8, 12)} - {(2, 8), (2, 12)}  # 10 grades of 2 reviewed 4
FLOOR = 0.81  # agreement_min: the grader's kappa (0.6 with those 10 of 48 reviews mirrored) has its CI below it


def gate(tmp_path, verdicts: dict[str, list[str]], mirrored=MIRRORED):
    write_run(tmp_path / "base", {c: GRADES for c in CELLS}, verdicts={c: ["A=B"] * N for c in CELLS})
    reviews = {"grader": {c: [6 - g if (k, i) in mirrored else g for i, g in enumerate(GRADES)]
                          for k, c in enumerate(CELLS)}, "arena": verdicts}
    write_run(tmp_path / "run", {c: GRADES for c in CELLS}, verdicts=verdicts, reviews=reviews)
    gates = Gates(baseline="base", max_drop=0.25, win_rate_min=0.5, agreement_min=FLOOR)
    return evaluate_gates(tmp_path / "run", gates, tmp_path / "base", resamples=2000)


def by(report, gate: str) -> dict[str, object]:
    return {r.subject: r for r in report.results if r.gate == gate}


def test_checks_that_fail_alone_pass_as_a_family_of_nine(tmp_path):
    """Each cell's win rate (0.22) and the grader's kappa (0.6) have their whole interval below the floor, and
    their one-sided p is below 0.05: each failed on main. Among 9 checks (3 drops, 4 win rates, 2 kappas), Holm
    makes them 9 × p > 0.05: the gate passes, its false-failure rate with no change at most alpha."""
    report = gate(tmp_path, {c: LOST for c in CELLS})
    rates, kappas = by(report, "win_rate_min"), by(report, "agreement_min")
    lost = [rates[f"arena · {c}"] for c in CELLS]
    grader = kappas["grader · composite vs humans"]
    assert all(r.value == pytest.approx(3.5 / 16) and r.ci_high < 0.5 for r in lost), "premise: CI below the floor"
    assert grader.value == pytest.approx(0.6) and grader.ci_high < FLOOR, "premise"
    assert report.exit_code == 0 and not report.failed, [r.reason for r in report.failed]
    assert [r.p for r in lost] == pytest.approx([binomtest(3, 15, 0.5, alternative="less").pvalue] * 3)
    assert grader.p < 0.05 < grader.p_holm
    tested = [r for r in report.results if r.p is not None]
    assert len(tested) == 9 and {r.gate for r in tested} == {"max_drop", "win_rate_min", "agreement_min"}
    assert [r.p_holm for r in tested] == pytest.approx(multipletests([r.p for r in tested], method="holm")[1].tolist())


def test_a_real_violation_still_fails_in_the_family(tmp_path):
    """m1 lost all 16 battles (p = 1/2¹⁶) and the grader's kappa is negative: both fail after Holm over 9."""
    report = gate(tmp_path, {**{c: LOST for c in CELLS}, "m1/p@v1": ["B>A"] * N},
                  mirrored={(k, i) for k in range(3) for i in range(0, N, 2)})
    assert report.exit_code == 5
    assert {(r.gate, r.subject) for r in report.failed} == {("win_rate_min", "arena · m1/p@v1"),
                                                            ("agreement_min", "grader · composite vs humans")}
    m1 = by(report, "win_rate_min")["arena · m1/p@v1"]
    assert m1.p == pytest.approx(2 ** -16) and m1.p_holm == pytest.approx(9 * 2 ** -16)
    assert "a win rate below the floor shown" in m1.reason


def test_too_few_reviewed_answers_cannot_decide(tmp_path):
    """4 reviewed answers, kappa 1: no test on 4 units reaches 0.05 (1/2⁴): exit 6 naming the count, not a pass."""
    write_run(tmp_path / "run", {"m1/p@v1": [2.0, 3.0, 4.0, 5.0]}, reviews={"grader": {"m1/p@v1": [2.0, 3.0, 4.0, 5.0]}})
    report = evaluate_gates(tmp_path / "run", Gates(agreement_min=0.5))
    [kappa] = report.results
    assert report.exit_code == 6 and kappa.value == pytest.approx(1.0)
    assert kappa.reason.startswith("cannot decide: needs at least 5 reviewed answers (has 4)")


def test_strict_asks_a_win_rate_to_show_it_keeps_its_floor(tmp_path):
    """Strict: each check at alpha on its own, passed only when keeping the floor is shown. The cells that lost
    12 of 15 battles cannot show a win rate ≥ ½; the reference answer, which won those, shows one above it."""
    run, base = _runs(tmp_path)
    report = evaluate_gates(run, Gates(baseline="base", win_rate_min=0.5, strict=True), base)
    rates = by(report, "win_rate_min")
    assert not rates["arena · m1/p@v1"].passed and rates["arena · ref/p@v1"].passed
    assert rates["arena · ref/p@v1"].p_holm == rates["arena · ref/p@v1"].p < 0.05


def _runs(tmp_path):
    base = write_run(tmp_path / "base", {c: GRADES for c in CELLS}, verdicts={c: ["A=B"] * N for c in CELLS})
    return write_run(tmp_path / "run", {c: GRADES for c in CELLS}, verdicts={c: LOST for c in CELLS}), base
