"""The tool loop: the model's calls are executed and fed back until it answers or hits max_steps; every call is in
the trajectory with its outcome, and nothing a model asks (an unknown tool, malformed arguments, a tool that fails
or hangs) ends the conversation in an error."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from bench import register_tool
from tests.collect.dialogues import WEATHER, candidates, collect, inline, use_runs, write

ORDER = {"name": "lookup_order", "description": "An order's status",
         "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
         "function": "orders_registered"}
NO_ARGS = {"type": "object", "properties": {}}
# each scenario's question holds one marker: the fake's scripted call for it (the first script that matches)
SCRIPTS = [{"match": "WEATHER", "name": "get_weather", "arguments": {"city": "Paris"}},
           {"match": "ORDER", "name": "lookup_order", "arguments": {"order_id": "A-17"}},
           {"match": "LOCAL", "name": "stock", "arguments": {"sku": "X9"}},
           {"match": "SLOW", "name": "slow", "arguments": {}},
           {"match": "BROKEN", "name": "broken", "arguments": {}},
           {"match": "MALFORMED", "name": "get_weather", "arguments": '{"city": Par'},
           {"match": "NOARG", "name": "get_weather", "arguments": {"town": "Rome"}},
           {"match": "EXTRA", "name": "lookup_order", "arguments": {"order_id": "A-1", "rush": True}},
           {"match": "UNKNOWN", "name": "get_wether", "arguments": {"city": "Oslo"}},
           {"match": "LOOP", "name": "get_weather", "arguments": {"city": "Oslo"}, "until": 99}]
QUESTIONS = {"weather": "WEATHER in Paris?", "override": "WEATHER there?", "order": "ORDER status?",
             "local": "LOCAL stock?", "slow": "SLOW one?", "broken": "BROKEN one?", "malformed": "MALFORMED call?",
             "noarg": "NOARG call?", "extra": "EXTRA argument?", "unknown": "UNKNOWN tool?", "loop": "LOOP forever?"}


@pytest.fixture
def agent_run(tmp_path, fake, monkeypatch):
    """Collect one tool-using prompt over a scenario per case; return its candidates by case name."""
    use_runs(monkeypatch, tmp_path / "runs")
    module = f"shop_tools_{uuid.uuid4().hex[:8]}"  # "module:attr", imported from the params file's folder
    (tmp_path / f"{module}.py").write_text("def stock(sku):\n    return {'sku': sku, 'left': 3}\n")
    release = threading.Event()

    def lookup(order_id, scenario):  # takes the scenario's fields: its name is no argument of the tool
        return {"order": order_id, "status": scenario["status"]}

    def broken():
        raise RuntimeError("the inventory service is down")

    register_tool("orders_registered", lookup)
    register_tool("slow_registered", lambda: release.wait(60) and "late")
    register_tool("broken_registered", broken)
    tools = [WEATHER, ORDER, {"name": "stock", "parameters": {"type": "object", "properties": {"sku": {}}},
                              "function": f"{module}:stock"},
             {"name": "slow", "parameters": NO_ARGS, "function": "slow_registered", "timeout_s": 0.3},
             {"name": "broken", "parameters": NO_ARGS, "function": "broken_registered"}]
    prompt = {"id": "agent", "version": "v1", "system": "Use the tools.", "user": "{question}", "max_steps": 3,
              "tools": [t["name"] for t in tools]}
    scenarios = [{"question": q, "weather": "sunny", "status": "shipped"} for q in QUESTIONS.values()]
    scenarios[1]["tool_results"] = {"get_weather": "Hail, -3 C."}
    fake.configure(tool_calls=SCRIPTS)
    run = collect(write(tmp_path / "a.yaml", fake.url, prompts=[prompt], tools=tools, scenarios=inline(*scenarios)))
    release.set()
    found = candidates(run)
    yield {case: found[f"agent/{n}"] for n, case in enumerate(QUESTIONS)}


def outcome(cand) -> tuple:
    """Return (ended, [(step, name, arguments, outcome)…], the result fed back first)."""
    return (cand.ended, [(t["step"], t["name"], t["arguments"], t["outcome"]) for t in cand.trajectory],
            cand.trajectory[0]["result"] if cand.trajectory else None)


def test_a_called_tool_gets_its_result_from_the_arguments_and_the_scenario(agent_run, fake):
    cand = agent_run["weather"]
    assert cand.ok and outcome(cand) == ("answered", [(0, "get_weather", {"city": "Paris"}, "ok")],
                                         "Weather in Paris: sunny")
    roles = [m["role"] for m in cand.transcript]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = cand.transcript[2]["tool_calls"][0]
    assert cand.transcript[2]["content"] is None and call["function"] == {"name": "get_weather",
                                                                          "arguments": '{"city": "Paris"}'}
    assert cand.transcript[3] == {"role": "tool", "tool_call_id": call["id"], "name": "get_weather",
                                  "content": "Weather in Paris: sunny"}
    assert cand.output.endswith("[tools: Weather in Paris: sunny]")  # the fake was sent the result
    assert cand.trajectory[0]["raw_arguments"] == '{"city": "Paris"}' and cand.trajectory[0]["id"] == call["id"]
    assert [(t["turn"], t["step"]) for t in cand.turns] == [(1, 0), (1, 1)] and cand.usage.calls == 2
    sent = [b for b in fake.stats()["recent"] if "WEATHER in Paris?" in str(b["messages"])]
    assert {tuple(t["function"]["name"] for t in b["tools"]) for b in sent} == {
        ("get_weather", "lookup_order", "stock", "slow", "broken")}


def test_a_scenario_tool_results_override_the_template(agent_run):
    assert outcome(agent_run["override"])[2] == "Hail, -3 C."
    assert agent_run["override"].output.endswith("[tools: Hail, -3 C.]")


def test_python_tools_registered_by_name_and_imported_as_module_attr_are_called_with_the_arguments(agent_run):
    assert outcome(agent_run["order"]) == ("answered", [(0, "lookup_order", {"order_id": "A-17"}, "ok")],
                                           '{"order":"A-17","status":"shipped"}')
    assert outcome(agent_run["local"]) == ("answered", [(0, "stock", {"sku": "X9"}, "ok")], '{"sku":"X9","left":3}')


@pytest.mark.parametrize("case, name, arguments, kind, told", [
    ("slow", "slow", {}, "timeout", "error: tool slow did not answer within 0.3 s"),
    ("broken", "broken", {}, "tool_error", "error: tool broken failed: RuntimeError: the inventory service is down"),
    ("malformed", "get_weather", None, "malformed_arguments", "error: the arguments are not valid JSON ("),
    ("noarg", "get_weather", {"town": "Rome"}, "malformed_arguments", "error: missing required argument(s) city; "
                                                                      "call get_weather again with valid arguments"),
    ("extra", "lookup_order", {"order_id": "A-1", "rush": True}, "malformed_arguments",
     "error: the arguments do not fit lookup_order (got an unexpected keyword argument 'rush'); call it again"),
    ("unknown", "get_wether", {"city": "Oslo"}, "unknown_tool",
     "error: unknown tool 'get_wether'; available: get_weather, lookup_order, stock, slow, broken"),
])
def test_what_a_call_gets_wrong_is_a_recorded_outcome_the_model_is_told_about(agent_run, case, name, arguments, kind,
                                                                                 told):
    cand = agent_run[case]
    ended, calls, result = outcome(cand)
    assert cand.ok and ended == "answered" and calls == [(0, name, arguments, kind)], (cand.error, cand.trajectory)
    assert result.startswith(told) and cand.transcript[3]["content"] == result
    assert cand.output.endswith(f"[tools: {result}]")  # the model heard what went wrong, and answered
    if case == "malformed":
        assert cand.trajectory[0]["raw_arguments"] == '{"city": Par'


def test_a_model_still_calling_tools_after_max_steps_ends_the_loop_without_an_error(agent_run):
    cand = agent_run["loop"]
    ended, calls, _result = outcome(cand)
    assert cand.ok and cand.error is None and ended == "max_steps"
    assert calls == [(step, "get_weather", {"city": "Oslo"}, "ok") for step in range(3)]
    assert [m["role"] for m in cand.transcript][-2:] == ["assistant", "tool"] and cand.output == ""
    assert cand.usage.calls == 3 and [t["step"] for t in cand.turns] == [0, 1, 2]


def test_a_coroutine_tool_is_awaited_and_cut_off_at_its_timeout(tmp_path, fake, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")

    async def ask_later(q):
        await asyncio.sleep(0 if q == "fast" else 30)
        return f"answer to {q}"

    register_tool("ask_later", ask_later)
    tool = {"name": "ask", "parameters": {"type": "object", "properties": {"q": {}}}, "function": "ask_later",
            "timeout_s": 0.3}
    fake.configure(tool_calls=[{"match": "FAST", "name": "ask", "arguments": {"q": "fast"}},
                               {"match": "LATE", "name": "ask", "arguments": {"q": "late"}}])
    run = collect(write(tmp_path / "c.yaml", fake.url, tools=[tool], scenarios=inline({"q": "FAST"}, {"q": "LATE"}),
                        prompts=[{"id": "a", "version": "v1", "user": "{q}", "tools": ["ask"]}]))
    found = candidates(run)
    assert [outcome(found[f"a/{n}"])[1][0][3] for n in (0, 1)] == ["ok", "timeout"]
    assert found["a/0"].trajectory[0]["result"] == "answer to fast"
