"""Record ids are content hashes: the same work gets the same id, different work never collides."""

import pytest
from pydantic import ValidationError

from bench.core.records import SCHEMA_VERSION, Judgment, Review, Scenario
from bench.testing.records import candidate


ANSWER = {"model": "openai/x", "params": {"temperature": 0.2}}  # the model string fixed: a label alone is no identity


def test_candidate_id_depends_on_what_determines_the_answer():
    a = candidate("s1", **ANSWER, output="one")
    assert a.id == candidate("s1", **ANSWER, output="another answer", model_id="label-only").id  # not identity
    for change in ({"model": "openai/y"}, {"params": {"temperature": 0.7}}, {"prompt_version": "v2"},
                   {"prompt_hash": "h2"}, {"scenario_id": "s2"}, {"sample": 1}):
        assert candidate("s1", **(ANSWER | change)).id != a.id, change


def test_sample_repeats_never_collide_and_default_to_zero():
    ids = {candidate(sample=i).id for i in range(50)}
    assert len(ids) == 50
    assert candidate().id == candidate(sample=0).id


def test_judgment_id_covers_judge_rubric_mode_and_order():
    base = dict(judge_id="j", judge_model="openai/judge", rubric_id="tip", rubric_version="v1",
                rubric_hash="r1", mode="pairwise", candidate_ids=["c1", "c2"], scenario_id="s1", order="AB")
    j = Judgment(**base)
    for change in ({"order": "BA"}, {"rubric_hash": "r2"}, {"judge_model": "openai/other"},
                   {"mode": "rubric"}, {"candidate_ids": ["c2", "c1"]}, {"judge_params": {"temperature": 1}}):
        assert Judgment(**{**base, **change}).id != j.id, change


def test_failure_is_a_record_not_a_score():
    bad = candidate(error="HTTP 500", error_kind="server")
    assert not bad.ok and bad.output is None
    assert candidate(output="x").ok


def test_round_trip_and_unknown_keys_rejected():
    s = Scenario(fields={"persona": "nurse", "tasks": ["a", "b"]}, source="generate")
    assert Scenario.model_validate_json(s.model_dump_json()) == s
    with pytest.raises(ValidationError, match="surprise"):
        Scenario(fields={}, surprise=1)


def test_newer_schema_version_is_refused_with_advice():
    s = Scenario(fields={"q": 1})
    data = s.model_dump() | {"schema_version": SCHEMA_VERSION + 1}
    with pytest.raises(ValidationError, match="upgrade bench"):
        Scenario.model_validate(data)


def test_reviews_are_events_with_distinct_ids():
    r1 = Review(judgment_id="j1", reviewer="ann", scores={"tone": 4})
    r2 = Review(judgment_id="j1", reviewer="ann", scores={"tone": 4})
    assert r1.created_at and r1.id.startswith("r")
    assert r1.id != r2.id or r1.created_at == r2.created_at
