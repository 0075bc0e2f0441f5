"""``limits.budget_usd`` stops a conversation between two requests, never inside one: the turns it paid for are
recorded (a failed candidate with the transcript so far and their spend), and the resume replays them for free."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from bench.core.errors import BudgetReached
from bench.core.spend import recorded_spend
from bench.run import open_run
from bench.stage_runs import run_collect
from tests.collect.dialogues import candidates, collect, every, inline, use_runs, write

PRICE = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}  # $0.001 per (fake) token
LONG_TURN = "Now read this and answer again: " + "lorem ipsum " * 200  # its request reserves ~$2.4 of prompt
CHAT = {"id": "chat", "version": "v1", "turns": ["Hi, I am {persona}.", LONG_TURN, "Thanks."]}


def billed(fake) -> float:
    return fake.stats()["billed"]["usd"]


def test_a_budget_stop_between_turns_records_the_paid_turns_and_the_resume_pays_only_the_rest(tmp_path, fake,
                                                                                             monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")
    fake.configure(bill_per_mtok={"input": 1000.0, "output": 1000.0})
    model = {"id": "m1", "model": "openai/m1", "api_base": fake.url, "price": PRICE, "params": {"max_tokens": 40}}
    params = write(tmp_path / "b.yaml", fake.url, models=[model], prompts=[CHAT], scenarios=inline({"persona": "Ann"}),
                   limits={"max_concurrency": 1, "timeout_s": 10, "retries": 0, "budget_usd": 0.5})
    run = open_run(params)
    with pytest.raises(BudgetReached):
        asyncio.run(run_collect(run, progress="none"))
    assert fake.stats()["requests"] == 1  # the first turn fitted; the second was never sent
    [stopped] = every(run)
    assert not stopped.ok and stopped.error_kind == "budget" and stopped.attempt == 1
    assert "the conversation's paid requests are kept, then the next one was not sent" in stopped.error
    assert [m["role"] for m in stopped.transcript] == ["user", "assistant", "user"]  # up to the turn not asked
    assert len(stopped.turns) == 1 and stopped.usage.calls == 1 and stopped.usage.cost_usd > 0
    assert recorded_spend(run.dir).usd == pytest.approx(billed(fake)) == pytest.approx(stopped.usage.cost_usd)

    data = yaml.safe_load(params.read_text())
    data["limits"]["budget_usd"] = 20.0
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    resumed = candidates(collect(params))["chat/0"]
    assert resumed.ok and resumed.attempt == 1 and resumed.ended == "turns_done"  # the stop was no try of it
    assert fake.stats()["requests"] == 3  # each turn asked once over both runs: the first replayed from the cache
    assert [t["usage"]["cached"] for t in resumed.turns] == [True, False, False]
    assert recorded_spend(run.dir).usd == pytest.approx(billed(fake))  # what the records say = what was billed


def test_a_conversation_the_budget_stopped_is_continued_once_the_budget_is_raised_whatever_max_attempts(
        tmp_path, fake, monkeypatch):
    """The failed record a budget stop writes (for the paid turns' spend) is no try of the conversation: with
    ``max_attempts: 1``, raising the budget and re-running still finishes it, paying only the turns not yet paid."""
    use_runs(monkeypatch, tmp_path / "runs")
    fake.configure(bill_per_mtok={"input": 1000.0, "output": 1000.0})
    model = {"id": "m1", "model": "openai/m1", "api_base": fake.url, "price": PRICE, "params": {"max_tokens": 40}}
    params = write(tmp_path / "b.yaml", fake.url, models=[model], prompts=[CHAT], scenarios=inline({"persona": "Ann"}),
                   limits={"max_concurrency": 1, "timeout_s": 10, "retries": 0, "budget_usd": 0.5,
                           "max_attempts": 1})
    run = open_run(params)
    with pytest.raises(BudgetReached):
        asyncio.run(run_collect(run, progress="none"))
    paid_before = fake.stats()["requests"]
    assert 1 <= paid_before < len(CHAT["turns"])
    data = yaml.safe_load(params.read_text())
    data["limits"]["budget_usd"] = 20.0
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    found = candidates(collect(params))["chat/0"]
    assert found.ok and found.ended == "turns_done", found.error
    assert fake.stats()["requests"] == len(CHAT["turns"])  # each turn paid once, across the stop
