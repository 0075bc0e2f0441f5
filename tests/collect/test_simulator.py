"""The simulated user: seeded and cached, so the same grid says the same things again; its own cost line; the
conversation ends at max_turns, at stop_when, or when it says it is done, and the record says which."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.collect.dialogues import candidates, collect, inline, use_runs, write

SCENARIOS = inline({"topic": "tea"}, {"topic": "maps"})


def support(url: str, **simulator) -> dict:
    """Return a prompt whose simulated user (model ``sim`` on the fake) continues from the seed ``{topic}`` message."""
    return {"id": "support", "version": "v1", "system": "You are a support agent.", "user": "I have a question about "
            "{topic}.", "user_simulator": {"id": "customer", "model": "openai/sim", "api_base": url,
                                           "instructions": "You are a customer asking about {topic}.", **simulator}}


def dialogue(tmp_path: Path, monkeypatch, url: str, runs: str, seed: int = 1, samples: int = 2, **simulator) -> dict:
    """Collect the support prompt in a fresh run folder and response cache; return its candidates."""
    use_runs(monkeypatch, tmp_path / runs)
    params = write(tmp_path / f"{runs}.yaml", url, prompts=[support(url, **simulator)], scenarios=SCENARIOS,
                   seed=seed, samples=samples)
    return candidates(collect(params))


def test_the_same_grid_says_the_same_things_again_and_the_simulator_has_its_own_line(tmp_path, fake, monkeypatch):
    first = dialogue(tmp_path, monkeypatch, fake.url, "one", max_turns=3)
    asked = fake.stats()
    again = dialogue(tmp_path, monkeypatch, fake.url, "two", max_turns=3)  # a fresh run folder and cache
    assert fake.stats()["requests"] == 2 * asked["requests"] == 2 * 4 * (3 + 2)  # 4 dialogues: 3 model + 2 simulator
    assert {k: c.transcript for k, c in first.items()} == {k: c.transcript for k, c in again.items()}
    cand = first["support/0"]
    simulated = [m for m in cand.transcript if m.get("simulated")]
    assert cand.ended == "max_turns" and len(simulated) == 2 and cand.output == cand.transcript[-1]["content"]
    assert [m["role"] for m in cand.transcript] == ["system", "user", "assistant", "user", "assistant", "user",
                                                    "assistant"]
    assert cand.transcript[3]["content"].startswith("fake answer") and "[turn 2:" in cand.transcript[4]["content"]
    by = [(t["turn"], t["by"]) for t in cand.turns]
    assert by == [(1, "model"), (1, "simulator"), (2, "model"), (2, "simulator"), (3, "model")]
    assert cand.usage.calls == 3 and cand.simulator_usage.calls == 2
    assert asked["by_model"] == {"m1": 12, "sim": 8}
    # the simulator saw the talk with the roles flipped, under its instructions, seeded by the sweep's seed + sample
    sim_bodies = [b for b in asked["recent"] if b["model"] == "sim"]
    last = next(b for b in sim_bodies if "maps" in b["messages"][0]["content"] and len(b["messages"]) == 5
                and b["seed"] == 2)
    assert [m["role"] for m in last["messages"]] == ["system", "assistant", "user", "assistant", "user"]
    assert last["messages"][0]["content"] == "You are a customer asking about maps."
    assert last["messages"][1]["content"] == "I have a question about maps."
    assert {b["seed"] for b in sim_bodies} == {1, 2}  # samples 0 and 1 (the fake answers alike: its replies ignore seeds)


def test_another_seed_gives_another_dialogue(tmp_path, fake, monkeypatch):
    # the fake provider answers a request whatever its seed, so the simulator here is the dry model, whose reply
    # is drawn from its request (its seed included): a seed the simulator is given changes what it says
    kw = {"model": "dry/sim", "api_base": None, "max_turns": 2, "params": {"max_tokens": 30}}
    one = dialogue(tmp_path, monkeypatch, fake.url, "s1", seed=1, samples=1, **kw)
    same = dialogue(tmp_path, monkeypatch, fake.url, "s1-again", seed=1, samples=1, **kw)
    other = dialogue(tmp_path, monkeypatch, fake.url, "s2", seed=2, samples=1, **kw)
    said = lambda found: [m["content"] for m in found["support/0"].transcript if m.get("simulated")]  # noqa: E731
    assert said(one) == said(same) and len(said(one)) == 1
    assert said(one) != said(other)
    assert one["support/0"].id != other["support/0"].id  # the seed shapes the dialogue: another candidate


@pytest.mark.parametrize("simulator, ended, assistant_turns", [
    ({"max_turns": 2}, "max_turns", 2),
    ({"max_turns": 6, "stop_when": r"\[turn 2:"}, "stop_when", 2),
    ({"max_turns": 6, "instructions": "DONE-PERSONA: you are happy at once ({topic})."}, "user_done", 1),
])
def test_a_conversation_ends_at_max_turns_at_stop_when_or_when_the_user_is_done(tmp_path, fake, monkeypatch, simulator,
                                                                                 ended, assistant_turns):
    fake.configure(replies=[{"match": "DONE-PERSONA", "content": "Great, that is all. [DONE]"}])
    found = dialogue(tmp_path, monkeypatch, fake.url, "e", samples=1, **simulator)
    for cand in found.values():
        assert cand.ok and cand.ended == ended
        assert sum(m["role"] == "assistant" for m in cand.transcript) == assistant_turns
        if ended == "user_done":
            assert cand.transcript[-1] == {"role": "user", "content": "Great, that is all. [DONE]", "simulated": True}
            assert cand.output == cand.transcript[-2]["content"]
        else:
            assert cand.transcript[-1]["role"] == "assistant"
