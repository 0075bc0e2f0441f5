"""Runs that cannot be gated exit 6 with the reason (issue 48, item 4): a run still being written, damaged
judgment lines, grades that are not numbers on their scale. They all passed before (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.analysis import compare_runs
from bench.core.runlock import run_lock
from bench.core.sweeps import record_start
from bench.gates import evaluate_gates, gate_table, junit_xml
from bench.gates.spec import Gates
from bench.testing.graded_runs import write_run

CELL = "m1/p@v1"
GRADES = [4.0, 3.0, 5.0, 4.0, 4.0, 3.0, 5.0, 4.0]


def pair(tmp: Path) -> tuple[Path, Path]:
    return write_run(tmp / "base", {CELL: GRADES}), write_run(tmp / "run", {CELL: GRADES})


def gate(run: Path, base: Path):
    return evaluate_gates(run, Gates(max_drop=0.25, baseline="base"), base, resamples=200)


def edit_lines(folder: Path, edits: dict[int, object]) -> None:
    """Replace judgment lines (0-based) by a string, or set fields of the record (a dict)."""
    path = folder / "judgments.jsonl"
    lines = path.read_text().splitlines()
    for i, edit in edits.items():
        lines[i] = edit if isinstance(edit, str) else json.dumps({**json.loads(lines[i]), **edit})
    path.write_text("\n".join(lines) + "\n")


def test_a_run_being_written_cannot_be_gated(tmp_path):
    base, run = pair(tmp_path)
    assert gate(run, base).exit_code == 0, "the premise: the same grades pass"
    with run_lock(run):
        report = gate(run, base)
    assert report.exit_code == 6 and "is still being written" in report.ungateable[0], report.ungateable
    record_start(run, command="bench sweep g.yaml", budget_usd=None, stages=["collect", "judge"])
    report = gate(run, base)
    assert report.exit_code == 6 and "its last sweep" in report.ungateable[0] and "never ended" in report.line()
    assert "can be gated" in junit_xml(report) and 'errors="1"' in junit_xml(report)


def test_garbage_and_nan_judgment_lines_cannot_be_gated(tmp_path):
    """3 of the run's first 4 judgment lines damaged: two of garbage, one with a NaN literal."""
    base, run = pair(tmp_path)
    edit_lines(run, {0: "garbage{", 1: '{"judge_id": "grader", "sco', 2: {"score": float("nan")}})
    report = gate(run, base)
    assert report.exit_code == 6, gate_table(report)
    assert report.ungateable[0].startswith("run: 2 judgment line(s) unreadable (judgments.jsonl:1, judgments.jsonl:2)")
    assert "composite = nan" in report.ungateable[1]
    assert "the run cannot be gated (exit 6)" in gate_table(report).splitlines()[-1]


@pytest.mark.parametrize("value", [float("inf"), 1e308, 99.0])
def test_a_grade_off_its_scale_cannot_be_gated(tmp_path, value):
    base, run = pair(tmp_path)
    edit_lines(run, {3: {"score": value, "scores": {"quality": value}}})
    report = gate(run, base)
    assert report.exit_code == 6 and "not a number on its rubric's scale" in report.ungateable[0]
    assert "(scale 1–5)" in report.ungateable[0]
    edit_lines(base, {3: {"score": value}})
    assert any(r.startswith("baseline: ") for r in gate(run, base).ungateable), "the baseline is checked too"


def test_a_nan_grade_is_unscored_with_a_warning_in_a_comparison(tmp_path):
    base, run = pair(tmp_path)
    edit_lines(run, {0: {"score": float("nan")}})
    with pytest.warns(UserWarning, match=r"1 judgment\(s\) set aside: a grade outside its rubric's scale"):
        cmp = compare_runs(base, run, n_boot=100)  # the run reader sets it aside, naming it (bench.analysis.off_scale)
    row = cmp.rows.filter(cmp.rows["criterion"] == "composite").row(0, named=True)
    assert row["n_matched"] == len(GRADES) - 1 and row["n_unscored"] == 1


def test_coverage_counts_usable_grades_not_answers(tmp_path):
    """The run has every answer, but 5 of its 8 were never judged (its judge stage stopped) and one more is NaN:
    the coverage check fails naming them (it counted answers and passed)."""
    base, run = pair(tmp_path)
    path = run / "judgments.jsonl"
    path.write_text("\n".join(path.read_text().splitlines()[:3]) + "\n")
    report = evaluate_gates(run, Gates(max_drop=0.25, baseline="base", allow_missing=False), base, resamples=200)
    [coverage] = [r for r in report.results if r.gate == "coverage"]
    assert not coverage.passed and coverage.reason.startswith("5 of 8 grade(s) of the baseline missing from this "
                                                              "run: grader · m1/p@v1 ")
    assert report.exit_code in (5, 6) and coverage.value == pytest.approx(3 / 8)
