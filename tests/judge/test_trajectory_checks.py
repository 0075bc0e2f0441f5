"""Trajectory checks (no model call): the tools an agent called, their arguments by value or JSON schema, their
order, the forbidden ones and the tool-loop requests; alone in an automated judge and beside LLM criteria in a
hybrid one; and, in a sweep where the scripted model calls the wrong tool on some scenarios, failing exactly there."""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.config.checks import Trajectory, automated_score, parse_check, run_checks
from bench.config.rubrics import load_rubric
from bench.core.errors import ParamsError
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.stage_runs import run_judge
from bench.testing.grids import grid, judge, model, prompt
from bench.testing.in_process import run_stages
from tests.judge.conversation_runs import agent, collected, rewrite, rubric_file


def entry(turn: int, step: int, name: str, arguments: dict | None) -> dict:
    return {"turn": turn, "step": step, "id": f"c{turn}{step}", "name": name, "arguments": arguments,
            "raw_arguments": json.dumps(arguments) if arguments is not None else "{city: Paris",
            "result": "ok", "outcome": "ok" if arguments is not None else "malformed_arguments"}


CALLS = [entry(1, 0, "search", {"city": "Paris", "nights": 2, "pets": False}), entry(1, 1, "book", None),
         entry(1, 2, "book", {"hotel": "Azur", "nights": 2.0}), entry(2, 0, "pay", {"amount": 160})]
REQUESTS = [{"turn": 1, "step": s, "by": "model"} for s in range(4)] + [
    {"turn": 1, "step": 0, "by": "simulator"}, {"turn": 2, "step": 0, "by": "model"},
    {"turn": 2, "step": 1, "by": "model"}, {"turn": 3, "step": 0, "by": "model"}]
AGENT = Trajectory.of(CALLS, REQUESTS)


def result(check: dict, trajectory: Trajectory | None = AGENT):
    (r,) = run_checks([parse_check({"id": "t", **check})], "the final answer", None, trajectory)
    return r


@pytest.mark.parametrize("check,passed,detail", [
    ({"kind": "tool_called", "name": "search"}, True, "search called once"),
    ({"kind": "tool_called", "name": "cancel"}, False, "cancel was not called (calls: search, book, book, pay)"),
    ({"kind": "tool_called", "name": "search", "arguments": {"city": "Paris", "pets": False}}, True, "matching"),
    ({"kind": "tool_called", "name": "search", "arguments": {"city": "Lyon"}}, False, 'city="Paris", not "Lyon"'),
    ({"kind": "tool_called", "name": "search", "arguments": {"pets": 0}}, False, "pets=false, not 0"),  # JSON types
    ({"kind": "tool_called", "name": "book", "arguments": {"nights": 2}}, True, "matching"),  # 2 == 2.0; a malformed
    ({"kind": "tool_called", "name": "search", "arguments": {"budget": 1}}, False, 'no argument "budget"'),
    ({"kind": "tool_called", "name": "book", "schema": {"type": "object", "required": ["hotel"],
                                                         "properties": {"nights": {"type": "number", "maximum": 3}}}},
     True, "matching"),
    ({"kind": "tool_called", "name": "book", "schema": {"type": "object", "properties": {
        "hotel": {"type": "integer"}}}}, False, "once, never with matching arguments: hotel: 'Azur' is not of type"),
    ({"kind": "tool_order", "names": ["search", "book", "pay"]}, True, "called in order: search → book → pay"),
    ({"kind": "tool_order", "names": ["search", "pay"]}, True, "in order"),  # others may come between
    ({"kind": "tool_order", "names": ["pay", "book"]}, False, "no call of book after pay"),
    ({"kind": "tool_not_called", "name": "cancel"}, True, "cancel not called"),
    ({"kind": "tool_not_called", "name": "book"}, False, "book called 2 times"),
    ({"kind": "max_steps", "limit": 6}, True, "6 tool-loop requests ≤ 6"),  # turns 1 and 2 called tools: 4 + 2
    ({"kind": "max_steps", "limit": 5}, False, "6 tool-loop requests > 5"),
])
def test_each_trajectory_check(check, passed, detail):
    r = result(check)
    assert (r.passed, r.score) == (passed, float(passed)) and detail in r.detail, r.detail


@pytest.mark.parametrize("trajectory", [None, Trajectory.of(None, [{"turn": 1, "step": 0, "by": "model"}])])
def test_a_plain_answer_called_no_tool(trajectory):
    outcomes = {kind: result(check, trajectory) for kind, check in {
        "tool_called": {"kind": "tool_called", "name": "search"},
        "tool_order": {"kind": "tool_order", "names": ["search"]},
        "tool_not_called": {"kind": "tool_not_called", "name": "search"},
        "max_steps": {"kind": "max_steps", "limit": 1}}.items()}
    assert {k: r.passed for k, r in outcomes.items()} == {"tool_called": False, "tool_order": False,
                                                          "tool_not_called": True, "max_steps": True}
    assert all("no trajectory (a plain answer" in r.detail for r in outcomes.values())


def test_a_turn_has_its_own_calls_and_requests():
    second = Trajectory.of(CALLS, REQUESTS, turn=2)
    assert (second.names, second.steps) == (["pay"], 2)
    third = Trajectory.of(CALLS, REQUESTS, turn=3)
    assert (third.names, third.steps, third.recorded) == ([], 0, True)
    assert result({"kind": "tool_called", "name": "pay"}, third).detail == "pay was not called (no tool was called)"
    assert Trajectory.of(CALLS, None).steps == 4  # no requests recorded: the requests that called tools


@pytest.mark.parametrize("check,message", [
    ("{id: t, kind: tool_called, name: book, arguments: {a: 1}, schema: {type: object}}", "not both"),
    ("{id: t, kind: tool_called, name: book, schema: {type: objekt}}", "schema is no valid JSON schema"),
    ("{id: t, kind: max_steps, limit: 0}", "checks[0].limit"),
    ("{id: t, kind: tool_order, names: []}", "checks[0].names"),
    ("{id: t, kind: tool_not_called}", "checks[0].name"),
])
def test_a_malformed_trajectory_check_is_refused_naming_the_rubric_file(tmp_path, check, message):
    path = rubric_file(tmp_path, "agent", f"mode: automated\nchecks:\n  - {check}\n")
    with pytest.raises(ParamsError) as err:
        load_rubric(path, tmp_path)
    assert str(err.value).startswith(str(tmp_path / "agent.md")) and message in str(err.value), str(err.value)


def test_the_score_weighs_trajectory_checks_like_any_check():
    checks = [parse_check(c) for c in ({"id": "a", "kind": "tool_called", "name": "search", "weight": 3},
                                       {"id": "b", "kind": "length", "max_chars": 3})]
    assert automated_score(run_checks(checks, "long answer", None, AGENT), checks) == 0.75


AGENT_CHECKS = ("checks:\n  - {id: searched, kind: tool_called, name: find_hotel, schema: {type: object, "
                "required: [city]}}\n  - {id: no_cancel, kind: tool_not_called, name: cancel}\n"
                "  - {id: quick, kind: max_steps, limit: 2}\n")
CRIT = ("criteria:\n  - {id: helpful, description: helps, scale: [1, 5], anchors: {1: none, 2: barely, 3: partly, "
        "4: mostly, 5: fully}}\n")


def test_automated_and_hybrid_judges_grade_trajectories_through_the_stage(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    auto = rubric_file(tmp_path, "auto", "mode: automated\n" + AGENT_CHECKS)
    hybrid = rubric_file(tmp_path, "hyb", "mode: hybrid\nweights: {llm: 1, automated: 1}\n" + CRIT + AGENT_CHECKS)
    run = collected(tmp_path, fake.url, [("auto", auto, {}), ("hyb", hybrid, {})], scenarios=3)
    calls = {0: [("find_hotel", {"city": "x"}, "Azur")],  # right tool, one call: every check passes
             1: [("find_hotel", {"town": "x"}, "?"), ("cancel", {}, "cancelled")],  # wrong arguments, forbidden tool
             2: []}  # no tool called (a trajectory with no call)
    order = {}
    rewrite(run, lambda c: agent(c, calls[order.setdefault(c.scenario_id, len(order))], "Book it."))
    fake.reset()
    fake.configure(replies=[{"match": "Grade the conversation", "content": json.dumps(
        {"scores": {"helpful": 5}, "rationale": "fine"})}])
    asyncio.run(run_judge(run, progress="none"))
    js = {(j.judge_id, order[j.scenario_id]): j for j in RunStore(run.dir).latest(Judgment).values()}
    assert {k: j.scores for k, j in js.items() if k[0] == "auto"} == {
        ("auto", 0): {"searched": 1.0, "no_cancel": 1.0, "quick": 1.0},
        ("auto", 1): {"searched": 0.0, "no_cancel": 0.0, "quick": 0.0},  # 3 requests: two calls, then the answer
        ("auto", 2): {"searched": 0.0, "no_cancel": 1.0, "quick": 1.0}}
    assert [js[("auto", n)].usage.calls for n in range(3)] == [0, 0, 0]
    assert fake.stats()["requests"] == 3  # the hybrid judge's LLM part only
    for n, auto_score in enumerate((1.0, 0.0, 2 / 3)):
        j = js[("hyb", n)]
        assert j.ok and j.details["automated_score"] == pytest.approx(auto_score) and j.details["llm_score"] == 1.0
        assert j.score == pytest.approx(0.5 + 0.5 * auto_score) and j.scores["helpful"] == 5.0
    detail = {c["id"]: c["detail"] for c in js[("hyb", 1)].details["checks"]}
    assert detail["searched"] == "find_hotel called once, never with matching arguments: 'city' is a required property"


def test_a_tool_check_fails_exactly_where_the_scripted_model_calls_the_wrong_tool(tmp_path, fake):
    """The issue's Done-when: a sweep of an agent grid on the fake provider, whose scripted model calls the wrong
    tool on the scenarios saying WRONG; the automated check fails on exactly those and passes on the rest."""
    url = fake.url
    city = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [{"name": "get_weather", "description": "Current weather in a city", "parameters": city,
              "result": "Weather in {city}: sunny"},
             {"name": "get_time", "description": "Local time in a city", "parameters": city,
              "result": "Time in {city}: noon"}]
    questions = ["Weather in Paris?", "WRONG: Weather in Oslo?", "Weather in Rome?", "WRONG: Weather in Lima?",
                 "Weather in Kyiv?"]
    path = rubric_file(tmp_path, "tools", "mode: automated\nchecks:\n  - {id: weather, kind: tool_called, name: "
                                          "get_weather, schema: {type: object, required: [city]}}\n"
                                          "  - {id: no_time, kind: tool_not_called, name: get_time}\n")
    params = grid(tmp_path / "agent.yaml", url, name="agent", tools=tools, models=[model("m1", url)],
                  prompts=[prompt("agent", "{question}", system="You answer travel questions.",
                                  tools=["get_weather", "get_time"], max_steps=4)],
                  scenarios={"generate": {"dimensions": {"question": questions}}},
                  judges=[judge("tools", url, rubric=path)])
    fake.configure(tool_calls=[{"match": "WRONG:", "name": "get_time", "arguments": {"city": "Oslo"}},
                               {"match": "Weather in", "name": "get_weather", "arguments": {"city": "Paris"}}])
    out = run_stages(tmp_path, params)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    store = RunStore(tmp_path / "runs" / "agent")
    cands = {c.scenario_id: c for c in store.latest(Candidate).values()}
    wrong = {sid for sid, c in cands.items() if c.messages[-1]["content"].startswith("WRONG:")}
    assert len(cands) == 5 and len(wrong) == 2
    assert all(c.trajectory and c.ended == "answered" for c in cands.values())
    js = list(store.latest(Judgment).values())
    assert len(js) == 5 and all(j.ok and j.usage.calls == 0 for j in js)
    assert {j.scenario_id for j in js if j.scores["weather"] == 0.0} == wrong
    assert {j.scenario_id for j in js if j.scores["no_time"] == 0.0} == wrong
    assert {j.scenario_id for j in js if j.score == 1.0} == set(cands) - wrong


def test_a_call_refused_before_the_tool_ran_is_no_call_of_it():
    """A call missing a required argument keeps its parsed arguments, but the tool never ran: tool_called and
    tool_order do not count it (the model was told it failed), tool_not_called does (the model tried)."""
    refused = {**entry(1, 0, "weather", {"city": "Paris"}), "outcome": "malformed_arguments",
               "result": "error: missing required argument(s) unit"}
    unknown = {**entry(1, 1, "pay", {"amount": 1}), "outcome": "unknown_tool"}
    t = Trajectory.of([refused, unknown, entry(1, 2, "search", {"city": "Paris"})], [])
    r = result({"kind": "tool_called", "name": "weather", "arguments": {"city": "Paris"}}, t)
    assert not r.passed and "called once, each refused (malformed_arguments)" in r.detail, r.detail
    assert not result({"kind": "tool_order", "names": ["pay", "search"]}, t).passed
    assert result({"kind": "tool_order", "names": ["search"]}, t).passed
    assert not result({"kind": "tool_not_called", "name": "weather"}, t).passed
