"""A run killed (SIGKILL) while a later turn of a conversation is in flight resumes at the first unanswered turn
of each conversation: every reply a later request carried was in the response cache, with its cost, before that
request was sent; no completed turn is paid twice (its replay knows what it cost, and the resumed record counts it
once: the killed run recorded nothing of it), and the journal counts the turn that was in flight. The stages run in a
child process (``started_stages``), killed for real, then resume in this one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench.core.journal import recorded_repeats
from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.in_process import run_stages
from tests.collect.dialogues import inline
from tests.staged import started_stages

N_CONVERSATIONS, N_TURNS = 4, 3
PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def test_a_killed_conversation_resumes_without_paying_a_finished_turn_again(tmp_path, fake):
    fake.configure(latency_ms=300)
    chat = {"id": "chat", "version": "v1", "system": "be brief",
            "turns": ["Hi, I am {persona}.", "Give me one tip.", "Make it shorter."]}
    params = grids.grid(tmp_path / "k.yaml", fake.url, name="k", prompts=[chat],
                        models=[grids.model("m1", fake.url, price=PRICE)],
                        scenarios=inline(*({"persona": f"p{n}"} for n in range(N_CONVERSATIONS))),
                        limits={"max_concurrency": 2, "timeout_s": 10, "retries": 0})
    with started_stages(tmp_path, params) as proc:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # a later turn was sent (its history in the cache), one in flight
            stats = fake.stats()
            if stats["in_flight"] and any(later_turn(body) for body in stats["recent"]):
                break
            time.sleep(0.02)
        else:
            pytest.fail(f"no later turn reached the provider in 120 s: {fake.stats()['requests']} requests")
        proc.kill()  # SIGKILL
        proc.wait()
    assert 3 <= fake.stats()["requests"] < N_CONVERSATIONS * N_TURNS
    stored = cached_usage(tmp_path / "runs" / ".cache" / "responses")
    carried = {m["content"] for body in fake.stats()["recent"] for m in body["messages"] if m["role"] == "assistant"}
    assert carried and all(text in stored and stored[text]["cost_usd"] > 0 for text in carried), (carried, stored)
    fake.configure(latency_ms=0)
    resumed = run_stages(tmp_path, params)
    assert resumed.returncode == 0, resumed.log
    run_dir = tmp_path / "runs" / "k"
    done = [c for c in RunStore(run_dir).latest(Candidate).values() if c.ok]
    assert len(done) == N_CONVERSATIONS and all(c.ended == "turns_done" and len(c.turns) == N_TURNS for c in done)
    # a turn answered before the kill, whose conversation had no record, is replayed from the response cache and
    # counted by the resumed record, once, at what it cost (bench.core.journal: unclaimed): no turn is free
    turns = [t["usage"] for c in done for t in c.turns]
    assert all(not u["cached"] and u["calls"] >= 1 and u["cost_usd"] > 0 for u in turns), turns
    # every distinct turn request paid once, plus those in flight at the kill: the journal counts them as repaid, an
    # upper bound (a reply that came back just before the kill and was kept is counted, yet not asked again)
    repaid = recorded_repeats(run_dir)
    assert N_CONVERSATIONS * N_TURNS <= fake.stats()["requests"] <= N_CONVERSATIONS * N_TURNS + repaid
    # the requests in flight at the kill (the cap: two), and any that ended between the last look and the kill
    assert 1 <= repaid <= 2 * 2
    # every paid request is in a record, but those in flight at the kill (counted apart, at their reservation)
    assert fake.stats()["requests"] - repaid <= sum(u["calls"] for u in turns) <= fake.stats()["requests"]


def later_turn(body: dict) -> bool:
    """A request carrying an assistant message: its conversation persisted that answer before sending it. (Three
    requests seen is not that: with two in flight, the third may be another conversation's first turn, sent the
    moment a reply freed its slot, while that reply is still being written.)"""
    return any(m.get("role") == "assistant" for m in body.get("messages") or [])


def cached_usage(folder: Path) -> dict[str, dict]:
    """The usage stored with each reply text in a response cache folder (every complete line of every file)."""
    out = {}
    for path in folder.glob("*.jsonl"):
        data = path.read_bytes()
        for line in data[:data.rfind(b"\n") + 1].splitlines():
            entry = json.loads(line)
            out[entry["v"]["text"]] = entry["v"]["usage"]
    return out
