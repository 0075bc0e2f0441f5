"""``limits.budget_usd`` at run time: a sweep stops starting paid calls at its budget, exits 4, and continues when raised.

Every test runs against the loopback fake provider with declared prices (its usage counts words as tokens),
so every call is priced; the sweeps run in-process (bench.testing.in_process: the driver's lease server holds the
budget, as on the command line), but for two kernels side by side under `bench sweep --jobs 2`. The pre-start check (``bench estimate``'s expected cost against the budget) must not
refuse these sweeps: a first sweep with the fake's short replies sets the observed output length, then the
fake answers at length (never past a request's ``max_tokens``), so the spend passes the budget only at run
time. The cap must hold exactly: recorded spend ≤ budget, no failed record, nothing asked twice.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import yaml

from bench.core.errors import BudgetReached
from bench.core.records import Candidate, Judgment
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.models._leases import LeaseServer, RemoteLimiter
from bench.models._purse import Purse
from bench.models.budget import Budget, PriceUnknown
from bench.models.ratelimit import limiter_for
from bench.run import open_run
from bench.stage_runs import run_collect, run_judge
from bench.testing import grids
from bench.testing.in_process import run_stages

PRICE = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0}  # $0.001 per (fake) token
JUDGE_PRICE = {"input_per_mtok": 100.0, "output_per_mtok": 100.0}
CHEAP_JUDGE = {"input_per_mtok": 1.0, "output_per_mtok": 1.0}  # a judgment ~$0.001: the answers pass the budget
LONG = " ".join(["word"] * 30)  # a 30-token answer: within max_tokens 40, ten times the fake's usual one


def write(path: Path, url: str, topics: int, budget: float, *, models: int = 1, judges: list | None = None,
          system: str | None = None) -> Path:
    entries = [grids.model(f"m{i + 1}", url, name=f"fake-{i + 1}", price=PRICE, params={"max_tokens": 40})
               for i in range(models)]
    prompt = grids.prompt("p", "One tip about {topic}.", **({"system": system} if system else {}))
    return grids.grid(path, url, name="b", topics=topics, models=entries, prompts=[prompt], judges=judges,
                      limits={"max_concurrency": 4, "timeout_s": 10, "retries": 0, "budget_usd": budget})


def set_budget(params: Path, budget: float) -> None:
    data = yaml.safe_load(params.read_text())
    data["limits"]["budget_usd"] = budget
    params.write_text(yaml.safe_dump(data, sort_keys=False))


def no_failures(run_dir: Path) -> None:
    store = RunStore(run_dir)
    assert not [r for r in store.iter(Candidate) if not r.ok], "a budget stop recorded a failed answer"
    assert not [r for r in store.iter(Judgment) if not r.ok], "a budget stop recorded a failed judgment"


def spent(run_dir: Path) -> float:
    spend = recorded_spend(run_dir)
    assert spend.unpriced == 0
    return spend.usd


def requests(fake) -> int:
    return int(fake.stats()["requests"])


def test_a_sweep_stops_at_its_budget_exits_4_and_continues_when_it_is_raised(tmp_path, fake):
    params = write(tmp_path / "b.yaml", fake.url, topics=2, budget=0.2)
    first = run_stages(tmp_path, params)
    assert first.returncode == 0, first.log
    run_dir = tmp_path / "runs" / "b"
    assert spent(run_dir) == pytest.approx(2 * 7 * 0.001)  # 4 prompt + 3 answer tokens each

    write(params, fake.url, topics=12, budget=0.2)
    fake.configure(replies=[{"match": "One tip", "content": LONG}])
    before = requests(fake)
    stopped = run_stages(tmp_path, params)
    log = stopped.stdout + stopped.stderr
    assert stopped.returncode == 4, log
    done = len(RunStore(run_dir).done_ids(Candidate))
    assert 2 < done < 12, log
    assert spent(run_dir) <= 0.2 + 1e-9, log
    no_failures(run_dir)
    assert requests(fake) - before == done - 2  # every request sent was recorded: none refused after sending
    assert "collect: STOPPED (BudgetReached)" in log
    assert re.search(rf"budget reached: spent \$0\.\d+ of limits\.budget_usd = \$0\.2000 .*; {12 - done} answers not "
                     rf"started \(no record: nothing failed\)", log), log
    assert f"to continue, raise limits.budget_usd in {params} and re-run: bench sweep {params}" in log, log

    # the same budget: nothing new starts, no request at all (the pre-start check, bench.estimate, may refuse
    # first: what the run folder spent plus the expected cost of the rest is over the budget)
    again = run_stages(tmp_path, params)
    assert again.returncode in (2, 4), again.log
    assert "limits.budget_usd" in again.stderr + again.stdout
    assert requests(fake) - before == done - 2
    assert len(RunStore(run_dir).done_ids(Candidate)) == done

    set_budget(params, 5.0)
    rest = run_stages(tmp_path, params)
    assert rest.returncode == 0, rest.log
    assert len(RunStore(run_dir).done_ids(Candidate)) == 12
    assert requests(fake) - before == 10  # each new item asked exactly once over the three sweeps
    no_failures(run_dir)


def test_two_kernels_side_by_side_share_one_budget(tmp_path, fake):
    params = write(tmp_path / "b.yaml", fake.url, topics=2, budget=0.4, models=2)
    first = run_stages(tmp_path, params)  # short replies: the estimate lets the next sweep start
    assert first.returncode == 0, first.log
    write(params, fake.url, topics=12, budget=0.4, models=2)
    fake.configure(replies=[{"match": "One tip", "content": LONG}])
    stopped = grids.sweep(tmp_path, params, "--jobs", "2")
    log = stopped.stdout + stopped.stderr
    assert stopped.returncode == 4, log
    run_dir = tmp_path / "runs" / "b"
    assert spent(run_dir) <= 0.4 + 1e-9, log  # each kernel alone would have spent up to the budget
    assert re.search(r"budget: \$0\.\d+ of \$0\.4000 spent; one lease server holds the rest", log), log
    no_failures(run_dir)
    assert len(RunStore(run_dir).done_ids(Candidate)) < 24


def test_a_pipelined_judge_stops_cleanly_at_the_budget(tmp_path, fake):
    judges = [grids.judge("grader", fake.url, name="fake-judge", price=CHEAP_JUDGE, params={"max_tokens": 300})]
    params = write(tmp_path / "b.yaml", fake.url, topics=2, budget=0.3, judges=judges, system="Answer at length.")
    first = run_stages(tmp_path, params)
    assert first.returncode == 0, first.log
    run_dir = tmp_path / "runs" / "b"
    write(params, fake.url, topics=12, budget=0.3, judges=judges, system="Answer at length.")
    fake.configure(replies=[{"match": "Answer at length", "content": LONG}])  # the answers, not the judge
    stopped = run_stages(tmp_path, params)
    log = stopped.stdout + stopped.stderr
    assert stopped.returncode == 4, log
    assert spent(run_dir) <= 0.3 + 1e-9, log
    no_failures(run_dir)
    answers, judgments = RunStore(run_dir).done_ids(Candidate), RunStore(run_dir).done_ids(Judgment)
    assert len(answers) < 12 or len(judgments) < 12, log
    assert "judge: not started, because collect stopped (BudgetReached)" in log or len(answers) == 12, log
    m = re.search(r"; (\d+) answers and (\d+) judgments not started", log)
    assert m and (int(m[1]), int(m[2])) == (12 - len(answers), 12 - len(judgments)), log


# -- in a notebook (the pipeline API): no pre-start check; the stage raises BudgetReached -------------------

def test_run_collect_raises_budget_reached_and_records_nothing_it_did_not_start(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    params = write(tmp_path / "b.yaml", fake.url, topics=10, budget=0.1)  # a reservation: ~27 prompt bytes + 40 out
    run = open_run(params)
    with pytest.raises(BudgetReached, match=r"limits\.budget_usd = \$0\.1000 reached: .* Raise limits\.budget_usd "
                                            r"in .*b\.yaml and run again to continue"):
        asyncio.run(run_collect(run, progress="none"))
    done = len(RunStore(run.dir).done_ids(Candidate))
    assert 0 < done < 10 and requests(fake) == done
    assert spent(run.dir) <= 0.1 + 1e-9
    no_failures(run.dir)


def test_a_checklist_item_cut_by_the_budget_is_not_recorded_and_its_paid_replies_are_not_paid_again(
        tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    judges = [grids.judge("check", fake.url, rubric="tip-checklist", name="fake-judge", price=JUDGE_PRICE,
                          params={"max_tokens": 100}, item_concurrency=5)]
    params = write(tmp_path / "b.yaml", fake.url, topics=4, budget=1.0, judges=judges)
    run = open_run(params)
    asyncio.run(run_collect(run, progress="none"))  # 4 answers (no judging yet)
    collected = requests(fake)
    paid = spent(run.dir)
    room = 0.2  # a requirement call costs about $0.02 (~200 fake tokens) and reserves more (its prompt as UTF-8 bytes)
    set_budget(params, paid + room)
    run = open_run(params)
    with pytest.raises(BudgetReached):
        asyncio.run(run_judge(run, progress="none"))
    judged = RunStore(run.dir).done_ids(Judgment)
    assert len(judged) < 4
    no_failures(run.dir)
    assert spent(run.dir) <= paid + room + 1e-9
    asked = requests(fake) - collected
    assert asked > 5 * len(judged)  # some requirements of an unrecorded item were paid …
    set_budget(params, 5.0)
    asyncio.run(run_judge(open_run(params), progress="none"))
    assert len(RunStore(run.dir).done_ids(Judgment)) == 4
    assert requests(fake) - collected == 4 * 5  # … and answered from the cache on the re-run: each asked once


def test_a_model_with_no_known_price_is_not_called_under_a_budget(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    params = grids.grid(tmp_path / "u.yaml", fake.url, name="u", topics=3,  # an api_base and no price: unknown
                        limits={"max_concurrency": 2, "timeout_s": 10, "retries": 0, "budget_usd": 1.0})
    run = open_run(params)
    with pytest.raises(PriceUnknown, match=r"the price of openai/m1 is unknown, so its spend cannot be capped; "
                                           r"nothing was sent to it\. Declare it on that entry in .*u\.yaml"):
        asyncio.run(run_collect(run, progress="none"))
    assert PriceUnknown.exit_code == 2 and requests(fake) == 0
    assert not list(RunStore(run.dir).iter(Candidate))  # not a failure of the items: nothing recorded


# -- the counters: one purse, and the lease server holding it for every kernel ---------------------------

def test_a_purse_grants_waits_for_room_and_refuses_what_can_never_fit():
    async def main() -> None:
        purse = Purse(1.0, spent=0.2)
        assert await purse.reserve(0.5)
        waiting = asyncio.ensure_future(purse.reserve(0.5))  # 0.2 + 0.5 + 0.5 > 1: waits for the first to settle
        await asyncio.sleep(0)
        assert not waiting.done()
        purse.settle(0.5, 0.1)  # cost less than reserved: now 0.3 spent, the second fits
        assert await waiting and purse.reserved == pytest.approx(0.5)
        assert not await purse.reserve(0.75)  # 0.3 + 0.75 > 1 even with nothing in flight: refused at once
        purse.settle(0.5, None)  # unknown cost: counted as reserved
        assert purse.spent == pytest.approx(0.8) and purse.reserved == 0.0 and purse.held == 0
        assert await purse.reserve(0.15)
        small = asyncio.ensure_future(purse.reserve(0.1))  # fits only if the 0.15 in flight costs less: it waits
        await asyncio.sleep(0)
        assert not small.done()
        purse.settle(0.15, 0.15)  # it cost all of it: 0.95 spent, 0.1 more can never fit
        assert await small is False

    asyncio.run(main())


def test_the_lease_server_holds_one_budget_for_every_connection_and_charges_a_dead_ones_reservations():
    async def main(address: str) -> tuple[float, ...]:
        a, b = RemoteLimiter(address), RemoteLimiter(address)
        ra, answer = await a.reserve(0.6)
        assert answer["ok"]
        waiting = asyncio.ensure_future(b.reserve(0.6))  # 0.6 + 0.6 > 1: waits on a's reservation
        await asyncio.sleep(0.05)
        assert not waiting.done()
        a.settle(ra, 0.5)  # a paid 0.5: b's 0.6 can never fit now
        _rb, refused = await waiting
        assert {k: refused[k] for k in ("id", "ok", "spent", "limit", "in_flight")} == {
            "id": _rb, "ok": False, "spent": 0.5, "limit": 1.0, "in_flight": 0}
        rc, granted = await b.reserve(0.3)
        assert granted["ok"]
        b.transport.close()  # b dies with its request in flight: it may have been paid
        await asyncio.sleep(0.05)
        _rd, last = await a.reserve(0.3)
        return last["ok"], last.get("spent", -1.0)

    with LeaseServer(budget=(1.0, 0.0)) as server:
        assert server.address
        ok, spent_now = asyncio.run(main(server.address))
    assert (ok, spent_now) == (False, pytest.approx(0.8))


def test_a_reply_a_killed_process_paid_counts_in_the_sweeps_shared_budget_at_once(tmp_path):
    """A resumed kernel that takes a cached reply a killed process paid (no record held it) counts it in the lease
    server's purse when it takes it, so the same sweep cannot spend that money again. Before, the server only
    learnt of it at the next sweep's start."""
    async def main(address: str) -> tuple[bool, float]:
        budget = Budget(1.0, tmp_path / "runs" / "s", lease_server=address)
        budget.count(0.6)  # hit_usage does this when a resume takes such a reply
        _rid, answer = await limiter_for(address=address).reserve(0.5)
        return answer["ok"], answer.get("spent", -1.0)

    with LeaseServer(budget=(1.0, 0.0)) as server:
        ok, spent = asyncio.run(main(server.address))
    assert (ok, spent) == (False, pytest.approx(0.6))


def test_a_lease_server_without_a_budget_says_so():
    async def main(address: str) -> dict:
        return (await RemoteLimiter(address).reserve(0.1))[1]

    with LeaseServer() as server:
        answer = asyncio.run(main(server.address))
    assert answer["ok"] is False and "holds no budget" in answer["error"]


def test_the_budget_is_bad_input_when_not_a_positive_number(tmp_path, fake):
    params = write(tmp_path / "b.yaml", fake.url, topics=2, budget=0.2)
    set_budget(params, -1)
    proc = run_stages(tmp_path, params)
    assert proc.returncode == 2 and "budget_usd" in proc.stderr, proc.stderr
    assert requests(fake) == 0
