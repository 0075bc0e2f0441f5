"""No billed money goes unrecorded after kills: a collect SIGKILLed twelve times, then finished, records at least
what the fake provider billed (every reply, and every request whose client hung up at a kill), and at most 1.5
times it; the requests in flight at the kills are estimated, and marked so in the records, `bench status`,
`bench estimate` and the budget.

Before the fix a request in flight at a kill counted at its reservation (max_tokens priced), even once the same
request was answered again: 12 kills recorded 1.52x the bill (2.12x against a fake that billed no hung-up request).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from bench.core.errors import BudgetReached
from bench.core.journal import Journal
from bench.core.records import Candidate
from bench.core.spend import LOST, recorded_spend
from bench.core.store import RunStore
from bench.models.budget import cache_holding, sweep_budget
from bench.models.cache import open_cache
from bench.testing import grids
from bench.models.eventloop import run as run_loop
from bench.monitor import status
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing import in_process
from bench.testing.in_process import command, run_stages

ITEMS, KILLS, CAP, LATENCY_MS = 80, 12, 4, 200
STEPS = (12, 5)  # requests between kills, in turn: one after the first records are written (0.5 s), one before
PRICE = {"input_per_mtok": 10.0, "output_per_mtok": 400.0}  # output-heavy, as most calls are
BILL = {"input": 10.0, "output": 400.0}
MAX_TOKENS = 8  # the fake's replies take 3-4: a reservation (the whole limit) is 3x a reply
COLLECT = ("import sys; from bench.models.eventloop import run; from bench.run import open_run; "  # a kernel's stage
           "from bench.stage_runs import run_collect; run(run_collect(open_run(sys.argv[1]), progress='none'))")


def kill_after(tmp_path, params, fake, step: int) -> None:
    """Run the collect stage in a process of its own; SIGKILL its group once ``step`` more requests reached the fake."""
    seen = fake.stats()["requests"]
    proc = subprocess.Popen([sys.executable, "-c", COLLECT, str(params)], cwd=grids.ROOT, start_new_session=True,
                            env=grids.env(tmp_path, drop=("BENCH_CACHE",)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while fake.stats()["requests"] < seen + step:
            assert proc.poll() is None, f"the collect ended before it could be killed: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "the collect sent no request in 120 s"
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()


def test_kills_leave_no_billed_reply_unrecorded(tmp_path, fake):
    fake.configure(latency_ms=LATENCY_MS, bill_per_mtok=BILL, bill_hung_up=True)  # bills replies nobody read
    entry = grids.model("m1", fake.url, price=PRICE, params={"max_tokens": MAX_TOKENS})
    params = grids.grid(tmp_path / "k.yaml", fake.url, name="k", topics=ITEMS, models=[entry],
                        limits={"max_concurrency": CAP, "timeout_s": 10, "retries": 0, "budget_usd": 100.0})
    for kill in range(KILLS):
        kill_after(tmp_path, params, fake, STEPS[kill % 2])
    run_dir = tmp_path / "runs" / "k"
    with in_process.environment(tmp_path, drop=("BENCH_CACHE",)):  # the last kill's in flight count at once too
        before = recorded_spend(run_dir, cache_holding(run_dir))
    assert before.lost_in_flight > 0, before
    estimate = command(tmp_path, "estimate", str(params), "--json", drop=("BENCH_CACHE",))
    assert estimate.returncode == 0, estimate.log
    assert json.loads(estimate.stdout)["budget"]["spent_estimated_usd"] == pytest.approx(before.lost_in_flight_usd)
    said = command(tmp_path, "estimate", str(params), drop=("BENCH_CACHE",)).stdout
    assert f"spent so far ${before.usd:.4f}{before.estimated_note()}" in said, said

    fake.configure(latency_ms=0)
    done = run_stages(tmp_path, params, stages=("collect",), drop=("BENCH_CACHE",))
    assert done.returncode == 0, done.log
    assert sum(c.ok for c in RunStore(run_dir).latest(Candidate).values()) == ITEMS
    bill, spend = fake.stats()["billed"], recorded_spend(run_dir)
    said = f"recorded ${spend.usd:.6f} against ${bill['usd']:.6f} billed: {spend}, {bill}"
    print(said)
    assert bill["replies"] > fake.stats()["statuses"]["200"], said  # it billed requests the kills cut: a real bound
    assert bill["usd"] - 1e-9 <= spend.usd <= 1.5 * bill["usd"], said
    assert spend.lost_in_flight >= KILLS and spend.lost_reserved == 0, said  # each answered again: at its cost

    claims = [a for c in RunStore(run_dir).iter(Candidate) for a in c.usage.paid_attempts or () if LOST in a]
    assert len(claims) == spend.lost_in_flight and all(a["estimated"] for a in claims), claims[:3]
    cache = open_cache(tmp_path / "runs" / ".cache" / "responses")
    for claim in claims:  # at the cost of the reply to the same request, which the cache holds as it was billed
        assert claim["cost_usd"] == pytest.approx(cache.get(claim[LOST])["usage"]["cost_usd"]), claim
    assert sum(a["cost_usd"] for a in claims) == pytest.approx(spend.lost_in_flight_usd)

    status = command(tmp_path, "status", str(run_dir))
    assert (f"spend: ${spend.usd:.4f} (of which ${spend.lost_in_flight_usd:.4f} estimated: {spend.lost_in_flight} "
            f"request(s) in flight at a kill, each at the cost of its repeat)") in status.stdout, status.stdout
    again = run_stages(tmp_path, params, stages=("collect",), drop=("BENCH_CACHE",))  # a second finish adds nothing
    assert again.returncode == 0 and recorded_spend(run_dir) == spend


def test_a_sweeps_shared_budget_starts_with_what_the_last_kill_left_in_flight(tmp_path, fake):
    """The lease server's budget is taken once, by the driver, before any kernel settles the killed processes'
    journals: requests a kill left in flight are settled there first, or the resumed sweep could spend them again.
    Until the same request is answered again each counts at its reservation, and the estimate and a budget refusal
    say so."""
    run_dir = tmp_path / "runs" / "k"
    journal = Journal(run_dir)
    journal.arm("a-request-no-cache-holds")
    journal.sent(0.25)  # its reservation: the most it could have cost
    journal.close(keep=True)  # as a SIGKILL leaves it
    limit, spent = sweep_budget(1.0, run_dir)
    assert (limit, spent) == (1.0, pytest.approx(0.25))
    spend = recorded_spend(run_dir)  # settled once: not counted again
    assert (spend.lost_in_flight, spend.lost_reserved, spend.lost_in_flight_usd) == (1, 1, pytest.approx(0.25))
    assert sweep_budget(1.0, run_dir) == (1.0, pytest.approx(0.25))

    note = ("(of which $0.2500 estimated: 1 request(s) in flight at a kill, all at their reservation until the same "
            "request is answered again)")
    entry = grids.model("m1", fake.url, price=PRICE, params={"max_tokens": MAX_TOKENS})
    params = grids.grid(tmp_path / "k.yaml", fake.url, name="k", topics=4, models=[entry],
                        limits={"max_concurrency": CAP, "timeout_s": 10, "retries": 0, "budget_usd": 0.251})
    said = command(tmp_path, "estimate", str(params), drop=("BENCH_CACHE",))
    assert f"spent so far $0.2500 {note}" in said.stdout, said.log
    with in_process.environment(tmp_path, drop=("BENCH_CACHE",)), pytest.raises(BudgetReached) as refused:
        run_loop(run_collect(open_run(str(params)), progress="none"))
    assert f"has spent $0.2500 {note}" in str(refused.value)
    assert fake.stats()["requests"] == 0


def test_a_kills_requests_in_flight_count_before_any_resume(tmp_path, fake):
    """Right after a kill, before any stage start settles its journal, `bench status`, the estimate and the run's
    spend already count the requests it left in flight at their reservation; a reply the cache holds is not one of
    them. Settling then changes no figure (counted once). Before, they appeared only once the next stage started."""
    entry = grids.model("m1", fake.url, price=PRICE, params={"max_tokens": MAX_TOKENS})
    params = grids.grid(tmp_path / "k.yaml", fake.url, name="k", topics=4, models=[entry],
                        limits={"max_concurrency": CAP, "timeout_s": 10, "retries": 0, "budget_usd": 100.0})
    assert run_stages(tmp_path, params, stages=("collect",), drop=("BENCH_CACHE",)).returncode == 0
    run_dir, paid = tmp_path / "runs" / "k", recorded_spend(tmp_path / "runs" / "k").usd
    cache = open_cache(tmp_path / "runs" / ".cache" / "responses")
    cache.put("a-reply-the-cache-holds", {"text": "x", "usage": {"cost_usd": 0.5}})
    journal = Journal(run_dir)
    for key, usd in (("a-request-no-cache-holds", 0.25), ("a-reply-the-cache-holds", 0.5)):
        journal.arm(key)
        journal.sent(usd)
    journal.close(keep=True)  # as a SIGKILL leaves it

    assert recorded_spend(run_dir).usd == pytest.approx(paid), "a plain run's spend: settled journals only"
    spend = recorded_spend(run_dir, cache_holding(run_dir))
    assert (spend.lost_in_flight, spend.lost_reserved) == (1, 1), spend
    assert spend.usd == pytest.approx(paid + 0.25) and spend.lost_in_flight_usd == pytest.approx(0.25)
    with in_process.environment(tmp_path, drop=("BENCH_CACHE",)):
        doc = status(run_dir).doc
    assert (doc["spend"]["estimated_usd"], doc["spend"]["estimated_at_reservation"]) == (pytest.approx(0.25), 1)
    said = command(tmp_path, "estimate", str(params), drop=("BENCH_CACHE",)).stdout
    assert f"spent so far ${spend.usd:.4f}{spend.estimated_note()}" in said, said
    with in_process.environment(tmp_path, drop=("BENCH_CACHE",)):  # settles: no second count
        assert sweep_budget(1.0, run_dir) == (1.0, pytest.approx(spend.usd))
    assert recorded_spend(run_dir) == spend and not list(run_dir.glob("requests-*.journal"))
    assert recorded_spend(run_dir, cache_holding(run_dir)) == spend
