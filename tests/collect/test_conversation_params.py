"""Conversation and tool keys in a params file: every mistake is a ParamsError naming the file, the prompt and the key,
found before any request; a one-reply prompt keeps its content hash (its candidates' ids)."""

from __future__ import annotations

import asyncio
import copy

import pytest
import yaml

from bench.config.params import load_sweep
from bench.core.errors import ParamsError
from bench.run import open_run
from bench.stage_runs import run_collect
from tests.collect.dialogues import WEATHER, inline, use_runs, write

TURNS = {"id": "chat", "version": "v1", "system": "be brief", "turns": ["Hi, I am {topic}.", "One tip.", "Shorter."]}
AGENT = {"id": "agent", "version": "v1", "user": "Weather for {topic}?", "tools": ["get_weather"]}
SIM = {"model": "openai/sim", "instructions": "You are {topic}.", "max_turns": 2}


def refused(tmp_path, url, **overrides) -> str:
    """Return the ParamsError message of loading a params file written with ``overrides``."""
    path = write(tmp_path / "bad.yaml", url, **overrides)
    with pytest.raises(ParamsError) as caught:
        load_sweep(path)
    message = str(caught.value)
    assert str(path) in message, message
    return message


@pytest.mark.parametrize("prompt, says", [
    ({**TURNS, "user": "{topic}"}, "prompts[0]: prompt chat@v1: give exactly one of user, turns, messages (got user and "
                                   "turns)"),
    ({"id": "none", "version": "v1", "system": "x"}, "prompt none@v1: give exactly one of user, turns, messages (got none)"),
    ({**TURNS, "user_simulator": SIM}, "prompt chat@v1: user_simulator continues from a seed: give user"),
    ({"id": "p", "version": "v1", "user": "{topic}", "max_steps": 3}, "prompt p@v1: max_steps bounds a tool loop: give "
                                                                      "tools too"),
    ({"id": "m", "version": "v1", "messages": [{"role": "user", "content": "{topic}"}, {"role": "assistant",
                                                                                        "content": "ok"}]},
     "prompt m@v1: messages: the last message must be a user turn"),
    ({"id": "m", "version": "v1", "messages": [{"role": "robot", "content": "{topic}"}]}, "prompts[0].messages[0].role"),
    ({**TURNS, "turns": ["{topic"]}, "prompts[0].turns: invalid template"),
    ({**AGENT, "tools": ["get_weather", "get_weather"]}, "prompt agent@v1: tools: get_weather listed twice"),
    ({"id": "s", "version": "v1", "user": "{topic}", "user_simulator": {**SIM, "stop_when": "(unclosed"}},
     "prompts[0].user_simulator.stop_when: not a valid regular expression"),
])
def test_a_prompt_of_no_known_shape_is_refused_naming_the_prompt_and_the_key(tmp_path, fake, prompt, says):
    assert says in refused(tmp_path, fake.url, prompts=[prompt], tools=[WEATHER])


def test_an_unknown_tool_name_names_the_prompt_the_tool_and_the_tools_declared(tmp_path, fake):
    message = refused(tmp_path, fake.url, prompts=[{**AGENT, "tools": ["get_wether"]}], tools=[WEATHER])
    assert "prompts[0] (agent@v1): tools: unknown tool 'get_wether'; the params file's tools: get_weather" in message
    assert "add a top-level tools: list" in refused(tmp_path, fake.url, prompts=[AGENT])


@pytest.mark.parametrize("tool, says", [
    ({**WEATHER, "function": "tools_mod:weather"}, "tools[0]: tool get_weather: give result (a template) or function"),
    ({**WEATHER, "parameters": {"type": "string"}}, 'tools[0].parameters: must be the JSON schema of an object'),
    ({**WEATHER, "parameters": {"type": "object", "properties": {}, "required": ["city"]}},
     '"required" must list names of "properties"'),
    ({**WEATHER, "name": "get.weather"}, "tools[0].name: must be 1–64 letters, digits, '_' or '-'"),
    ({**WEATHER, "function": "not a callable!", "result": None}, "neither module:attr"),
    ({**WEATHER, "result": "Weather in {city"}, "tools[0].result: invalid template"),
    ({**WEATHER, "colour": "red"}, "tools[0].colour: unknown key 'colour' (allowed: name, description, parameters"),
])
def test_a_bad_tool_is_refused_naming_the_key(tmp_path, fake, tool, says):
    assert says in refused(tmp_path, fake.url, prompts=[AGENT], tools=[tool])


def test_two_tools_of_one_name_are_refused(tmp_path, fake):
    assert "duplicate tool name get_weather" in refused(tmp_path, fake.url, prompts=[AGENT], tools=[WEATHER, WEATHER])


def test_every_template_of_a_conversation_is_checked_against_every_scenario(tmp_path, fake, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    prompts = [{**TURNS, "turns": ["Hi {topic}.", "I am {persona}."]},
               {"id": "s", "version": "v1", "user": "{topic}", "user_simulator": {**SIM, "instructions": "Be {mood}."}},
               {"id": "m", "version": "v1", "messages": [{"role": "user", "content": "{topic} {era}"}]},
               {**AGENT, "user": "Weather?"}]
    path = write(tmp_path / "t.yaml", fake.url, prompts=prompts, tools=[WEATHER], scenarios=inline(
        {"topic": "a"}, {"topic": "b", "tool_results": {"get_weather": "Rain."}}))
    with pytest.raises(ParamsError) as caught:
        open_run(path)
    lines = str(caught.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    said = "\n".join(lines)
    assert "prompt chat@v1 uses {persona}, which scenario" in said
    assert "prompt s@v1 uses {mood}" in said and "prompt m@v1 uses {era}" in said
    # {city} is the call's argument; {weather} a field: scenario b overrides the tool, so only scenario a lacks it
    assert len([ln for ln in lines if "get_weather" in ln]) == 1, said
    assert "prompt agent@v1: tool get_weather's result uses {weather}, which is no argument of the tool and " \
           "scenario" in said and "tool_results.get_weather" in said


def test_a_tool_function_that_cannot_be_found_stops_collect_before_any_request(tmp_path, fake, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    tools = [{**WEATHER, "result": None, "function": "never_registered_tool"},
             {**WEATHER, "name": "lookup", "result": None, "function": "no_such_module_xyz:lookup"}]
    path = write(tmp_path / "f.yaml", fake.url, prompts=[{**AGENT, "tools": ["get_weather", "lookup"]}], tools=tools)
    with pytest.raises(ParamsError) as caught:
        asyncio.run(run_collect(open_run(path), progress="none"))
    said = str(caught.value)
    assert f"{path}: prompt agent@v1: tool get_weather: function never_registered_tool is not registered in this " \
           f"process: call bench.register_tool('never_registered_tool', fn)" in said
    assert f"{path}: prompt agent@v1: tool lookup: function no_such_module_xyz:lookup cannot be loaded " \
           f"(ModuleNotFoundError" in said
    assert fake.stats()["requests"] == 0


def test_a_one_reply_prompt_hashes_as_before_and_a_conversation_hashes_what_shapes_it(tmp_path, fake):
    base = write(tmp_path / "h.yaml", fake.url, prompts=[{"id": "p", "version": "v1", "system": "be brief",
                                                          "user": "One tip about {topic}."}, AGENT,
                                                         {"id": "s", "version": "v1", "user": "{topic}",
                                                          "user_simulator": SIM}], tools=[WEATHER])
    plain, agent, sim = load_sweep(base)[0].prompts
    assert plain.content_hash == "0d2f63502f011bce1960"  # the hash of {system, user} before conversations existed
    data = yaml.safe_load(base.read_text())

    def hashes(change) -> list[str]:
        edited = copy.deepcopy(data)
        change(edited)
        path = tmp_path / "edited.yaml"
        path.write_text(yaml.safe_dump(edited))
        return [p.content_hash for p in load_sweep(path)[0].prompts]

    assert hashes(lambda d: None) == [plain.content_hash, agent.content_hash, sim.content_hash]
    new_result = hashes(lambda d: d["tools"][0].update(result="It is {weather} in {city}."))
    assert new_result == [plain.content_hash, new_result[1], sim.content_hash] and new_result[1] != agent.content_hash
    steps = hashes(lambda d: d["prompts"][1].update(max_steps=3))[1]
    assert steps != agent.content_hash and hashes(lambda d: d["prompts"][1].update(max_steps=8))[1] == agent.content_hash
    seeded = hashes(lambda d: d.update(seed=7))
    assert seeded[:2] == [plain.content_hash, agent.content_hash] and seeded[2] != sim.content_hash
    own_seed = hashes(lambda d: d["prompts"][2]["user_simulator"].update(params={"seed": 3}))[2]
    assert own_seed == hashes(lambda d: (d.update(seed=7), d["prompts"][2]["user_simulator"].update(
        params={"seed": 3})))[2]  # its params' seed: the sweep's seed no longer shapes the dialogue
