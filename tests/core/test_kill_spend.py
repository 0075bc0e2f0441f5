"""No billed money goes unrecorded after kills: a collect SIGKILLed (the whole process group) four times, then
finished, records at least what the fake provider billed, and at most 1.5 times it.

Before the fix a reply that reached the response cache but whose record was not written yet came back at $0 on
resume, and a request in flight at the kill was only counted, not priced: 24% of the bill went unrecorded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from bench.core.journal import Journal
from bench.core.records import Candidate
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.models.budget import sweep_budget
from bench.testing import grids
from bench.testing.grids import started, sweep_args
from tests.sweep.test_sweep import wait_until_no_kernel_writes

ITEMS, KILLS, CAP = 120, 4, 4
PRICE = {"input_per_mtok": 10.0, "output_per_mtok": 400.0}  # output-heavy, as most calls are
BILL = {"input": 10.0, "output": 400.0}
MAX_TOKENS = 8  # the fake's replies take 3-4 (a reservation counts the whole limit: the bound a kill's estimate uses)


def test_kills_leave_no_billed_reply_unrecorded(tmp_path, fake):
    fake.configure(latency_ms=60, bill_per_mtok=BILL)
    entry = grids.model("m1", fake.url, price=PRICE, params={"max_tokens": MAX_TOKENS})
    params = grids.grid(tmp_path / "k.yaml", fake.url, name="k", topics=ITEMS, models=[entry],
                        limits={"max_concurrency": CAP, "timeout_s": 10, "retries": 0})
    env = {"drop": ("BENCH_CACHE",)}
    for kill in range(KILLS):
        seen = fake.stats()["requests"]
        with started(tmp_path, *sweep_args(params), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     **env) as proc:
            deadline = time.monotonic() + 120
            while fake.stats()["requests"] < seen + 12 + 2 * kill:  # replies answered, some not yet recorded
                assert proc.poll() is None, "the sweep ended before it could be killed"
                assert time.monotonic() < deadline, "the sweep sent no request in 120 s"
                time.sleep(0.01)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        wait_until_no_kernel_writes(tmp_path)
    fake.configure(latency_ms=0)
    done = grids.sweep(tmp_path, params, **env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run_dir = tmp_path / "runs" / "k"
    assert sum(c.ok for c in RunStore(run_dir).latest(Candidate).values()) == ITEMS
    billed, spend = float(fake.stats()["billed"]["usd"]), recorded_spend(run_dir)
    said = f"recorded ${spend.usd:.4f} against ${billed:.4f} billed: {spend}, {fake.stats()['billed']}"
    print(said)
    assert billed <= spend.usd <= 1.5 * billed, said
    assert spend.lost_in_flight and spend.lost_in_flight_usd > 0  # four kills with requests in flight: said so
    assert "in flight at a kill" in spend.notes()
    status = grids.bench(tmp_path, "status", str(run_dir))
    assert f"of which ${spend.lost_in_flight_usd:.4f} estimated: requests in flight at a kill" in status.stdout, \
        status.stdout
    again = grids.sweep(tmp_path, params, **env)  # a second finishing run counts nothing again
    assert again.returncode == 0 and recorded_spend(run_dir).usd == pytest.approx(spend.usd)


def test_a_sweeps_shared_budget_starts_with_what_the_last_kill_left_in_flight(tmp_path):
    """The lease server's budget is taken once, by the driver, before any kernel settles the killed processes'
    journals: requests a kill left in flight are settled there first, or the resumed sweep could spend them again."""
    run_dir = tmp_path / "runs" / "k"
    journal = Journal(run_dir)
    journal.arm("a-request-no-cache-holds")
    journal.sent(0.25)  # its reservation: the most it could have cost
    journal.close(keep=True)  # as a SIGKILL leaves it
    limit, spent = sweep_budget(1.0, run_dir)
    assert (limit, spent) == (1.0, pytest.approx(0.25))
    assert recorded_spend(run_dir).lost_in_flight_usd == pytest.approx(0.25)  # settled once: not counted again
    assert sweep_budget(1.0, run_dir) == (1.0, pytest.approx(0.25))
