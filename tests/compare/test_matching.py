"""Matching two run folders (records written with RunStore): cells by name or mapping, a judge's repeats averaged,
human overrides applied on request, and every difference in how the runs were graded said first."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.analysis import compare_runs
from bench.compare.matching import cell_pairs
from bench.core.errors import BenchError
from bench.core.records import Review
from bench.core.store import RunStore
from bench.testing.grids import rubric
from bench.testing.records import candidate, judgment, scenario


def _run(root: Path, grades: dict[str, list[float]], *, prompt: str = "v1", judge_model: str = "openai/j",
         rubric_version: str = "1", topics: range = range(3)) -> list:
    """Write a run: model m, prompt p@``prompt``, a scenario per topic, judge j's grades of each answer (repeats)."""
    records, judgments = [], []
    for i in topics:
        s = scenario({"topic": f"t{i}"})
        c = candidate(s, prompt_version=prompt, output=f"answer {i} {prompt}")
        js = [judgment(c, score=v, scores={"quality": v}, judge_model=judge_model, rubric_version=rubric_version,
                       repeat=r, rationale=f"because {v}") for r, v in enumerate(grades.get(f"t{i}", [3.0]))]
        records += [s, c, *js]
        judgments += js
    RunStore(root).append(records)
    return judgments


def test_cells_pair_by_name_or_mapping_and_a_mapping_to_nothing_is_refused():
    pairs, notes = cell_pairs({"m/p@v1", "m/q@v1", "n/p@v1"}, {"m/p@v1", "m/q@v2", "z/p@v1"}, {"m/q@v1": "m/q@v2"})
    assert pairs == [("m/p@v1", "m/p@v1"), ("m/q@v1", "m/q@v2")]
    assert notes == ["cell(s) only in run A (A), not compared (--map A_CELL=B_CELL pairs cells whose names differ): "
                     "n/p@v1", "cell(s) only in run B (B), not compared: z/p@v1"]
    with pytest.raises(BenchError, match=r"--map names cell\(s\) 'm/q@v3' that run B \(B\) does not have; its "
                                         r"cells: m/p@v1, m/q@v2, z/p@v1"):
        cell_pairs({"m/q@v1"}, {"m/p@v1", "m/q@v2", "z/p@v1"}, {"m/q@v1": "m/q@v3"})


def test_repeats_are_averaged_per_item_and_a_prompt_bump_is_mapped(tmp_path):
    _run(tmp_path / "a", {"t0": [2.0, 4.0], "t1": [3.0, 3.0], "t2": [1.0, 1.0]})
    _run(tmp_path / "b", {"t0": [5.0], "t1": [3.0], "t2": [2.0]}, prompt="v2")
    unmapped = compare_runs(tmp_path / "a", tmp_path / "b")
    assert unmapped.rows.is_empty() and len(unmapped.only_in_a) == 3 and len(unmapped.only_in_b) == 3
    assert any("only in run A (a)" in w and "m/p@v1" in w for w in unmapped.warnings)
    cmp = compare_runs(tmp_path / "a", tmp_path / "b", mapping={"m/p@v1": "m/p@v2"}, n_boot=100)
    row = cmp.rows.filter(cmp.rows["criterion"] == "composite").row(0, named=True)
    assert (row["mean_a"], row["mean_b"], row["diff"]) == (pytest.approx(7 / 3), pytest.approx(10 / 3), pytest.approx(1))
    assert (row["n_matched"], row["n_changed"], row["test"]) == (3, 2, "permutation")
    assert cmp.only_in_a == [] and cmp.only_in_b == [] and row["min_p"] == pytest.approx(2 / 8)
    assert cmp.warnings == ["2 row(s) have at most 3 scenario(s): no p-value can reach alpha 0.05 there (the smallest "
                            "possible is min_p = 2/2^n), so they can never be significant, whatever the difference: "
                            "j · m/p@v2"], "3 scenarios: said, and nothing else"
    assert cmp.to_json()["settings"]["mapping"] == {"m/p@v1": "m/p@v2"}


def test_a_different_judge_model_or_rubric_version_is_said_first(tmp_path):
    _run(tmp_path / "a", {}, topics=range(2))
    _run(tmp_path / "b", {}, judge_model="openai/k", rubric_version="2", topics=range(1, 3))
    cmp = compare_runs(tmp_path / "a", tmp_path / "b", n_boot=50)
    assert cmp.warnings[:2] == [
        "judge j: model openai/j in run A, openai/k in run B: its scores measure different things",
        "judge j: rubric tip@1 in run A, tip@2 in run B: its scores measure different things"]
    assert cmp.warnings[2].startswith("1 answer(s) only in run A (a) and 1 only in run B (b)")


def test_a_rubric_edited_without_a_version_bump_is_said(tmp_path):
    for run, text in (("a", "GRADE-IT"), ("b", "GRADE-IT-STRICTLY")):
        _run(tmp_path / run, {})
        snapshot = tmp_path / run / "rubrics" / f"hash{run}" / "tip.md"
        snapshot.parent.mkdir(parents=True)
        rubric(snapshot, marker=text)  # rubric tip, version "1", its instructions differing
    cmp = compare_runs(tmp_path / "a", tmp_path / "b", n_boot=50)
    assert cmp.warnings[0] == ("judge j: rubric tip@1 has the same version but different text in the two runs "
                               "(edited without a version bump): its scores measure different things")
    assert len(cmp.warnings) == 2 and "can never be significant" in cmp.warnings[1]  # 3 scenarios


def test_human_overrides_replace_the_judges_grade_when_asked(tmp_path):
    _run(tmp_path / "a", {"t0": [2.0]})
    (graded, *_rest) = _run(tmp_path / "b", {"t0": [2.0]})
    RunStore(tmp_path / "b").append([Review(judgment_id=graded.id, candidate_ids=graded.candidate_ids, reviewer="ann",
                                            rubric_id="tip", rubric_version="1", scores={"quality": 5.0}, score=5.0)])
    plain = compare_runs(tmp_path / "a", tmp_path / "b", n_boot=50)
    assert plain.rows["diff"].to_list() == [0.0, 0.0]
    reviewed = compare_runs(tmp_path / "a", tmp_path / "b", n_boot=50, human_overrides=True)
    assert reviewed.rows["diff"].to_list() == [pytest.approx(1.0)] * 2 and reviewed.settings["human_overrides"]
