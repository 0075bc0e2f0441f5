"""Per-model caps hold across a sweep's parallel executions (`--jobs N` never multiplies a cap).

One sweep runs for real (`python -m bench sweep ... --jobs 3`: a driver, its lease server, three papermill
kernels) against the loopback fake provider, which counts requests in flight per model; each model and judge of
its grid has a cap of another kind (``max_concurrency``, ``rpm``, ``tpm``), and a pairwise judge's baseline cell
is in one execution only.
"""

import asyncio
import collections
import subprocess
import sys

import pytest

from bench.core.errors import ParamsError
from bench.config.params import load_sweep
from bench.models.ratelimit import Caps, LeaseServer, LocalLimiter, RemoteLimiter, estimate_tokens
from bench.core.records import Candidate, Judgment
from bench.core.store import RunStore
from bench.testing import grids
from bench.testing.fake_provider import FakeProvider
from bench.testing.grids import ROOT, generate, grid, judge, model, prompt

PROMPTS = [prompt("p", "Q {topic} {n}"), prompt("p", "Question about {topic} number {n}", version="v2"),
           prompt("q", "{topic} {n}?", system="be brief")]
DIMENSIONS = {"topic": ["a", "b", "c", "d"], "n": [1, 2, 3]}
ANSWERS = len(PROMPTS) * 12  # each model's: three cells of twelve scenarios, one cell in each execution


def capped_grid(tmp_path, url, models, dimensions, judges=None, cap=12, prompts=PROMPTS, window_s=60.0):
    """Write ``t.yaml``: these models (and judges) on the product of ``dimensions``, ``cap`` requests at a time,
    ``rpm``/``tpm`` windows of ``window_s``."""
    return grid(tmp_path / "t.yaml", url, name="t", models=models, prompts=prompts, scenarios=generate(**dimensions),
                judges=judges, limits={"max_concurrency": cap, "timeout_s": 20, "retries": 2,
                                       "rate_window_s": window_s})


def one_success_each(recs):
    counts = collections.Counter(r.id for r in recs if r.ok)
    return set(counts.values()) == {1} and all(r.ok for r in recs)


@pytest.fixture(scope="module")
def jobs3(tmp_path_factory, fake_server):
    """Sweep the capped grid with `--jobs 3`; return (its output, both providers' stats, candidates, judgments).

    The rpm model has a provider of its own, slower: rpm 12 per 3 s window (limits.rate_window_s), 1.1 s per
    request, so twelve starts in any window means at most twelve requests ever in flight at the provider (a request
    sent up to 1.9 s late on a loaded machine included). Three executions each keeping their own window would have
    two bursts of twelve overlap (three starts on a 3 s circle: two are within 1 s < 1.1 s)."""
    fake_server.reset()
    fake_server.configure(latency_ms=150,
                          replies=[{"match": "Compare the two responses", "content": "B is better. [[B>A]]"}])
    tmp, url = tmp_path_factory.mktemp("caps"), fake_server.url
    try:
        with FakeProvider(latency_ms=1100) as slow:
            models = [model("m1", url, name="fake-a", max_concurrency=2, params={"max_tokens": 8}),
                      model("m2", url, name="fake-b", max_concurrency=2),
                      model("m3", slow.url, name="fake-r", rpm=12),
                      # each request is charged ~102 tokens before it is sent (prompt chars / 4 + max_tokens 100),
                      # so a 300-token budget admits two at a time sweep-wide; the fake's replies then count ~6
                      # tokens, which frees the rest of the budget (were the estimate kept, 36 requests would need
                      # 18 windows)
                      model("m4", url, name="fake-t", tpm=300, params={"max_tokens": 100})]
            judges = [judge("grader", url, name="fake-judge", max_concurrency=4),
                      judge("arena", url, rubric="arena-pairwise", name="fake-arena", baseline="m1/p@v1")]
            params = capped_grid(tmp, url, models, DIMENSIONS, judges, cap=24, window_s=3.0)
            out = grids.sweep(tmp, params, "--jobs", "3", timeout=600)  # three executions on a loaded 2-core machine
            stats, slow_stats = fake_server.stats(), slow.stats()
    finally:
        fake_server.reset()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    store = RunStore(tmp / "runs" / "t")
    return out, stats, slow_stats, store.read(Candidate), store.read(Judgment)


def test_model_and_judge_concurrency_caps_hold_across_three_executions(jobs3):
    out, stats, _, cands, judgments = jobs3
    assert "collect.job3: ok" in out.stdout  # three executions side by side, each with a cell of every model
    peaks = stats["peak_in_flight_by_model"]
    assert (peaks["fake-a"], peaks["fake-b"], peaks["fake-judge"]) == (2, 2, 4)  # used, never exceeded
    graded = [j for j in judgments if j.judge_id == "grader"]
    assert one_success_each(cands) and one_success_each(graded)
    assert len(cands) == 4 * ANSWERS and len(graded) == 4 * ANSWERS
    # exactly one request per candidate, and per judgment not answered by the response cache
    asked = [j for j in graded if not j.usage.cached]
    assert 0 < len(asked) and not any(c.usage.cached for c in cands)
    assert {m: stats["by_model"][m] for m in ("fake-a", "fake-b", "fake-judge")} == \
        {"fake-a": ANSWERS, "fake-b": ANSWERS, "fake-judge": len(asked)}


def test_an_rpm_window_holds_across_three_executions(jobs3):
    _, _, stats, cands, _ = jobs3
    assert sum(c.model == "openai/fake-r" for c in cands) == ANSWERS and stats["by_model"] == {"fake-r": ANSWERS}
    assert stats["peak_in_flight_by_model"]["fake-r"] <= 12


def test_a_tpm_budget_holds_across_three_executions(jobs3):
    _, stats, _, cands, _ = jobs3
    capped = [c for c in cands if c.model == "openai/fake-t"]
    assert len(capped) == ANSWERS and stats["by_model"]["fake-t"] == ANSWERS
    assert stats["peak_in_flight_by_model"]["fake-t"] <= 2
    assert all(c.usage.prompt_tokens + c.usage.completion_tokens < 20 for c in capped)  # what the window kept


def test_pairwise_baseline_items_are_graded_once_whatever_the_jobs(jobs3):
    # twelve cells in three executions: the baseline's execution holds it, the others none of it
    _, stats, _, _, judgments = jobs3
    arena = [j for j in judgments if j.judge_id == "arena"]
    pairs = (4 * len(PROMPTS) - 1) * 12  # every cell but the baseline, on 12 scenarios (every pair a distinct request)
    assert one_success_each(arena) and len(arena) == 2 * pairs
    assert collections.Counter(j.order for j in arena) == {"AB": pairs, "BA": pairs}
    assert stats["by_model"]["fake-arena"] == 2 * pairs  # both orders, once each, per pair


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
