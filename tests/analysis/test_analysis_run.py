"""bench.analysis on records written through the run store: tables, reliability, human reviews, usage."""

from __future__ import annotations

import polars as pl
import pytest

from bench.analysis import (cohen_kappa, inter_judge, judge_health, judge_vs_human, jury_alpha, load_run,
                            packed_vs_single, summarize, usage_by_cell, usage_by_judge)
from bench.core.records import Candidate, Judgment, Review, Usage
from bench.core.store import RunStore
from bench.testing.records import candidate, judgment, scenario

SINGLE = [1, 2, 3, 4, 5, 3]
PACKED = [1, 2, 4, 4, 5, 2]
OTHER = [2, 2, 3, 5, 5, 3]


def grade(judge: str, mode: str, model: str, cand: Candidate, value: float, **extra) -> Judgment:
    """Return ``judge``'s grade ``value`` of ``cand`` on the one criterion "a"."""
    return judgment(cand, judge_id=judge, judge_model=model, mode=mode, scores={"a": value}, score=value,
                    rationale=f"{judge} says {value}", **extra)


@pytest.fixture
def run(tmp_path):
    store = RunStore(tmp_path / "r")
    scenarios = [scenario({"q": i}) for i in range(6)]
    cands = [candidate(s, usage=Usage(prompt_tokens=10, completion_tokens=5, latency_s=float(i + 1), cost_usd=0.01))
             for i, s in enumerate(scenarios)]
    failed = candidate(scenarios[0], sample=1, error="429 after 3 attempts", error_kind="rate_limit")
    packed_usage = Usage(prompt_tokens=600, completion_tokens=120, latency_s=4.0)
    single_usage = Usage(prompt_tokens=100, completion_tokens=20, latency_s=1.0, cost_usd=0.001)
    judgments = [grade("single", "rubric", "openai/j", c, v, usage=single_usage) for c, v in zip(cands, SINGLE)]
    judgments += [grade("packed", "packed", "openai/j", c, v, usage=packed_usage, pack_id="b1", schema_version=1)
                  for c, v in zip(cands, PACKED)]  # schema 1: every item of a packed call carried its usage
    judgments += [grade("other", "rubric", "openai/k", c, v) for c, v in zip(cands, OTHER)]
    judgments.append(judgment(failed, judge_id="other", judge_model="openai/k", error="no JSON object in the reply",
                              error_kind="parse"))
    reviews = [Review(judgment_id=judgments[0].id, reviewer="ann", scores={"a": 5.0}, created_at="2026-01-01T00:00:00"),
               Review(judgment_id=judgments[0].id, reviewer="ann", scores={"a": 1.0}, created_at="2026-01-02T00:00:00"),
               Review(judgment_id=judgments[1].id, reviewer="ann", scores={"a": 3.0})]
    store.append([*scenarios, *cands, failed, *judgments, *reviews])
    return tmp_path / "r"


def test_load_run_builds_the_long_score_table_from_successes_only(run):
    t = load_run(run)
    assert t.candidates.height == 7 and t.judgments.height == 19
    assert t.scores.height == 18 * 2  # criterion "a" and the composite, for the 18 successful judgments
    assert set(t.scores["cell"]) == {"m/p@v1"} and set(t.scores["criterion"]) == {"a", "composite"}
    assert t.reviews.height == 2  # the later review of judgment 0 supersedes the earlier one


def test_packed_vs_single_and_inter_judge_agreement_match_hand_computed_kappas(run):
    t = load_run(run)
    packed = packed_vs_single(t.scores).filter(pl.col("criterion") == "a").row(0, named=True)
    assert packed["judge_model"] == "openai/j" and packed["n"] == 6
    assert packed["kappa"] == pytest.approx(cohen_kappa(PACKED, SINGLE, "quadratic"))
    assert packed["exact"] == pytest.approx(4 / 6) and packed["mean_abs_diff"] == pytest.approx(2 / 6)
    pairs = inter_judge(t.scores, criterion="a")
    assert list(zip(pairs["a"], pairs["b"])) == [("other", "packed"), ("other", "single"), ("packed", "single")]
    assert pairs.filter((pl.col("a") == "other") & (pl.col("b") == "single"))["kappa"][0] == pytest.approx(
        cohen_kappa(OTHER, SINGLE, "quadratic"))
    alpha = jury_alpha(t.scores).filter(pl.col("criterion") == "a").row(0, named=True)
    assert alpha["judges"] == 3 and alpha["units"] == 6 and 0 < alpha["alpha"] < 1


def test_judge_vs_human_uses_the_latest_review(run):
    t = load_run(run)
    human = judge_vs_human(t.scores, t.judgments, t.reviews).filter(pl.col("criterion") == "a").row(0, named=True)
    # judge "single" gave 1 and 2; the human's latest reviews say 1 and 3
    assert (human["judge"], human["reviews"], human["exact"], human["mean_abs_diff"]) == ("single", 2, 0.5, 0.5)


def test_health_and_usage_count_failures_packed_calls_and_unknown_prices(run):
    t = load_run(run)
    health = {r["judge"]: r for r in judge_health(t.judgments).iter_rows(named=True)}
    assert health["other"]["failed"] == 1 and health["other"]["parse_failure_rate"] == pytest.approx(1 / 7)
    assert health["other"]["null_rate"] == pytest.approx(1 / 7) and health["single"]["parse_failure_rate"] == 0
    judges = {r["judge"]: r for r in usage_by_judge(t.judgments).iter_rows(named=True)}
    assert judges["packed"]["calls"] == 1 and judges["packed"]["prompt_tokens"] == 600  # one packed call, not 6
    assert judges["single"]["cost_usd"] == pytest.approx(0.006) and judges["single"]["unpriced_records"] == 0
    assert judges["packed"]["cost_usd"] is None and judges["packed"]["unpriced_records"] == 1  # unknown, not 0
    cell = usage_by_cell(t.candidates).row(0, named=True)
    assert cell["calls"] == 7 and cell["records"] == 7 and cell["failed_records"] == 1
    assert cell["latency_p50_s"] == pytest.approx(3.5) and cell["cost_usd"] is None  # the failure had no price


def test_summarize_reports_failure_rates_beside_the_leaderboard(run):
    s = summarize(run, resamples=100)
    row = s.overview.filter(pl.col("judge") == "other").row(0, named=True)
    assert row["answer_failure_rate"] == pytest.approx(1 / 7) and row["judge_failure_rate"] == pytest.approx(1 / 7)
    assert row["mean"] == pytest.approx(sum(OTHER) / 6) and row["n"] == 6
    assert s.battles.is_empty() and s.ratings.is_empty()
