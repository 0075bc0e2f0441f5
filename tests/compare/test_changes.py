"""What changed besides the answers (issue 48, item 6): a rubric's content under one id is read from every
judgment's rubric_hash, with or without the rubric snapshots, and refused unless allowed; a cell's changed model
or endpoint is warned about. Before, a 1–5 and a 0–10 scale were compared in silence ("better, +2.07")."""

from __future__ import annotations

import json
import shutil

import pytest

from bench.compare import compare_runs
from bench.core.errors import BenchError
from bench.gates import evaluate_gates
from bench.gates.spec import Gates
from bench.testing.graded_runs import write_run

CELL = "m1/p@v1"


def runs(tmp):
    """Run A graded 1–5 (rubric hash h), run B the same answers graded 0–10 (hash ten), no rubric snapshots."""
    a = write_run(tmp / "a", {CELL: [3.0, 4.0, 3.0, 4.0, 3.0, 4.0, 3.0, 4.0]})
    b = write_run(tmp / "b", {CELL: [6.0, 8.0, 6.0, 8.0, 6.0, 8.0, 6.0, 8.0]}, rubric_hash="ten")
    for run in (a, b):
        shutil.rmtree(run / "rubrics")
    return a, b


def test_a_rubric_changed_under_one_id_is_refused_unless_allowed(tmp_path):
    a, b = runs(tmp_path)
    with pytest.raises(BenchError, match=r"judge grader: rubric tip has different content in the two runs \(hash h "
                                         r"in run A, ten in run B\).*--allow-rubric-change"):
        compare_runs(a, b, n_boot=100)
    cmp = compare_runs(a, b, n_boot=100, allow_rubric_change=True)
    assert cmp.warnings[0].startswith("judge grader: rubric tip has different content")
    assert cmp.settings["allow_rubric_change"] is True


def test_a_gate_across_a_rubric_change_cannot_decide_unless_allowed(tmp_path):
    a, b = runs(tmp_path)
    report = evaluate_gates(b, Gates(max_drop=0.25, baseline="a"), a, resamples=100)
    assert report.exit_code == 6 and "rubric tip has different content" in report.ungateable[0]
    allowed = evaluate_gates(b, Gates(max_drop=0.25, baseline="a", allow_rubric_change=True), a, resamples=100)
    assert not allowed.ungateable


def test_a_cell_answered_by_another_model_is_warned_about(tmp_path):
    a = write_run(tmp_path / "a", {CELL: [4.0] * 6})
    b = write_run(tmp_path / "b", {CELL: [4.0] * 6})
    path = b / "candidates.jsonl"
    path.write_text("".join(json.dumps({**json.loads(line), "model": "openai/m1-mini",
                                        "endpoint": "http://10.0.0.2/v1"}) + "\n"
                            for line in path.read_text().splitlines()))
    cmp = compare_runs(a, b, n_boot=100)
    assert ("cell m1/p@v1: answered by openai/m1 in run A, openai/m1-mini at http://10.0.0.2/v1 in run B: a changed "
            "model or endpoint") in cmp.warnings[0]
