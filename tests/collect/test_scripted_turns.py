"""Scripted turns and written histories: each turn is its own request with the full history, the candidate holds
the transcript, per-turn and total usage, and its output is the last assistant message; a failed turn is asked
afresh on resume while the turns before it replay from the response cache."""

from __future__ import annotations

import pytest

from bench.core.spend import recorded_spend
from tests.collect.dialogues import candidates, collect, every, inline, use_runs, write

TURNS = ["Hi, I am {persona}.", "Give me one tip.", "Make it shorter."]
CHAT = {"id": "chat", "version": "v1", "system": "be brief", "turns": TURNS}
PRICE = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}  # $0.001 per (fake) token
HISTORY = {"id": "convo", "version": "v1", "messages": [
    {"role": "system", "content": "You explain {persona}'s choices."}, {"role": "user", "content": "I chose {pick}."},
    {"role": "assistant", "content": "A fine choice."}, {"role": "user", "content": "Why?"}]}


@pytest.fixture
def runs(tmp_path, monkeypatch):
    use_runs(monkeypatch, tmp_path / "runs")


def bodies(fake, last: str) -> list[list[dict]]:
    """Return the messages of every request the fake received whose last message says ``last``."""
    return [b["messages"] for b in fake.stats()["recent"] if b["messages"][-1]["content"] == last]


def test_each_turn_is_answered_with_the_whole_history_and_the_candidate_holds_the_transcript(tmp_path, fake, runs):
    params = write(tmp_path / "c.yaml", fake.url, prompts=[CHAT], scenarios=inline({"persona": "Ann"}, {"persona": "Bo"}),
                   models=[{"id": "m1", "model": "openai/m1", "api_base": fake.url, "price": PRICE}])
    run = collect(params)
    assert fake.stats()["requests"] == 6  # 2 conversations × 3 turns
    for n, persona in enumerate(["Ann", "Bo"]):
        cand = candidates(run)[f"chat/{n}"]
        assert cand.ok and cand.ended == "turns_done" and cand.trajectory is None and cand.simulator_usage is None
        said = [(m["role"], m["content"]) for m in cand.transcript]
        assert [r for r, _c in said] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
        assert [c for r, c in said if r == "user"] == [f"Hi, I am {persona}.", TURNS[1], TURNS[2]]
        assert said[4][1].endswith(" [turn 2: Give me one tip.]")  # the fake echoes the history it was sent
        assert said[6][1].endswith(" [turn 3: Make it shorter.]") and cand.output == said[6][1]
        assert cand.messages == cand.transcript[:2]  # the first request
        last = [b for b in bodies(fake, "Make it shorter.") if b[1]["content"] == f"Hi, I am {persona}."]
        assert last == [[{"role": r, "content": c} for r, c in said[:6]]]  # turn 3 was asked with all that came before
        assert [(t["turn"], t["step"], t["by"]) for t in cand.turns] == [(1, 0, "model"), (2, 0, "model"), (3, 0, "model")]
        parts = [t["usage"] for t in cand.turns]
        assert all(u["calls"] == 1 and not u["cached"] and u["latency_s"] is not None for u in parts)
        assert cand.usage.calls == 3
        for name in ("prompt_tokens", "completion_tokens", "cost_usd"):
            assert getattr(cand.usage, name) == pytest.approx(sum(u[name] for u in parts))
        assert parts[2]["prompt_tokens"] > parts[1]["prompt_tokens"] > parts[0]["prompt_tokens"]  # the history grows
    assert recorded_spend(run.dir).usd == pytest.approx(sum(c.usage.cost_usd for c in candidates(run).values()))
    again = collect(params)
    assert fake.stats()["requests"] == 6 and len(every(again)) == 2  # done: nothing asked, nothing written


def test_a_written_history_is_one_request_answering_its_last_user_turn(tmp_path, fake, runs):
    run = collect(write(tmp_path / "m.yaml", fake.url, prompts=[HISTORY], scenarios=inline({"persona": "Cy", "pick": "tea"})))
    cand = candidates(run)["convo/0"]
    sent = [{"role": "system", "content": "You explain Cy's choices."}, {"role": "user", "content": "I chose tea."},
            {"role": "assistant", "content": "A fine choice."}, {"role": "user", "content": "Why?"}]
    assert fake.stats()["requests"] == 1 and bodies(fake, "Why?") == [sent]
    assert cand.ok and cand.ended == "turns_done" and cand.messages == sent
    assert cand.transcript == [*sent, {"role": "assistant", "content": cand.output}]
    assert cand.output.endswith(" [turn 2: Why?]") and len(cand.turns) == 1


def test_a_failed_turn_is_asked_again_on_resume_and_the_turns_before_it_replay_from_the_cache(tmp_path, fake, runs):
    params = write(tmp_path / "f.yaml", fake.url, prompts=[CHAT], scenarios=inline({"persona": "Ann"}))
    fake.configure(replies=[{"match": "Make it shorter.", "status": 500}])
    failed = candidates(collect(params))["chat/0"]
    assert not failed.ok and failed.error_kind == "server" and failed.attempt == 1 and failed.output is None
    assert [m["content"] for m in failed.transcript][-1] == "Make it shorter."  # the transcript so far
    assert [t["turn"] for t in failed.turns] == [1, 2, 3] and failed.usage.calls == 3 and failed.ended is None
    assert fake.stats()["requests"] == 3
    fake.configure(replies=[])
    run = collect(params)
    done = candidates(run)["chat/0"]
    assert done.ok and done.attempt == 2 and done.ended == "turns_done"
    assert fake.stats()["requests"] == 4  # only the failed turn was asked again: the attempt keys no turn
    assert [(t["usage"]["cached"], t["usage"]["calls"]) for t in done.turns] == [(True, 0), (True, 0), (False, 1)]
    assert done.transcript[:5] == failed.transcript[:5] and done.usage.calls == 1 and done.usage.cache_hits == 2
