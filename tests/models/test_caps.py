"""Per-model caps hold across a sweep's parallel executions (`--jobs N` never multiplies a cap).

The sweeps run for real (`python -m bench sweep ... --jobs 3`: a driver, three papermill
kernels) against the loopback fake provider, which counts requests in flight per model.
"""

import asyncio
import collections
import subprocess
import sys
from functools import partial

import pytest

from bench.core.errors import ParamsError
from bench.config.params import load_sweep
from bench.models.ratelimit import Caps, LeaseServer, LocalLimiter, RemoteLimiter, estimate_tokens
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.grids import ROOT, generate, grid, judge, model, prompt

PROMPTS = [prompt("p", "Q {topic} {n}"), prompt("p", "Question about {topic} number {n}", version="v2"),
           prompt("q", "{topic} {n}?", system="be brief")]
sweep = partial(grids.sweep, timeout=600)  # three executions side by side on a loaded 2-core machine


def capped_grid(tmp_path, url, models, dimensions, judges=None, cap=12, prompts=PROMPTS, window_s=60.0):
    """Write ``t.yaml``: these models (and judges) on the product of ``dimensions``, ``cap`` requests at a time,
    ``rpm``/``tpm`` windows of ``window_s``."""
    return grid(tmp_path / "t.yaml", url, name="t", models=models, prompts=prompts, scenarios=generate(**dimensions),
                judges=judges, limits={"max_concurrency": cap, "timeout_s": 20, "retries": 2,
                                       "rate_window_s": window_s})


def records(tmp_path, kind):
    return RunStore(tmp_path / "runs" / "t").read(kind)


def one_success_each(recs):
    counts = collections.Counter(r.id for r in recs if r.ok)
    return set(counts.values()) == {1} and all(r.ok for r in recs)


# -- through the real path: bench sweep --jobs 3 ---------------------------------------------------
def test_model_and_judge_concurrency_caps_hold_across_three_executions(tmp_path, fake):
    fake.configure(latency_ms=150)
    models = [model("m1", fake.url, name="fake-a", max_concurrency=2, params={"max_tokens": 8}),
              model("m2", fake.url, name="fake-b", max_concurrency=2)]
    judges = [judge("grader", fake.url, name="fake-judge", max_concurrency=2)]
    params = capped_grid(tmp_path, fake.url, models, {"topic": ["a", "b", "c", "d", "e"], "n": [1, 2]}, judges)
    result = sweep(tmp_path, params, "--jobs", "3")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "collect.job3: ok" in result.stdout  # three executions side by side, each with both models
    stats = fake.stats()
    assert stats["peak_in_flight_by_model"] == {"fake-a": 2, "fake-b": 2, "fake-judge": 2}  # used, never exceeded
    cands, judgments = records(tmp_path, Candidate), records(tmp_path, Judgment)
    assert one_success_each(cands) and one_success_each(judgments)
    assert len(cands) == 60 and len(judgments) == 60
    # exactly one request per candidate, and per judgment not answered by the response cache (the fake's
    # answer depends on the messages only, so m1 and m2 give the same answer to a prompt: one grading serves both)
    asked = [j for j in judgments if not j.usage.cached]
    assert 0 < len(asked) and not any(c.usage.cached for c in cands)
    assert stats["by_model"] == {"fake-a": 30, "fake-b": 30, "fake-judge": len(asked)}


def test_an_rpm_window_holds_across_three_executions(tmp_path, fake):
    # rpm 4 per 1 s window (limits.rate_window_s), 0.4 s per request: four starts in any window means at most
    # four requests ever in flight at the provider. Three executions each keeping their own window would
    # have two bursts of four overlap (three starts on a 1 s circle: two are within 1/3 s < 0.4 s).
    fake.configure(latency_ms=400)
    models = [model("m1", fake.url, name="fake-r", rpm=4)]
    params = capped_grid(tmp_path, fake.url, models, {"topic": ["a", "b", "c", "d"], "n": [1, 2, 3]},
                         window_s=1.0)
    result = sweep(tmp_path, params, "--jobs", "3")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    stats = fake.stats()
    cands = records(tmp_path, Candidate)
    assert len(cands) == 36 and one_success_each(cands) and stats["by_model"] == {"fake-r": 36}
    assert stats["peak_in_flight_by_model"]["fake-r"] <= 4


def test_a_tpm_budget_holds_across_three_executions(tmp_path, fake):
    # each request is charged ~102 tokens before it is sent (prompt chars / 4 + max_tokens 100), so a
    # 250-token budget admits two at a time sweep-wide; the fake's replies then count ~6 tokens, which
    # frees the rest of the budget (were the estimate kept, the 36 requests would need 15 windows).
    fake.configure(latency_ms=150)
    models = [model("m1", fake.url, name="fake-t", tpm=250, params={"max_tokens": 100})]
    params = capped_grid(tmp_path, fake.url, models, {"topic": ["a", "b", "c", "d"], "n": [1, 2, 3]},
                         window_s=1.0)
    result = sweep(tmp_path, params, "--jobs", "3")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    stats = fake.stats()
    cands = records(tmp_path, Candidate)
    assert len(cands) == 36 and one_success_each(cands) and stats["by_model"] == {"fake-t": 36}
    assert stats["peak_in_flight_by_model"]["fake-t"] <= 2
    assert all(c.usage.prompt_tokens + c.usage.completion_tokens < 20 for c in cands)  # what the window kept


def test_pairwise_baseline_items_are_graded_once_whatever_the_jobs(tmp_path, fake):
    # four cells in three executions: the baseline's execution holds one more cell, the others none of it
    fake.configure(replies=[{"match": "Compare the two responses", "content": "B is better. [[B>A]]"}])
    models = [model("m1", fake.url, name="fake-a")]
    judges = [judge("arena", fake.url, rubric="arena-pairwise", name="fake-arena", baseline="m1/p@v1")]
    prompts = [*PROMPTS, prompt("r", "Tell me about {topic}, {n}")]
    params = capped_grid(tmp_path, fake.url, models, {"topic": ["a", "b", "c"], "n": [1, 2]}, judges,
                          prompts=prompts)
    result = sweep(tmp_path, params, "--jobs", "3")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    judgments = records(tmp_path, Judgment)
    pairs = 3 * 6  # every cell but the baseline, on 6 scenarios (every pair a distinct request)
    assert one_success_each(judgments) and len(judgments) == 2 * pairs
    assert collections.Counter(j.order for j in judgments) == {"AB": pairs, "BA": pairs}
    assert fake.stats()["by_model"]["fake-arena"] == 2 * pairs  # both orders, once each, per pair


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["models", "judges"])
def test_a_tpm_no_request_fits_is_refused_naming_the_key(tmp_path, where):
    bad = {"tpm": 50, "params": {"max_tokens": 100}}
    url = "http://127.0.0.1:9/v1"
    models = [model("m1", url, name="x", **(bad if where == "models" else {}))]
    judges = [judge("j", url, name="y", **bad)] if where == "judges" else None
    params = capped_grid(tmp_path, url, models, {"topic": ["a"], "n": [1]}, judges)
    with pytest.raises(ParamsError) as err:
        load_sweep(params)
    message = str(err.value)
    assert "\n" not in message
    assert f"{where}[0]: tpm: 50 tokens per minute is less than one request's params.max_tokens (100)" in message


# -- the limiter and its lease server --------------------------------------------------------------
def test_a_tpm_window_charges_the_estimate_then_the_real_tokens():
    async def go():
        limiter = LocalLimiter(window_s=3600)  # nothing leaves the window during the test
        caps = Caps(tpm=150)
        first = await limiter.acquire("m", caps, estimate=100)
        second = asyncio.ensure_future(limiter.acquire("m", caps, estimate=100))
        await asyncio.sleep(0)
        assert not second.done()  # 100 + 100 > 150
        limiter.release(first, tokens=10)  # the reply said 10: 10 + 100 fits
        await asyncio.wait_for(second, 10)

    asyncio.run(go())
    body = {"messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 7}
    assert estimate_tokens(body) == 10 + 7


CLIENT = """
import asyncio, sys
from bench.models.ratelimit import Caps, RemoteLimiter

async def main():
    await RemoteLimiter(sys.argv[1]).acquire("m @ x", Caps(max_concurrency=1))
    print("held", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def test_a_lease_held_by_a_killed_process_is_released():
    with LeaseServer(window_s=60) as server:
        child = subprocess.Popen([sys.executable, "-c", CLIENT, server.address], cwd=ROOT,
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "held"

            async def go():
                waiting = asyncio.ensure_future(RemoteLimiter(server.address).acquire("m @ x", Caps(max_concurrency=1)))
                done, _ = await asyncio.wait({waiting}, timeout=0.3)
                assert not done  # the child holds the only slot
                child.kill()
                await asyncio.wait_for(waiting, 30)  # its connection closed: the slot is free

            asyncio.run(go())
        finally:
            child.kill()
            child.wait()
