"""The fake provider answers per model (issue 27, point 7): two fake models give different answers, means and
win rates through a real sweep, a judge's repeats disagree once `noise` is on, and without noise the same
request always gets the same reply."""

from __future__ import annotations

import json
import urllib.request

import pytest

from bench.analysis import summarize
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import generate, grid, judge, model, prompt
from bench.testing.in_process import run_stages


def _grid(tmp_path, url, name):
    return grid(tmp_path / f"{name}.yaml", url, name=name, seed=2,
                models=[model("m1", url, name="fake-a"), model("m2", url, name="fake-b")],
                prompts=[prompt("tip", "One tip about {topic}.")],
                scenarios=generate(topic=[f"topic {i}" for i in range(10)]),
                judges=[judge("grader", url, name="judge", repeats=3),
                        judge("arena", url, rubric="arena-pairwise", name="judge", baseline="m1/tip@v1")],
                limits={"max_concurrency": 8, "timeout_s": 20, "retries": 2})


def _run(tmp_path, fake, name):
    out = run_stages(tmp_path, _grid(tmp_path, fake.url, name))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return summarize(tmp_path / "runs" / name, resamples=50)


def test_two_fake_models_get_different_means_and_a_win_rate_other_than_a_half(tmp_path, fake):
    s = _run(tmp_path, fake, "differ")
    answers = s.tables.candidates.sort("scenario")
    by_model = {m: part["output"].to_list() for (m,), part in answers.group_by(["model"])}
    assert not set(by_model["m1"]) & set(by_model["m2"]), "two models answer one prompt differently"
    means = {r["cell"]: r["mean"] for r in s.overview.filter(s.overview["judge"] == "grader").iter_rows(named=True)}
    assert set(means) == {"m1/tip@v1", "m2/tip@v1"} and abs(means["m1/tip@v1"] - means["m2/tip@v1"]) >= 0.2, means
    rate = s.win_rates.filter(s.win_rates["cell"] == "m2/tip@v1")["win_rate"].to_list()
    assert len(rate) == 1 and rate[0] != 0.5, s.win_rates
    icc = s.stability.filter((s.stability["judge"] == "grader") & (s.stability["criterion"] == "composite"))
    assert icc["icc"].to_list() == [1.0], "without noise a judge's repeats (identical requests) agree"


def test_with_noise_a_judges_repeats_disagree_and_a_rerun_of_the_server_draws_the_same(tmp_path, fake):
    fake.configure(noise=0.15)
    s = _run(tmp_path, fake, "noisy")
    icc = s.stability.filter((s.stability["judge"] == "grader") & (s.stability["criterion"] == "composite"))
    assert icc.height == 1 and icc["icc"][0] is not None and icc["icc"][0] < 1.0, s.stability
    assert icc["within_var"][0] > 0, "the repeats of one item got different grades"
    first = sorted(s.tables.scores.filter(s.tables.scores["judge"] == "grader")["value"].to_list())
    fake.reset()
    fake.configure(noise=0.15)
    (tmp_path / "again").mkdir()
    again = _run(tmp_path / "again", fake, "noisy")
    assert sorted(again.tables.scores.filter(again.tables.scores["judge"] == "grader")["value"].to_list()) == first, \
        "the noise is seeded: the n-th arrival of a request always draws the same"


def _post(fake: FakeProvider, body: dict) -> str:
    req = urllib.request.Request(f"{fake.url}/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10) as resp:
        return json.loads(resp.read())["choices"][0]["message"]["content"]


GRADE = {"type": "json_schema", "json_schema": {"name": "g", "schema": {
    "type": "object", "required": ["scores", "rationale"], "additionalProperties": False,
    "properties": {"scores": {"type": "object", "required": ["q"], "additionalProperties": False,
                              "properties": {"q": {"type": "integer", "enum": [1, 2, 3, 4, 5]}}},
                   "rationale": {"type": "string"}}}}}


def _grade_of(fake: FakeProvider, answer: str, judge_model: str = "judge") -> int:
    body = {"model": judge_model, "response_format": GRADE,
            "messages": [{"role": "user", "content": f"Grade this.\n<response-ab12cd>\n{answer}\n</response-ab12cd>"}]}
    return json.loads(_post(fake, body))["scores"]["q"]


def test_without_noise_the_same_request_gets_the_same_reply(fake):
    body = {"model": "fake-a", "messages": [{"role": "user", "content": "One tip."}]}
    assert _post(fake, body) == _post(fake, body) == _post(fake, body)
    other = _post(fake, {**body, "model": "fake-b"})
    assert other != _post(fake, body) and other.startswith("fake answer ") and len(other.split()) == 3
    answer = _post(fake, body)
    assert len({_grade_of(fake, answer) for _ in range(5)}) == 1


def test_model_quality_and_judge_bias_move_the_grades(fake):
    answers = {(m, i): _post(fake, {"model": m, "messages": [{"role": "user", "content": f"tip {i}"}]})
               for m in ("good", "bad") for i in range(6)}
    fake.configure(model_quality={"good": 0.95, "bad": 0.05})
    good = [_grade_of(fake, a) for (m, _), a in answers.items() if m == "good"]
    bad = [_grade_of(fake, a) for (m, _), a in answers.items() if m == "bad"]
    assert min(good) >= 4 and max(bad) <= 2, (good, bad)
    fake.configure(model_quality={"good": 0.5, "bad": 0.5}, judge_bias={"lenient": 0.5})
    lenient = [_grade_of(fake, a, "lenient") for a in answers.values()]
    plain = [_grade_of(fake, a, "judge") for a in answers.values()]
    assert sum(lenient) > sum(plain) + len(plain), (lenient, plain)


@pytest.mark.parametrize(("bad", "says"), [({"noise": -0.1}, "noise must be a number in"),
                                           ({"noise": "high"}, "noise must be a number in"),
                                           ({"model_quality": {"a": 2}}, "model_quality must map model names"),
                                           ({"judge_bias": ["a"]}, "judge_bias must map model names")])
def test_quality_knobs_are_validated(fake, bad, says):
    with pytest.raises(RuntimeError, match=f"HTTP 400.*{says}"):
        fake.configure(**bad)
