"""ReviewSession filters and validation on records written through the store (no model, no MLflow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.errors import BenchError
from bench.core.records import Candidate, Judgment
from bench.review.session import ReviewSession
from bench.config.rubrics import Rubric, load_rubric, snapshot_rubric
from bench.core.store import RunStore
from bench.testing.grids import ROOT
from bench.testing.records import candidate, judgment, scenario



def answers(run_dir: Path, n: int):
    """The tip-v1 rubric snapshotted in ``run_dir``, and ``n`` scenarios with one candidate each."""
    rubric = load_rubric("tip-v1", ROOT)
    snapshot_rubric(rubric, run_dir)
    scen = [scenario({"q": i}) for i in range(n)]
    return rubric, scen, [candidate(s) for s in scen]


def grade(rubric: Rubric, judge: str, cand: Candidate, value: int | None) -> Judgment:
    """Return ``judge``'s grade ``value`` of ``cand`` on every criterion of ``rubric``, or a parse failure (None)."""
    spec = {"judge_id": judge, "rubric_id": rubric.id, "rubric_version": rubric.version, "rubric_hash": rubric.hash}
    if value is None:
        return judgment(cand, **spec, error="no JSON object in the reply", error_kind="parse")
    scores = {c.id: value for c in rubric.criteria}
    return judgment(cand, **spec, scores=scores, score=rubric.composite(scores))


@pytest.fixture
def run(tmp_path):
    run_dir = tmp_path / "r"
    rubric, scen, cands = answers(run_dir, 3)
    RunStore(run_dir).append([*scen, *cands,
                              grade(rubric, "a", cands[0], 3), grade(rubric, "b", cands[0], 3),  # agree, mid-scale
                              grade(rubric, "a", cands[1], 1), grade(rubric, "b", cands[1], 5),  # disagree, extremes
                              grade(rubric, "a", cands[2], 2), grade(rubric, "b", cands[2], None)])  # a parse failure
    return run_dir, cands


def test_filters_order_and_select_the_items_a_reviewer_needs(run):
    run_dir, cands = run
    session = ReviewSession(run_dir, reviewer="dee")
    first = session.select("disagreement")[0]
    assert first.key == (cands[1].id,) and first.spread(session.rubrics) == 1.0
    assert [it.key for it in session.select("failures")] == [(cands[2].id,)]
    assert [it.key for it in session.select("extreme")] == [(cands[1].id,)]
    assert len(session.select("unreviewed")) == 3 and session.progress() == (0, 3)
    failed = next(j for j in session.select("failures")[0].judgments if not j.ok)
    session.save(failed.id, scores={"relevance": 2, "actionability": 2, "tone": 2}, note="graded by hand")
    assert len(session.select("unreviewed")) == 2 and session.progress() == (1, 3)
    with pytest.raises(BenchError, match="unknown review filter"):
        session.select("newest")


def test_a_missing_run_folder_and_a_verdict_on_a_graded_item_are_refused(run, tmp_path):
    run_dir, _ = run
    with pytest.raises(BenchError, match="no such run folder"):
        ReviewSession(tmp_path / "nope")
    session = ReviewSession(run_dir, reviewer="dee")
    j = session.select("all")[0].reviewable()[0]
    with pytest.raises(BenchError, match="missing a score for relevance"):
        session.save(j.id, verdict="A>B")


def test_the_random_filter_proposes_unreviewed_items_in_a_uniform_seeded_order(tmp_path):
    run_dir = tmp_path / "many"
    rubric, scen, cands = answers(run_dir, 12)
    scores = {c.id: 3 for c in rubric.criteria}
    RunStore(run_dir).append([*scen, *cands, *(grade(rubric, "a", c, 3) for c in cands)])
    session = ReviewSession(run_dir, reviewer="dee")
    order = [it.key for it in session.select("random")]
    assert sorted(order) == sorted(it.key for it in session.select("all")), "every unreviewed item, once"
    assert order != [it.key for it in session.select("all")], "not the listing order (scenario, then candidate)"
    assert order == [it.key for it in ReviewSession(run_dir, reviewer="eve").select("random")], "seeded"
    first = session.select("random")[0]
    session.save(first.judgments[0].id, scores=scores)
    assert [it.key for it in session.select("random")] == order[1:], "a reviewed item leaves; the order holds"
    # the panel proposes this random sample unless asked otherwise: PPI is valid only for random reviews
    from bench.review.panel import ReviewPanel  # noqa: PLC0415 (ipywidgets: only this test needs it)

    panel = ReviewPanel(run_dir, reviewer="dee")
    assert panel.filter.value == "random" and [it.key for it in panel.items] == order[1:]
    assert [it.key for it in session.select()] == order[1:]
