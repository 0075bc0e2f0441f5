"""`bench estimate` bounds conversations and agent loops (issue 31, point 5), against real sweeps on the fake provider.

The grid (tests.estimate.conversation_grid) runs every conversation to its bound: a script of 3 turns, a tool loop
whose model calls its tool at every step (max_steps 3), a simulated user that never says it is done (max_turns 3).
So the estimate's requests are exactly what the fake receives, per model, for the simulator and per judge (a
per_turn judge: one request per assistant turn), its input tokens an upper bound of what was billed, and the
simulator priced on its own line. A grid re-run under another name replays what the response cache holds (every
turn of a script and of a simulated user) and bounds only the rest (a tool loop past its first call). Under a
budget that hangs on how long the replies run, the pilot measures the simulated user too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing.in_process import command, run_stages
from tests.estimate.conversation_grid import BILL, SIM_MAX_TOKENS, TOOL_SCRIPT, conversation_grid

SIM_PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 4.0}  # the simulator's own price: its own line


def estimate_json(tmp_path: Path, params: Path) -> dict[str, dict]:
    out = command(tmp_path, "estimate", str(params), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    return {s["id"]: s for s in json.loads(out.stdout)["stages"]}


def billed(run_dir: Path) -> dict[str, dict[str, int]]:
    """Return the prompt and completion tokens the records say were sent, per model, simulator ("sim") and judge."""
    out: dict[str, dict[str, int]] = {}
    store = RunStore(run_dir)
    for rec in [*store.iter(Candidate), *store.iter(Judgment)]:
        parts = [(rec.model_id if isinstance(rec, Candidate) else rec.judge_id, rec.usage)]
        parts += [("sim", rec.simulator_usage)] if isinstance(rec, Candidate) and rec.simulator_usage else []
        for who, usage in parts:
            if usage is not None and not usage.cached:
                acc = out.setdefault(who, {"prompt": 0, "completion": 0})
                acc["prompt"] += usage.prompt_tokens or 0
                acc["completion"] += usage.completion_tokens or 0
    return out


def test_the_estimate_bounds_each_conversation_and_a_sweep_at_the_bound_sends_exactly_that(tmp_path, fake):
    fake.configure(tokenizer="cl100k", tool_calls=TOOL_SCRIPT, bill_per_mtok=BILL)
    params = conversation_grid(tmp_path / "conv.yaml", fake.url, sim_price=SIM_PRICE)
    est = estimate_json(tmp_path, params)
    assert fake.stats()["requests"] == 0
    assert [s["stage"] for s in est.values()] == ["collect", "simulator", "judge", "judge"]
    # 2 scenarios × (a script of 3 turns + a loop of 3 steps + 3 turns of a simulated dialogue)
    assert est["m1"]["requests"] == est["m1"]["to_send"] == 2 * (3 + 3 + 3)
    assert est["sim"]["requests"] == 2 * 2  # it speaks between two assistant turns
    assert est["per-turn"]["requests"] == 2 * (3 + 1 + 3) and est["whole"]["requests"] == 2 * 3
    assert est["m1"]["bounded_by"] == ("chat@v1 bounded by 3 scripted turns; agent@v1 bounded by max_steps 3; "
                                       "support@v1 bounded by max_turns 3")
    sim = est["sim"]
    assert sim["output_tokens_max"] == 4 * SIM_MAX_TOKENS
    assert sim["cost_usd_max"] == pytest.approx((sim["input_tokens"] * 1.0 + 4 * SIM_MAX_TOKENS * 4.0) / 1e6)
    text = command(tmp_path, "estimate", str(params)).stdout
    assert "support@v1 bounded by max_turns 3" in text and "max_turns - 1 of the simulator, on its own line" in text

    ran = run_stages(tmp_path, params)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    by_model = fake.stats()["by_model"]
    assert by_model == {"m1": 18, "simmy": 4, "per-turn": 14, "whole": 6}, "every conversation ran to its bound"
    sent = billed(tmp_path / "runs" / "conv")
    for stage, who in (("m1", "m1"), ("sim", "sim"), ("per-turn", "per-turn"), ("whole", "whole")):
        assert est[stage]["input_tokens"] >= sent[who]["prompt"], (stage, est[stage]["input_tokens"], sent[who])
        assert est[stage]["output_tokens_max"] >= sent[who]["completion"], (stage, sent[who])
    again = estimate_json(tmp_path, params)
    assert all(s["to_send"] == 0 and s["held"] == s["requests"] for s in again.values())
    assert again["m1"]["requests"] == 18 and again["sim"]["requests"] == 4, "held: the requests the records made"


def test_a_rerun_under_another_name_replays_the_cached_turns_and_bounds_only_the_rest(tmp_path, fake):
    fake.configure(tokenizer="cl100k", tool_calls=TOOL_SCRIPT)
    assert run_stages(tmp_path, conversation_grid(tmp_path / "conv.yaml", fake.url)).returncode == 0
    sent = fake.stats()["requests"]
    params = conversation_grid(tmp_path / "conv2.yaml", fake.url, name="conv2")  # a new run folder, the same cache
    est = estimate_json(tmp_path, params)
    # the scripts and the simulated dialogues replay whole; the tool loops replay their first call, then are bounded
    assert est["m1"]["cached"] == 2 * (3 + 1 + 3) and est["m1"]["to_send"] == 2 * 2
    assert est["sim"]["cached"] == est["sim"]["requests"] == 4 and est["sim"]["to_send"] == 0
    # the judges' requests of the replayed conversations are the very ones asked before: cached
    assert est["whole"]["to_send"] == est["whole"]["unknown"] == 2, "only the tool loops' grades cannot be looked up"
    assert est["per-turn"]["to_send"] == est["per-turn"]["unknown"] == 2
    assert run_stages(tmp_path, params).returncode == 0
    assert fake.stats()["requests"] - sent <= est["m1"]["to_send"], "the estimate is a bound"


def test_a_budget_pilots_the_simulator_too_when_its_reply_length_decides(tmp_path, fake):
    fake.configure(tokenizer="cl100k", tool_calls=TOOL_SCRIPT)
    probe = conversation_grid(tmp_path / "probe.yaml", fake.url, name="probe", judged=False)
    total = json.loads(command(tmp_path, "estimate", str(probe), "--json").stdout)["total"]
    floor, worst = total["cost_usd_min"], total["cost_usd_max"]
    assert floor < worst
    params = conversation_grid(tmp_path / "conv.yaml", fake.url, judged=False, pilot=1,
                               budget_usd=round(floor + 0.7 * (worst - floor), 9))
    ran = run_stages(tmp_path, params)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "a sweep first sends a pilot" in ran.stdout and "collect m1, simulator sim" in ran.stdout
    after = ran.stdout.split("estimate after the pilot", 1)[1].splitlines()
    assert [line for line in after if line.startswith("simulator") and "run folder" in line], ran.stdout[-3000:]
