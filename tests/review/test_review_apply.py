"""Applying a review file is idempotent (issue 13, point 9): on a tracked fake-provider sweep, applying
the same file twice adds no Review record and no MLflow human assessment and says so; a changed entry is
a new review that supersedes; `log_reviews` never logs a Review id twice, even without its state file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench.analysis import load_run
from bench.core.records import Review
from bench.review import ReviewSession, same_review
from bench.core.store import RunStore
from bench.tracking.reviews import log_reviews
from bench.testing.in_process import command
from tests.review.test_review import CANARY, fill, mlflow_for, tracked_run  # noqa: F401 (the module-scoped fixture)


def apply(run_dir: Path, path: Path) -> str:
    out = command(path.parent, "review", "apply", str(run_dir), str(path), OPENAI_API_KEY=CANARY)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def human_assessments(run_dir: Path) -> Counter:
    """Return how many human assessments each Review id has in the run's MLflow store."""
    mlflow = mlflow_for(run_dir)
    exp = mlflow.get_experiment_by_name("bench/rv")
    return Counter(a.metadata["review_id"] for t in mlflow.search_traces(locations=[exp.experiment_id],
                                                                          return_type="list")
                   for a in t.info.assessments if a.source.source_type == "HUMAN")


def values_logged(r: Review) -> int:
    """How many assessments one review is: each criterion and the composite, or the verdict."""
    return 1 if r.verdict is not None else len(r.scores or {}) + (r.score is not None)


def test_applying_the_same_review_file_twice_changes_nothing(tracked_run, tmp_path):  # noqa: F811
    path = tmp_path / "review.json"
    ReviewSession(tracked_run, reviewer="ann").export(path)
    path.write_text(json.dumps(fill(json.loads(path.read_text()))))
    assert "applied 12 review(s)" in apply(tracked_run, path)
    reviews = RunStore(tracked_run).read(Review)
    logged = human_assessments(tracked_run)
    assert len(reviews) == 12 and logged == {r.id: values_logged(r) for r in reviews}
    again = apply(tracked_run, path)
    assert f"0 new reviews: every entry of {path} is already applied" in again, again
    assert [r.id for r in RunStore(tracked_run).read(Review)] == [r.id for r in reviews]
    assert human_assessments(tracked_run) == logged
    state = json.loads((tracked_run / ".mlflow-state.json").read_text())
    assert set(state["reviewed"]) == {r.id for r in reviews}


def test_a_changed_entry_is_a_new_review_that_supersedes(tracked_run, tmp_path):  # noqa: F811
    path = tmp_path / "review.json"
    ReviewSession(tracked_run, reviewer="ann").export(path)
    doc = fill(json.loads(path.read_text()))  # the same as the file applied above …
    graded = next(e for e in doc["entries"] if e["mode"] != "pairwise")
    graded["review"]["note"] = "second thoughts"  # … but for one note
    for e in doc["entries"]:
        if e["mode"] != "pairwise":
            e["review"]["scores"] = {k: float(v) for k, v in e["review"]["scores"].items()}  # 4.0 is 4
    path.write_text(json.dumps(doc))
    before = RunStore(tracked_run).read(Review)
    logged = human_assessments(tracked_run)
    out = apply(tracked_run, path)
    assert f"applied 1 review(s) from {path} (blind); 11 entries already applied" in out, out
    new = [r for r in RunStore(tracked_run).read(Review) if r.id not in {b.id for b in before}]
    assert len(new) == 1 and new[0].judgment_id == graded["judgment_id"] and new[0].note == "second thoughts"
    assert human_assessments(tracked_run) == logged + Counter({new[0].id: values_logged(new[0])})
    t = load_run(tracked_run)
    assert t.reviews.filter(t.reviews["judgment"] == graded["judgment_id"])["created_at"].unique().to_list() == \
        [new[0].created_at]  # the latest review is the one the analysis uses
    doc["reviewer"] = "bob"  # the same content from another reviewer is that reviewer's own review
    path.write_text(json.dumps(doc))
    assert "applied 12 review(s)" in apply(tracked_run, path)


def test_log_reviews_never_logs_a_review_id_twice(tracked_run):  # noqa: F811
    reviews = RunStore(tracked_run).read(Review)
    logged = human_assessments(tracked_run)
    assert set(logged) == {r.id for r in reviews}
    assert log_reviews(tracked_run, reviews) == 0
    state_file = tracked_run / ".mlflow-state.json"
    state = json.loads(state_file.read_text())
    del state["reviewed"]  # forgotten (an older state file, or one lost): the traces still know
    state_file.write_text(json.dumps(state))
    assert log_reviews(tracked_run, reviews + reviews) == 0
    assert human_assessments(tracked_run) == logged


def test_same_review_compares_scores_as_numbers_and_ignores_the_time():
    a = Review(judgment_id="j", reviewer="ann", scores={"x": 4}, note="ok", created_at="2026-01-01T00:00:00")
    assert same_review(a, a.model_copy(update={"scores": {"x": 4.0}, "created_at": "2026-02-01T00:00:00"}))
    for change in ({"scores": {"x": 3}}, {"note": "ok!"}, {"reviewer": "bob"}, {"judgment_id": "k"},
                   {"scores": None, "verdict": "A>B"}):
        assert not same_review(a, a.model_copy(update=change)), change
