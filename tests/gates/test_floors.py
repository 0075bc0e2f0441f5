"""Floors per judge and criterion (issue 48, item 5): ``--min JUDGE=V``, ``JUDGE.CRITERION=V``, ``gates: {min:
{JUDGE: V}}``, and a bare ``--min V`` refused over judges on different scales (it failed every 0–1 cell)."""

from __future__ import annotations

import pytest

from bench.core.errors import BenchError
from bench.gates import evaluate_gates, gate_command
from bench.gates.floors import parse_min
from bench.gates.spec import Gates, merge
from bench.testing.graded_runs import RUBRIC, write_run

CELLS = ["m1/p@v1", "m2/p@v1"]
CHECKLIST = RUBRIC.replace("id: tip", "id: checks").replace("scale: [1, 5]", "scale: [0, 1]").replace(
    "anchors: {1: useless, 2: weak, 3: fair, 4: good, 5: excellent}", "anchors: {0: 'no', 1: 'yes'}")


def two_judges(tmp):
    """A 1–5 judge ``grader`` (m1 at 4, m2 at 2) and a 0–1 judge ``checks`` (0.9 everywhere), 12 scenarios."""
    run = write_run(tmp / "run", {CELLS[0]: [4.0] * 12, CELLS[1]: [2.0] * 12})
    write_run(tmp / "checks", {c: [0.9] * 12 for c in CELLS}, judge_id="checks", rubric_hash="c",
              rubric_id="checks")
    (run / "rubrics" / "c").mkdir()
    (run / "rubrics" / "c" / "checks.md").write_text(CHECKLIST)
    (run / "judgments.checks.jsonl").write_bytes((tmp / "checks" / "judgments.jsonl").read_bytes())
    return run


def test_min_options_parse():
    assert parse_min(["3.5"]) == 3.5 and parse_min(None) is None
    assert parse_min(["grader=3", "checks.quality=0.7"]) == {"grader": 3.0, "checks.quality": 0.7}
    for bad in (["3", "grader=2"], ["x=y"], ["=3"]):
        with pytest.raises(BenchError, match="--min"):
            parse_min(bad)
    assert merge(None, min={"grader": 3.0}).min == {"grader": 3.0}
    with pytest.raises(ValueError, match="must be a finite number"):
        merge(None, min={"grader": float("inf")})


def test_a_bare_floor_over_two_scales_is_refused_and_per_judge_floors_work(tmp_path):
    run = two_judges(tmp_path)
    with pytest.raises(BenchError, match=r"different scales \(checks 0–1, grader 1–5\).*--min JUDGE=VALUE"):
        evaluate_gates(run, Gates(min=3), resamples=200)
    report = evaluate_gates(run, Gates(min={"grader": 3, "checks": 0.5}), resamples=200)
    verdicts = {(r.subject, r.bound): r.passed for r in report.results}
    assert verdicts == {("grader · m1/p@v1", 3): True, ("grader · m2/p@v1", 3): False,
                        ("checks · m1/p@v1", 0.5): True, ("checks · m2/p@v1", 0.5): True}
    criterion = evaluate_gates(run, Gates(min={"checks.quality": 0.95}), resamples=200)
    assert {r.subject for r in criterion.failed} == {"checks.quality · m1/p@v1", "checks.quality · m2/p@v1"}
    with pytest.raises(BenchError, match="no scoring judge 'judge'"):
        evaluate_gates(run, Gates(min={"judge": 3}), resamples=200)


def test_the_command_takes_repeated_min_options(tmp_path, capsys):
    run = two_judges(tmp_path)
    assert gate_command(str(run), floor=["grader=3", "checks=0.5"]) == 5
    assert "grader · m2/p@v1" in capsys.readouterr().out
