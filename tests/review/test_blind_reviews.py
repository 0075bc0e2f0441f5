"""Blind reviews, one review per answer and rubric version, one count of "reviewed" (issue 27, point 3), a
review file whose entries disagree (issue 28, point 7) and damaged review records (issue 28, point 5).

One fake-provider sweep: two models × four topics, two judges of one rubric (tip-v1), ``ja`` grading each
answer twice (``repeats: 2``): 8 answers, 24 judgments. Each test works on its own copy of the run folder."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from bench.analysis import load_run, summarize
from bench.core.records import Judgment, Review
from bench.core.store import RunStore
from bench.review import ReviewPanel, ReviewSession
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import command, run_stages

CRITERIA = ("relevance", "actionability", "tone")  # tip-v1, each 1–5


@pytest.fixture(scope="module")
def jury_run(tmp_path_factory, fake_server) -> Path:
    fake_server.reset()
    tmp = tmp_path_factory.mktemp("jury")
    url = fake_server.url
    params = grid(tmp / "jury.yaml", url, name="jury", topics=4,
                  models=[model("m1", url), model("m2", url, name="fake-b")],
                  judges=[judge("ja", url, name="ja", repeats=2), judge("jb", url, name="jb")])
    out = run_stages(tmp, params)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return tmp / "runs" / "jury"


@pytest.fixture
def run(jury_run, tmp_path) -> Path:
    """A copy of the sweep's run folder, for one test to review."""
    return Path(shutil.copytree(jury_run, tmp_path / "runs" / "jury"))


def judgments(run_dir: Path) -> list[Judgment]:
    return list(RunStore(run_dir).latest(Judgment).values())


def export(tmp_path: Path, run_dir: Path, name: str, *flags: str) -> tuple[Path, dict]:
    path = tmp_path / name
    out = command(tmp_path, "review", "export", str(run_dir), str(path), *flags)
    assert out.returncode == 0, out.stderr
    return path, json.loads(path.read_text())


def apply(tmp_path: Path, run_dir: Path, path: Path, doc: dict):
    path.write_text(json.dumps(doc))
    return command(tmp_path, "review", "apply", str(run_dir), str(path))


def fill(entry: dict, value: int, note: str = "") -> None:
    entry["review"] = {"scores": {c: value for c in CRITERIA}, "note": note}


def test_the_export_is_blind_and_lists_each_answer_once_per_rubric_version(run, tmp_path):
    graded = judgments(run)
    answers = {tuple(j.candidate_ids) for j in graded}
    assert len(answers) == 8 and len(graded) == 24  # ja twice and jb once per answer
    path, doc = export(tmp_path, run, "review.json")
    assert len(doc["entries"]) == len(answers), "one entry per answer and rubric version, not per judgment"
    assert {tuple(e["answer"]) for e in doc["entries"]} == answers and doc["blind"] is True
    text = path.read_text()
    assert not [j.rationale for j in graded if j.rationale in text], "a judge's rationale in a blind file"
    assert not [k for e in doc["entries"] for k in e if k.startswith("judge")], "a judge's grade in a blind file"
    shown, doc = export(tmp_path, run, "shown.json", "--show-judges")
    assert doc["blind"] is False and [len(e["judges"]) for e in doc["entries"]] == [3] * 8
    assert all(j.rationale in shown.read_text() for j in graded)


def test_blind_reviews_alone_calibrate_and_every_place_gives_one_count(run, tmp_path):
    path, doc = export(tmp_path, run, "review.json")
    doc["reviewer"] = "ann"
    for n, e in enumerate(doc["entries"][:6]):
        fill(e, 2 + n % 3)
    first_answer = doc["entries"][0]["answer"][0]
    out = apply(tmp_path, run, path, doc)
    assert out.returncode == 0, out.stderr
    assert "applied 6 review(s)" in out.stdout and "(blind)" in out.stdout
    path, doc = export(tmp_path, run, "shown.json", "--show-judges")
    doc["reviewer"] = "bob"
    for e in doc["entries"][6:]:
        fill(e, 5)
    out = apply(tmp_path, run, path, doc)
    assert out.returncode == 0, out.stderr
    line = "8 of 8 answers reviewed (answer × rubric version); 6 blind"
    assert "(not blind)" in out.stdout and line in out.stdout, out.stdout
    stored = RunStore(run).read(Review)
    assert sorted((r.reviewer, r.blind) for r in stored) == [("ann", True)] * 6 + [("bob", False)] * 2
    panel = ReviewPanel(run, reviewer="cy", filter="all")
    assert "<b>8 of 8 answers reviewed</b> (6 blind)" in panel.progress.value
    assert load_run(run).reviewed.line().startswith(line)
    calibrated = summarize(run, resamples=50).calibrated
    per_judge = {j: int(calibrated.filter(calibrated["judge"] == j)["n_human"].sum()) for j in ("ja", "jb")}
    assert per_judge == {"ja": 6, "jb": 6}, "a review covers both judges and ja's repeats; only blind ones count"
    overridden = summarize(run, resamples=50, human_overrides=True).tables.scores
    answer = overridden.filter((overridden["candidate"] == first_answer) & (overridden["criterion"] == "composite"))
    assert answer.height == 3 and answer["value"].to_list() == [2.0] * 3, "the review overrides ja twice and jb"
    report = command(tmp_path, "report", str(run), "--resamples", "50")
    assert report.returncode == 0, report.stderr
    assert line in (tmp_path / "reports" / "jury" / "index.html").read_text()


def panel_text(panel: ReviewPanel) -> str:
    """Return every HTML the panel shows (each HTML widget inside its box)."""
    todo, found = [panel.box], []
    while todo:
        w = todo.pop()
        todo.extend(getattr(w, "children", ()))
        if type(w).__name__ == "HTML":
            found.append(w.value)
    return "".join(found)


def test_the_panel_hides_the_judges_until_saved_and_records_a_deliberate_look(run):
    panel = ReviewPanel(run, reviewer="dee", filter="all")
    first = panel.item
    rationales = {j.rationale for j in first.judgments}
    assert not [r for r in rationales if r in panel_text(panel)], "a judge's rationale shown before the save"
    assert [c.value for c in panel.controls.children] == [None] * 3, "a judge's grade pre-selected"
    for c in panel.controls.children:
        c.value = 3
    panel.save()
    saved = RunStore(run).read(Review)
    assert [(r.reviewer, r.blind, r.scores) for r in saved] == [("dee", True, {c: 3.0 for c in CRITERIA})]
    assert all(r in panel_text(panel) for r in rationales), "the judges are shown once the review is saved"
    panel.move(1)
    second = panel.item
    assert second.unit != first.unit and not [j for j in second.judgments if j.rationale in panel_text(panel)]
    panel.show_judges.value = True  # a deliberate look before deciding
    assert all(j.rationale in panel_text(panel) for j in second.judgments)
    for c in panel.controls.children:
        c.value = 4
    panel.save()
    last = max(RunStore(run).read(Review), key=lambda r: r.created_at)
    assert (last.blind, tuple(last.candidate_ids)) == (False, second.key)
    assert "not blind" in panel.status.value


def test_two_entries_that_disagree_about_one_answer_are_refused_naming_both(run, tmp_path):
    path, doc = export(tmp_path, run, "review.json")
    doc["reviewer"] = "ann"
    first = doc["entries"][0]
    answer = next(j for j in judgments(run) if j.id == first["judgment_id"]).candidate_ids
    other = next(j for j in judgments(run) if j.candidate_ids == answer and j.id != first["judgment_id"])
    fill(first, 4, "fine")
    second = {**first, "judgment_id": other.id, "review": {"scores": {c: 2 for c in CRITERIA}, "note": "weak"}}
    doc["entries"] = [first, *doc["entries"][1:], second]  # e.g. two files merged, or another judge's line
    out = apply(tmp_path, run, path, doc)
    last = len(doc["entries"]) - 1
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"entries[0] (judgment {first['judgment_id']}) and entries[{last}] (judgment {other.id})" in out.stderr
    assert "disagree" in out.stderr and "nothing applied" in out.stderr
    assert RunStore(run).read(Review) == []
    second["review"] = dict(first["review"])  # the same review twice: applied once
    out = apply(tmp_path, run, path, doc)
    assert out.returncode == 0, out.stderr
    assert "applied 1 review(s)" in out.stdout and len(RunStore(run).read(Review)) == 1


def by_hand(run_dir: Path, j: Judgment, rid: str, value: float, **extra) -> None:
    """Append a review line as an editor or a merge would write it, bypassing every check."""
    line = {"schema_version": 2, "id": rid, "judgment_id": j.id, "candidate_ids": j.candidate_ids,
            "reviewer": "merge", "rubric_id": j.rubric_id, "rubric_version": j.rubric_version,
            "scores": {"relevance": value, "actionability": 3.0, "tone": 3.0}, "score": value, "verdict": None,
            "note": "", "created_at": "2026-11-25T00:00:00+00:00", **extra}
    with open(run_dir / "reviews.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")  # json writes NaN and Infinity as the bare words


def test_damaged_review_records_are_set_aside_by_name_and_the_report_renders(run, tmp_path):
    graded = sorted(judgments(run), key=lambda j: j.id)
    bad = {"r-by-hand-nan": math.nan, "r-by-hand-inf": math.inf, "r-by-hand-big": 1e6}
    for j, (rid, value) in zip(graded, bad.items()):
        by_hand(run, j, rid, value)
    out = command(tmp_path, "report", str(run), "--resamples", "50")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    html = (tmp_path / "reports" / "jury" / "index.html").read_text()
    for j, (rid, shown) in zip(graded, {"r-by-hand-nan": "relevance = nan", "r-by-hand-inf": "relevance = inf",
                                        "r-by-hand-big": "relevance = 1000000.0 (scale 1–5)"}.items()):
        assert f"review {rid} of judgment {j.id}" in out.stderr and shown in out.stderr, out.stderr
        assert rid in html
    assert "3 review record(s) set aside" in html


def test_an_out_of_scale_score_never_reaches_the_calibrated_estimate(run):
    session = ReviewSession(run, reviewer="ann")
    for n, it in enumerate(session.items[:6]):
        session.save(it.reviewable()[0].id, scores={c: 1 + n % 3 for c in CRITERIA}, blind=True)
    by_hand(run, session.items[6].reviewable()[0], "r-merged-big", 1e6, blind=True)
    t = load_run(run)
    assert list(t.reviewed.damaged) == ["r-merged-big"]
    calibrated = summarize(run, resamples=50).calibrated.drop_nulls("estimate")
    assert calibrated.height and calibrated["estimate"].is_between(1, 5).all(), calibrated
    assert ReviewSession(run).progress() == (6, 8), "the damaged review reviews nothing"


def test_a_review_from_before_the_blind_flag_loads_as_not_blind():
    old = {"schema_version": 2, "id": "r0", "judgment_id": "j", "reviewer": "ann", "scores": {"tone": 4.0},
           "created_at": "2026-01-01T00:00:00"}
    assert Review.model_validate(old).blind is False  # the panel and the export showed the judges then
