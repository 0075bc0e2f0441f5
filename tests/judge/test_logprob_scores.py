"""Probability-weighted rubric scores: a judge asked for logprobs stores the expected score beside the sampled
one, through the real grading path (the fake provider's logprobs, and the embedded llama.cpp model's)."""

from __future__ import annotations

import asyncio

import polars as pl
import pytest

from bench.analysis.tables import COMPOSITE
from bench.analysis.ties import ties_broken
from bench.config.entries import JudgeEntry
from bench.config.rubrics import load_rubric
from bench.core.records import Scenario
from bench.judge.grader import Item, Judge, grade_items
from bench.judge.packed import grade_packed, packed_expected_scores
from bench.judge.logprobs import expected_scores
from bench.models import local
from bench.models.client import LLM, Limits
from bench.testing.grids import ROOT

ASK_LOGPROBS = {"logprobs": True, "top_logprobs": 5, "temperature": 0, "max_tokens": 200}


def _grade(model: str, api_base: str | None, params: dict, cache: str, n: int = 12, transport: str = "auto",
           pack_size: int = 1):
    judge = Judge(JudgeEntry(id="j", model=model, api_base=api_base, rubric="tip-v1", params=params,
                             transport=transport, pack_size=pack_size),
                  load_rubric("tip-v1", ROOT))
    items = [Item(Scenario(fields={"i": i}), f"Tip number {i}?", (f"Answer {i}: walk for {i} minutes.",),
                  (f"c{i}",)) for i in range(n)]
    out = []

    async def go():
        llm = LLM(Limits(max_concurrency=4, timeout_s=300), cache=cache)
        try:
            if pack_size > 1:
                for k in range(0, n, pack_size):
                    out.extend(await grade_packed(judge, items[k:k + pack_size], llm))
            else:
                await grade_items(judge, items, llm, out.append)
        finally:
            await llm.aclose()
    asyncio.run(go())
    return judge, sorted(out, key=lambda j: j.candidate_ids[0])


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_the_expected_score_is_the_mean_over_the_score_tokens_probabilities(fake, tmp_path, transport):
    fake.configure(logprob_alt=0.3)
    judge, js = _grade("openai/judge", fake.url, ASK_LOGPROBS, str(tmp_path / "c.sqlite"), transport=transport)
    assert all(j.ok for j in js)
    for j in js:
        assert set(j.expected_scores) == set(j.scores)
        for crit, value in j.scores.items():  # the fake puts 0.3 on a neighbouring value: E = v ± 0.3
            assert abs(j.expected_scores[crit] - value) == pytest.approx(0.3)
        assert j.expected_score == pytest.approx(judge.rubric.composite(j.expected_scores))
    frame = pl.DataFrame({"judge": "j", "cell": [f"m{k % 3}" for k in range(len(js))], "criterion": COMPOSITE,
                          "value": [j.score for j in js], "expected": [j.expected_score for j in js]})
    [row] = ties_broken(frame).iter_rows(named=True)
    assert row["tied_pairs"] > 0 and row["ties_broken"] > 0, "a tie in sampled scores is broken by the expectation"

    sent = fake.stats()["requests"]
    _judge, again = _grade("openai/judge", fake.url, ASK_LOGPROBS, str(tmp_path / "c.sqlite"), transport=transport)
    assert fake.stats()["requests"] == sent, "answered from the response cache"
    assert [j.expected_scores for j in again] == [j.expected_scores for j in js], "the cache keeps the logprobs"


def test_a_packed_judge_reads_each_items_expected_scores_in_that_items_own_grade(fake, tmp_path):
    fake.configure(logprob_alt=0.3)
    judge, js = _grade("openai/judge", fake.url, ASK_LOGPROBS | {"max_tokens": 800}, str(tmp_path / "c.sqlite"),
                       n=8, pack_size=4)
    assert len(js) == 8 and all(j.ok and j.pack_id and "fallback" not in j.details for j in js)
    assert fake.stats()["requests"] == 2, "two packed calls, no single-item re-grade"
    for j in js:
        assert set(j.expected_scores) == set(j.scores)
        for crit, value in j.scores.items():
            assert abs(j.expected_scores[crit] - value) == pytest.approx(0.3)
        assert j.expected_score == pytest.approx(judge.rubric.composite(j.expected_scores))


def test_packed_expected_scores_keep_to_their_own_item_whatever_the_key_order():
    reply = ('{"grades": [{"rationale": "a } and a [ in a string", "id": "ia", "scores": {"tone": 4}}, '
             '{"scores": {"tone": 2}, "id": "ib"}]}')
    toks = [[t, [[t, -0.5], [str(int(t) + 1), -1.0]] if t in ("4", "2") else []]
            for t in __import__("re").findall(r"\d+|\w+|\s+|[^\w\s]", reply)]
    p4, p5 = 2.718281828 ** -0.5, 2.718281828 ** -1.0
    got = packed_expected_scores(reply, toks, {"tone": (1, 5)})
    assert got["ia"]["tone"] == pytest.approx((4 * p4 + 5 * p5) / (p4 + p5))
    assert got["ib"]["tone"] == pytest.approx((2 * p4 + 3 * p5) / (p4 + p5))


def test_a_reply_without_logprobs_leaves_the_expected_score_empty(fake, tmp_path):
    _judge, js = _grade("openai/judge", fake.url, {"temperature": 0}, str(tmp_path / "c.sqlite"), n=3)
    assert all(j.ok and j.scores and j.expected_scores is None and j.expected_score is None for j in js)


def test_value_tokens_that_cannot_be_read_give_no_expectation():
    scales = {"tone": (1, 10)}
    split = [['{"', []], ['tone', []], ['":', []], [' ', []], ['1', [['1', -0.1], ['9', -2.0]]], ['0', []], ['}', []]]
    assert expected_scores('{"tone": 10}', split, scales) == {}, "a value over two tokens has no alternatives"
    thin = [['{"tone": ', []], ['4', [['4', -3.0], ['x', -0.05]]], ['}', []]]
    assert expected_scores('{"tone": 4}', thin, scales) == {}, "too little probability on valid values"
    good = [['{"tone": ', []], ['4', [['4', -0.5], ['5', -1.0], ['11', -2.0]]], ['}', []]]
    p4, p5 = 2.718281828 ** -0.5, 2.718281828 ** -1.0
    assert expected_scores('{"tone": 4}', good, scales)["tone"] == pytest.approx((4 * p4 + 5 * p5) / (p4 + p5))


@pytest.mark.local_model
def test_the_embedded_model_gives_expected_scores(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_LOCAL_LOGPROBS", "1")  # llama.cpp's server keeps logits only when asked
    local.shutdown()
    try:
        judge, js = _grade("local/gemma-3-270m", None, ASK_LOGPROBS, str(tmp_path / "c.sqlite"), n=2)
    finally:
        local.shutdown()
    graded = [j for j in js if j.ok]
    assert graded, [j.error for j in js]
    for j in graded:
        assert j.expected_scores, j.raw
        for crit, value in j.expected_scores.items():
            low, high = (int(v) for v in next(c.scale for c in judge.rubric.criteria if c.id == crit))
            assert low <= value <= high
