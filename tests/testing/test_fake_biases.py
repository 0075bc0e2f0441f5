"""The fake provider's scripted judge biases (issue 33, point 4): a judge that prefers the first slot with probability
p, adds levels to answers over N characters, or favours one model's answers; and padded answers of varied length.
Each knob is checked on direct requests against the same judge without it."""

from __future__ import annotations

import json
import urllib.request

import pytest

from bench.testing.fake_provider import FakeProvider

LEVELS = [1, 2, 3, 4, 5]
LABELS = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]
GRADE = {"type": "json_schema", "json_schema": {"name": "g", "schema": {
    "type": "object", "required": ["scores", "rationale"], "additionalProperties": False,
    "properties": {"scores": {"type": "object", "required": ["q"], "additionalProperties": False,
                              "properties": {"q": {"type": "integer", "enum": LEVELS}}},
                   "rationale": {"type": "string"}}}}}
VERDICT = {"type": "json_schema", "json_schema": {"name": "v", "schema": {
    "type": "object", "required": ["verdict", "rationale"], "additionalProperties": False,
    "properties": {"verdict": {"type": "string", "enum": LABELS}, "rationale": {"type": "string"}}}}}


def _post(fake: FakeProvider, body: dict) -> str:
    req = urllib.request.Request(f"{fake.url}/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as resp:
        return json.loads(resp.read())["choices"][0]["message"]["content"]


def _answer(fake: FakeProvider, model: str, i: int) -> str:
    return _post(fake, {"model": model, "messages": [{"role": "user", "content": f"tip {i}"}]})


def _grade(fake: FakeProvider, answer: str, judge: str) -> int:
    user = f"Grade this.\n<response-ab12cd>\n{answer}\n</response-ab12cd>"
    body = {"model": judge, "response_format": GRADE, "messages": [{"role": "user", "content": user}]}
    return json.loads(_post(fake, body))["scores"]["q"]


def _verdict(fake: FakeProvider, first: str, second: str, judge: str) -> str:
    user = (f"Response A:\n<response-ab12a>\n{first}\n</response-ab12a>\n\n"
            f"Response B:\n<response-ab12b>\n{second}\n</response-ab12b>")
    body = {"model": judge, "response_format": VERDICT, "messages": [{"role": "user", "content": user}]}
    return json.loads(_post(fake, body))["verdict"]


def test_pad_answers_gives_a_models_answers_varied_lengths_and_leaves_the_others_alone(fake):
    fake.configure(pad_answers={"long": 20})
    padded = [_answer(fake, "long", i) for i in range(30)]
    plain = [_answer(fake, "short", i) for i in range(30)]
    assert {len(a.split()) for a in plain} == {3}
    words = [len(a.split()) - 3 for a in padded]
    assert min(words) >= 0 and max(words) <= 20 and len(set(words)) >= 8, words
    assert all(a.split()[3:] == ["more"] * w for a, w in zip(padded, words))
    assert padded == [_answer(fake, "long", i) for i in range(30)], "the padding is hashed: the same every time"


def test_length_bias_adds_its_bonus_to_answers_over_n_characters_only(fake):
    fake.configure(model_quality={"m": 0.5}, pad_answers={"m": 30},
                   length_bias={"wordy": {"over_chars": 80, "bonus": 1}})
    answers = [_answer(fake, "m", i) for i in range(40)]
    long = [a for a in answers if len(a) > 80]
    short = [a for a in answers if len(a) <= 80]
    assert long and short
    # the same judge model with the knob off is the reference: its reading of each request is the same
    with_bias = {a: _grade(fake, a, "wordy") for a in answers}
    fake.configure(length_bias={})
    without = {a: _grade(fake, a, "wordy") for a in answers}
    assert all(with_bias[a] == min(5, without[a] + 1) for a in long), (with_bias, without)
    assert all(with_bias[a] == without[a] for a in short)


def test_favour_model_raises_that_models_scores_and_moves_pairwise_verdicts_its_way(fake):
    fake.configure(model_quality={"mine": 0.5, "theirs": 0.5}, favour_model={"judge": {"model": "mine", "bonus": 2}})
    mine = [_answer(fake, "mine", i) for i in range(12)]
    theirs = [_answer(fake, "theirs", i) for i in range(12)]
    biased = [_grade(fake, a, "judge") for a in mine + theirs]
    verdicts = [_verdict(fake, a, b, "judge") for a, b in zip(theirs, mine)]
    fake.configure(favour_model={})
    plain = [_grade(fake, a, "judge") for a in mine + theirs]
    plain_verdicts = [_verdict(fake, a, b, "judge") for a, b in zip(theirs, mine)]
    assert biased[:12] == [min(5, s + 2) for s in plain[:12]] and biased[12:] == plain[12:]
    assert [LABELS.index(v) for v in verdicts] == [min(4, LABELS.index(v) + 2) for v in plain_verdicts]


def test_position_bias_turns_verdicts_to_the_first_slot_with_probability_p(fake):
    fake.configure(model_quality={"good": 0.95, "bad": 0.05})
    good = [_answer(fake, "good", i) for i in range(60)]
    bad = [_answer(fake, "bad", i) for i in range(60)]
    assert {_verdict(fake, b, g, "seated") for b, g in zip(bad, good)} <= {"B>A", "B>>A"}, "unbiased: good wins"
    fake.configure(position_bias={"seated": 1.0})
    assert {_verdict(fake, b, g, "seated") for b, g in zip(bad, good)} == {"A>B"}, "p = 1: the first slot always"
    assert {_verdict(fake, g, b, "seated") for b, g in zip(bad, good)} <= {"A>>B", "A>B"}, "already first: kept"
    fake.configure(position_bias={"seated": 0.4})
    share = sum(_verdict(fake, b, g, "seated") == "A>B" for b, g in zip(bad, good)) / len(good)
    assert 0.2 <= share <= 0.6, share  # 60 draws of p = 0.4: the binomial's 99.9% range is about 0.2-0.6
    assert share == sum(_verdict(fake, b, g, "seated") == "A>B" for b, g in zip(bad, good)) / len(good), "seeded"


@pytest.mark.parametrize(("bad", "says"), [
    ({"position_bias": {"j": 1.5}}, "position_bias must map model names to probabilities"),
    ({"length_bias": {"j": {"over_chars": 10}}}, "length_bias must map model names to"),
    ({"length_bias": {"j": {"over_chars": -1, "bonus": 1}}}, "length_bias must map model names to"),
    ({"favour_model": {"j": {"model": "m", "bonus": 0.5}}}, "favour_model must map model names to"),
    ({"pad_answers": {"m": "long"}}, "pad_answers must map model names to")])
def test_bias_knobs_are_validated(fake, bad, says):
    with pytest.raises(RuntimeError, match=f"HTTP 400.*{says}"):
        fake.configure(**bad)
