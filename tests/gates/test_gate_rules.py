"""The verdict rules on rows as the leaderboard and the comparison give them: every bound (a drop, a floor, a win
rate, a kappa) fails only when its interval lies beyond it and its Holm-adjusted test says so; strict passes it
only when keeping it is shown."""

from __future__ import annotations

import math

import pytest

from bench.gates.decide import BoundTest
from bench.gates.evaluate import agreement_results, drop_results, min_results, win_rate_results


def drop_row(diff: float, lo: float, hi: float, cell_b: str = "m1/p@v1") -> dict:
    return {"cell_a": "m1/p@v1", "cell_b": cell_b, "judge": "grader", "criterion": "composite", "n_matched": 8,
            "diff": diff, "ci_low": lo, "ci_high": hi}


SHOWN, NOT_SHOWN = BoundTest(0.001, 0.004, 8), BoundTest(0.2, 0.6, 8)  # a one-sided test: (p, p_holm, n)


@pytest.mark.parametrize(("diff", "lo", "hi", "test", "strict", "passed", "said"), [
    (-0.5, -0.9, -0.3, SHOWN, False, False, "a drop beyond 0.2 shown"),     # CI and test beyond the tolerance
    (-0.5, -0.9, -0.1, SHOWN, False, True, "not shown"),                     # the CI reaches -0.2: not shown
    (-0.5, -0.9, -0.3, NOT_SHOWN, False, True, "not shown"),                 # Holm's p says noise
    (-0.5, -0.9, 0.1, SHOWN, True, False, "not shown within it"),            # strict: must show it within
    (-0.1, -0.15, -0.05, SHOWN, True, True, "shown within it"),
    (-0.1, -0.3, -0.05, SHOWN, True, False, "not shown within it"),          # its CI reaches below -0.2
    (0.4, 0.1, 0.7, NOT_SHOWN, False, True, "rose 0.4"),                     # better is never a regression
])
def test_a_drop_fails_only_when_shown_beyond_max_drop_and_strict_passes_only_when_shown_within(
        diff, lo, hi, test, strict, passed, said):
    [result] = drop_results([drop_row(diff, lo, hi)], max_drop=0.2, strict=strict,
                            tests={("max_drop", "grader", "m1/p@v1", "m1/p@v1"): test})
    assert (result.passed, result.value, result.ci_low, result.ci_high) == (passed, diff, lo, hi)
    assert said in result.reason and result.subject == "grader · m1/p@v1" and result.n == 8
    assert result.p == test.p and result.decided


def test_a_drop_with_no_test_cannot_decide():
    [result] = drop_results([drop_row(-2.0, -2.0, -2.0)], max_drop=0.2, strict=False, tests={})
    assert not result.passed and not result.decided and result.reason.startswith("cannot decide: needs at least 5")


def test_only_composite_rows_are_gated_and_renamed_cells_read_as_a_pair():
    rows = [drop_row(-0.5, -0.9, -0.3, cell_b="m1/p@v2"), {**drop_row(-3.0, -4.0, -2.0), "criterion": "clarity"}]
    [result] = drop_results(rows, max_drop=0.2, strict=False,
                            tests={("max_drop", "grader", "m1/p@v1", "m1/p@v2"): SHOWN})
    assert result.subject == "grader · m1/p@v1 → m1/p@v2" and not result.passed


@pytest.mark.parametrize(("mean", "lo", "hi", "test", "strict", "passed"), [
    (3.0, 2.7, 3.4, SHOWN, False, True),      # below the floor, its CI reaches it: within noise
    (3.0, 2.6, 3.2, NOT_SHOWN, False, True),  # the whole CI below the floor, but Holm's p says noise
    (3.0, 2.6, 3.2, SHOWN, False, False),     # both: shown below the floor
    (3.0, 2.7, 3.4, SHOWN, True, False),      # strict: its CI reaches below the floor
    (3.6, 3.4, 4.0, NOT_SHOWN, True, False),  # strict: its CI above, but its own test not below alpha
    (3.6, 3.4, 4.0, SHOWN, True, True),
])
def test_every_floor_follows_the_rule_of_a_drop(mean, lo, hi, test, strict, passed):
    """min, win_rate_min and agreement_min alike: before issue 48 item 2, win rates and kappas were decided by their
    interval alone (outside the gate's Holm family) and strict compared the point estimate."""
    board = [{"judge": "grader", "cell": "m1/p@v1", "mean": mean, "ci_low": lo, "ci_high": hi, "n": 8}]
    [result] = min_results(board, 3.3, strict, tests={("min", "grader", "m1/p@v1", "composite"): test})
    [rate] = win_rate_results([{"judge": "arena", "cell_a": "c", "cell_b": "c", "n": 8, "n_scenarios": 8,
                                "win_rate_b": mean / 10, "ci_low": lo / 10, "ci_high": hi / 10}], 0.33, strict,
                              tests={("win_rate_min", "arena", "c", "c"): test})
    [kappa] = agreement_results([{"judge": "grader", "criterion": "composite", "n": 8, "items": 8, "kappa": mean / 10,
                                  "ci_low": lo / 10, "ci_high": hi / 10, "note": None}], 0.33, strict,
                                tests={("agreement_min", "grader"): test})
    assert [r.passed for r in (result, rate, kappa)] == [passed] * 3
    assert [r.p_holm for r in (result, rate, kappa)] == [test.p_holm] * 3
    assert (result.subject, rate.subject, kappa.subject) == ("grader · m1/p@v1", "arena · c",
                                                             "grader · composite vs humans")
    assert all(r.decided and r.bound in (3.3, 0.33) for r in (result, rate, kappa))


def test_a_floor_with_no_test_cannot_decide_naming_its_unit():
    [kappa] = agreement_results([{"judge": "grader", "criterion": "composite", "n": 4, "items": 4, "kappa": 0.1,
                                  "ci_low": -0.5, "ci_high": 0.4, "note": None}], 0.6, False, tests={}, family=9)
    assert not kappa.decided and kappa.reason.startswith("cannot decide: needs at least 8 reviewed answers (has 4)")
    [rate] = win_rate_results([{"judge": "arena", "cell_a": "c", "cell_b": "c", "n": 6, "n_scenarios": 3,
                                "win_rate_b": 0.0, "ci_low": 0.0, "ci_high": 0.0}], 0.5, False, tests={})
    assert not rate.decided and rate.reason.startswith("cannot decide: needs at least 5 scenarios (has 3)")


def test_a_gate_with_nothing_to_check_fails_saying_why():
    for results in (min_results([], 3.0, False, tests={}), drop_results([], 0.2, False, tests={}),
                    win_rate_results([], 0.5, False, tests={}), agreement_results([], 0.5, False, tests={})):
        [result] = results
        assert not result.passed and result.value is None and result.reason
    [unreviewed] = agreement_results([{"judge": "grader", "criterion": "composite", "n": 0, "kappa": None,
                                       "ci_low": None, "ci_high": None, "note": "no human review of its judgments"}],
                                     0.5, False, tests={})
    assert not unreviewed.passed and "no human review" in unreviewed.reason
    [nan] = drop_results([drop_row(math.nan, math.nan, math.nan)], 0.2, False, tests={})
    assert not nan.passed and "no matched item" in nan.reason
