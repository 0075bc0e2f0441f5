"""The shipped examples params/examples/agent-tools.yaml and simulated-user.yaml, end to end on the fake provider:
their models, judges and simulator pointed at the loopback server (with OpenAI's price, as for any self-hosted
endpoint, and short timeouts; grids, tools, scenarios and rubrics as shipped), swept in-process with its report. The fake's tool-call scripts make every model look the weather up and convert the currency, except
gpt-4.1-nano on the Oslo question, which books a flight instead: the agent rubric's trajectory checks must fail
on exactly those answers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.in_process import run_stages
from tests.repo import REPO

EXAMPLES = REPO / "params" / "examples"
PRICES = {"openai/gpt-4.1-mini": {"input_per_mtok": 0.4, "output_per_mtok": 1.6},
          "openai/gpt-4.1-nano": {"input_per_mtok": 0.1, "output_per_mtok": 0.4}}
TOOL_SCRIPT = [  # first match wins; `until`: the tool results already in the request's messages
    {"match": "Oslo", "model": "gpt-4.1-nano", "name": "book_flight", "arguments": {"city": "Oslo"}, "until": 1},
    {"match": "", "name": "get_weather", "arguments": {"city": "Lisbon"}, "until": 1},
    {"match": "", "name": "convert_currency", "arguments": {"amount": 500, "currency": "EUR"}, "until": 2},
]
STUDENT = "You play a Parcelio customer: a student"  # only in the simulator's instructions


def on_fake(tmp: Path, name: str, url: str) -> Path:
    """Write the example ``name`` with every endpoint on the fake provider at OpenAI's price into ``tmp``."""
    data = yaml.safe_load((EXAMPLES / name).read_text())
    entries = [*data["models"], *data["judges"]]
    entries += [p["user_simulator"] for p in data["prompts"] if "user_simulator" in p]
    for entry in entries:
        entry.update(api_base=url, price=PRICES[entry["model"]])
    data["limits"].update(timeout_s=20, retries=0)
    path = tmp / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def swept(tmp: Path, fake, name: str, **config) -> Path:
    fake.reset()
    fake.configure(**config)
    out = run_stages(tmp, on_fake(tmp, name, fake.url), report=True)
    assert out.returncode == 0, out.log
    return tmp


def records(tmp: Path, sweep_name: str, kind: type) -> list:
    return list(RunStore(tmp / "runs" / sweep_name).latest(kind).values())


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory, fake_server):
    return swept(tmp_path_factory.mktemp("agent"), fake_server, "agent-tools.yaml", tool_calls=TOOL_SCRIPT)


@pytest.fixture(scope="module")
def simulated_run(tmp_path_factory, fake_server):
    return swept(tmp_path_factory.mktemp("simulated"), fake_server, "simulated-user.yaml",
                 replies=[{"match": STUDENT, "content": "Thanks, that is all I needed. [DONE]"}])


def test_the_agent_grid_records_each_trajectory_and_the_tool_results_reach_the_model(agent_run):
    cands = records(agent_run, "example-agent-tools", Candidate)
    assert len(cands) == 20 and all(c.ok and c.ended == "answered" for c in cands)
    for c in cands:
        wrong = c.model_id == "gpt-4.1-nano" and "Oslo" in c.messages[-1]["content"]
        names = [t["name"] for t in c.trajectory]
        assert names == (["book_flight", "convert_currency"] if wrong else ["get_weather", "convert_currency"])
        assert all(t["outcome"] == "ok" for t in c.trajectory)
        city = re.search(r"(Lisbon|Tokyo|Oslo|Mexico City|Zurich)", c.messages[-1]["content"]).group(1)
        if not wrong:  # the result template: the call's city, the scenario's weather (Oslo: its override)
            assert c.trajectory[0]["result"].startswith("Tomorrow in Lisbon: ") or city == "Oslo"
        assert "500 USD = " in c.trajectory[-1]["result"] and "[tools: " in c.output  # the results were sent
        assert [t["step"] for t in c.turns] == [0, 1, 2] and c.usage.calls == 3


def test_the_trajectory_checks_fail_exactly_where_the_model_booked_a_flight(agent_run):
    cands = {c.id: c for c in records(agent_run, "example-agent-tools", Candidate)}
    judged = records(agent_run, "example-agent-tools", Judgment)
    assert len(judged) == 20 and all(j.ok for j in judged)
    failed = {j.candidate_ids[0] for j in judged
              if not all(r["passed"] for r in j.details["checks"])}
    booked = {cid for cid, c in cands.items() if c.trajectory[0]["name"] == "book_flight"}
    assert len(booked) == 2 and failed == booked  # gpt-4.1-nano on Oslo, under both system prompts
    for j in judged:
        no_booking = next(r for r in j.details["checks"] if r["id"] == "no-booking")
        assert no_booking["passed"] == (j.candidate_ids[0] not in booked)


def test_the_agent_report_folds_the_tool_calls(agent_run):
    html = (agent_run / "reports" / "example-agent-tools" / "index.html").read_text()
    assert "<details" in html and "book_flight" in html and "Tomorrow in Lisbon" in html


def test_the_simulated_user_grid_ends_each_conversation_as_recorded(simulated_run):
    cands = records(simulated_run, "example-simulated-user", Candidate)
    assert len(cands) == 16 and all(c.ok for c in cands)
    for c in cands:
        assistant = [m for m in c.transcript if m["role"] == "assistant"]
        if c.prompt_version == "scripted":
            assert c.ended == "turns_done" and len(assistant) == 3 and c.simulator_usage is None
        elif "student" in c.transcript[1]["content"] or "money back" in c.transcript[1]["content"]:
            assert c.ended == "user_done" and len(assistant) == 1  # the simulator said [DONE] at once
            assert c.transcript[-1] == {"role": "user", "content": "Thanks, that is all I needed. [DONE]",
                                        "simulated": True}
        else:
            assert c.ended == "max_turns" and len(assistant) == 6
            assert sum(m.get("simulated", False) for m in c.transcript) == 5
            assert c.simulator_usage.calls == 5 and c.simulator_usage.cost_usd > 0
    per_turn = [j for j in records(simulated_run, "example-simulated-user", Judgment) if j.judge_id == "turns"]
    expected = sum(len([m for m in c.transcript if m["role"] == "assistant"]) for c in cands)
    assert len(per_turn) == expected and all(j.ok and j.turn >= 1 for j in per_turn)
