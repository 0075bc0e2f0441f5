"""``max_drop`` is a tolerance, the gate's checks are one family, and too few scenarios cannot decide (issue 48).

The runs are written directly (bench.testing.graded_runs): grades stated per scenario, read by the real gate code.
"""

from __future__ import annotations

import pytest

from bench.gates import evaluate_gates, gate_command
from bench.gates.decide import BoundTest
from bench.gates.evaluate import drop_results
from bench.gates.spec import Gates
from bench.testing.graded_runs import write_run

CELL = "m1/p@v1"


def drop_row(diff: float, lo: float, hi: float) -> dict:
    return {"cell_a": CELL, "cell_b": CELL, "judge": "grader", "criterion": "composite", "n_matched": 30,
            "n_scenarios": 30, "diff": diff, "ci_low": lo, "ci_high": hi}


def test_a_drop_of_0_3_in_minus_0_39_to_minus_0_21_passes_0_25_and_fails_0_15():
    """The issue's example: the interval shows a drop beyond 0.15, not beyond 0.25."""
    tests = {("max_drop", "grader", CELL, CELL): BoundTest(0.001, 0.001, 30)}
    [tolerated] = drop_results([drop_row(-0.3, -0.39, -0.21)], 0.25, False, tests=tests)
    [broken] = drop_results([drop_row(-0.3, -0.39, -0.21)], 0.15, False, tests=tests)
    assert tolerated.passed and "a drop beyond 0.25 not shown" in tolerated.reason
    assert not broken.passed and broken.decided and "lies below -0.15" in broken.reason


def gate(tmp_path, base: dict, run: dict, **gates) -> int:
    write_run(tmp_path / "base", base)
    write_run(tmp_path / "run", run)
    return evaluate_gates(tmp_path / "run", Gates(baseline="base", **gates), tmp_path / "base", resamples=500)


def test_an_observed_drop_over_max_drop_fails_only_when_shown_beyond_it(tmp_path):
    """12 of 40 scenarios down a point: a drop of 0.3, CI about [-0.45, -0.15]; it was exit 5 at max_drop 0.25."""
    grades = {CELL: [3.0] * 12 + [4.0] * 28}
    assert gate(tmp_path / "a", {CELL: [4.0] * 40}, grades, max_drop=0.25).exit_code == 0
    report = gate(tmp_path / "b", {CELL: [4.0] * 40}, grades, max_drop=0.1)
    assert report.exit_code == 5 and report.failed[0].p_holm < 0.05


def test_strict_passes_only_a_drop_shown_within_max_drop(tmp_path):
    """8 of 40 down a point: a drop of 0.2 ≤ 0.25, but its interval reaches below -0.25: strict fails it (the
    point estimate passed it)."""
    grades = {CELL: [3.0] * 8 + [4.0] * 32}
    report = gate(tmp_path / "a", {CELL: [4.0] * 40}, grades, max_drop=0.25, strict=True)
    [drop] = [r for r in report.results if r.gate == "max_drop"]
    assert report.exit_code == 5 and "not shown within it" in drop.reason
    assert gate(tmp_path / "b", {CELL: [4.0] * 40}, grades, max_drop=0.6, strict=True).exit_code == 0


def test_the_checks_are_one_family_holm_across_them(tmp_path):
    """5 of 40 scenarios down a point: one-sided p = 1/32 for one cell, which fails alone; three such cells
    are three tests, Holm's smallest p is 3/32 > 0.05, and none fails (each failed before: its CI excludes 0)."""
    down = [3.0] * 5 + [4.0] * 35
    assert gate(tmp_path / "one", {CELL: [4.0] * 40}, {CELL: down}, max_drop=0).exit_code == 5
    cells = ["m1/p@v1", "m2/p@v1", "m3/p@v1"]
    report = gate(tmp_path / "three", {c: [4.0] * 40 for c in cells}, {c: down for c in cells}, max_drop=0)
    drops = [r for r in report.results if r.gate == "max_drop"]
    assert report.exit_code == 0 and [r.p_holm for r in drops] == pytest.approx([3 / 32] * 3)
    assert report.alpha == 0.05 and all(r.p == pytest.approx(1 / 32) for r in drops)


def test_three_scenarios_cannot_decide_exit_6(tmp_path, capsys):
    """Every one of 3 scenarios down 3 points: no one-sided test on 3 can reach 0.05; it was exit 5."""
    write_run(tmp_path / "base", {CELL: [4.0] * 3})
    write_run(tmp_path / "run", {CELL: [1.0] * 3})
    code = gate_command(str(tmp_path / "run"), baseline=str(tmp_path / "base"), max_drop=0.25)
    out = capsys.readouterr().out
    assert code == 6 and "cannot decide: needs at least 5 scenarios (has 3)" in out, out  # one check: alpha
    assert "1 of 2 check(s) cannot decide (exit 6)" in out


def test_a_family_too_large_for_its_scenarios_cannot_decide(tmp_path):
    """6 scenarios, every one down 3 points, in each of 3 cells: one-sided p = 1/64 each, but Holm's first step
    asks 0.05/3 ... and with a min floor too (6 checks), 0.05/6 < 1/64: no check could ever fail: exit 6, not a
    silent pass."""
    cells = ["m1/p@v1", "m2/p@v1", "m3/p@v1"]
    three = gate(tmp_path / "a", {c: [4.0] * 6 for c in cells}, {c: [1.0] * 6 for c in cells}, max_drop=0.25)
    assert three.exit_code == 5, "0.05/3 = 0.0167 ≥ 1/64: 6 scenarios can decide 3 checks"
    six = gate(tmp_path / "b", {c: [4.0] * 6 for c in cells}, {c: [1.0] * 6 for c in cells}, max_drop=0.25, min=3)
    assert six.exit_code == 6 and all(r.reason.startswith("cannot decide: needs at least 7 scenarios (has 6)")
                                      for r in six.undecided) and len(six.undecided) == 6
