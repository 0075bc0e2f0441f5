"""``limits.budget_usd`` against a provider whose bill is not what a request asked for (issue 28, item 1).

Each fault comes from the loopback fake provider, which bills every reply it sends (stats ``billed``, at the
price the params declare): replies longer than ``max_tokens``, prompts of CJK text (tokenized, not
characters / 4), replies with no usage, and empty ``finish_reason=length`` replies that are paid and retried.
For each, the spend stays within the budget, and the records (what a resume reads as "spent so far")
say what the provider billed. One request at a time (``max_concurrency: 1``), so the figures are exact.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.core.errors import BudgetReached
from bench.core.records import Candidate, Usage
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.models._purse import Purse
from bench.models.budget import dollars
from bench.models.routing import ModelSpec, resolve
from bench.models.tokens import counter_for
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.sweep.halts import spend_line
from bench.sweep.shared import SharedLimits
from bench.testing import grids

CJK = "".join(chr(0x4E00 + i * 997 % 6000) for i in range(400))  # 891 cl100k tokens; 100 as characters / 4


def write(path: Path, url: str, *, topics: int, budget: float | None, name: str = "fake-1", price: float = 1000.0,
          max_tokens: int = 40, user: str = "One tip about {topic}.", retries: int = 0) -> Path:
    entry = grids.model("m1", url, name=name, price={"input_per_mtok": price, "output_per_mtok": price},
                        params={"max_tokens": max_tokens})
    limits = {"max_concurrency": 1, "timeout_s": 10, "retries": retries, "backoff_s": 0.01,
              **({"budget_usd": budget} if budget is not None else {})}
    return grids.grid(path, url, name="f", topics=topics, models=[entry], prompts=[grids.prompt("p", user)],
                      limits=limits)


def billed(fake) -> float:
    return float(fake.stats()["billed"]["usd"])


def collect(params: Path) -> tuple[Path, BudgetReached | None]:
    """Run the collect stage of ``params`` (the notebook's way); return the run folder and its BudgetReached."""
    run = open_run(params)
    try:
        asyncio.run(run_collect(run, progress="none"))
    except BudgetReached as stop:
        return run.dir, stop
    return run.dir, None


def usages(run_dir: Path) -> list[Usage]:
    return [rec.usage for rec in RunStore(run_dir).iter(Candidate) if rec.usage is not None]


@pytest.fixture(autouse=True)
def _runs(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))


def test_replies_past_max_tokens_are_reconciled_flagged_and_kept_within_the_budget(tmp_path, fake):
    # each reply is 400 tokens for max_tokens 40: $0.404 billed for ~$0.07 reserved
    fake.configure(over_limit_tokens=400, bill_per_mtok={"input": 1000.0, "output": 1000.0})
    run_dir, stop = collect(write(tmp_path / "f.yaml", fake.url, topics=12, budget=2.0))
    assert stop is not None, "the budget was never reached"
    assert billed(fake) <= 2.0, f"billed ${billed(fake):.3f} on a $2.00 budget"
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake))
    flagged = usages(run_dir)
    assert flagged and all(u.over_limit and u.completion_tokens == 400 for u in flagged)
    assert recorded_spend(run_dir).over_limit == len(flagged)
    assert "cost more than reserved, by up to $0.3370 each" in str(stop), str(stop)


def test_a_cjk_prompt_is_counted_with_the_models_tokenizer_not_characters_over_four(tmp_path, fake):
    fake.configure(tokenizer="cl100k", bill_per_mtok={"input": 1000.0, "output": 1000.0})
    params = write(tmp_path / "f.yaml", fake.url, topics=8, budget=3.0, name="gpt-3.5-turbo", max_tokens=10,
                   user=CJK + " {topic}")
    run_dir, stop = collect(params)
    assert billed(fake) <= 3.0, f"billed ${billed(fake):.3f} on a $3.00 budget"
    assert stop is not None and "prompt counted with cl100k_base" in str(stop), stop
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake))


def test_a_model_without_a_tokenizer_in_litellm_is_counted_as_its_utf8_bytes(tmp_path, fake):
    from bench.models.tokens import bound_counter  # noqa: PLC0415 (new: the tests above run on older code too)

    spec = ModelSpec("openai/m-cjk", api_base=fake.url)
    bound = bound_counter(resolve(spec))
    assert bound.tokenizer == "UTF-8 bytes" and "no tokenizer" in (bound.note or "")
    real = counter_for(resolve(ModelSpec("openai/gpt-3.5-turbo", api_base=fake.url))).text(CJK)
    assert bound.text(CJK) == len(CJK.encode()) >= real > 2 * len(CJK) / 4  # never fewer than the real count
    fake.configure(tokenizer="cl100k", bill_per_mtok={"input": 1000.0, "output": 1000.0})
    run_dir, stop = collect(write(tmp_path / "f.yaml", fake.url, topics=8, budget=3.0, name="m-cjk", max_tokens=10,
                                  user=CJK + " {topic}"))
    assert stop is not None and "prompt counted with UTF-8 bytes" in str(stop), stop
    assert billed(fake) <= 3.0
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake))


def test_a_reply_without_usage_is_estimated_never_free_and_a_resume_counts_it(tmp_path, fake):
    # cl100k on both sides: the estimate of a reply without usage is the provider's own count
    fake.configure(omit_usage=True, tokenizer="cl100k", bill_per_mtok={"input": 10000.0, "output": 10000.0})
    params = write(tmp_path / "f.yaml", fake.url, topics=4, budget=1.5, name="gpt-3.5-turbo", price=10000.0,
                   max_tokens=10)
    run_dir, stop = collect(params)
    assert stop is None
    spend = recorded_spend(run_dir)
    assert spend.usd == pytest.approx(billed(fake)) and spend.unpriced == 0, f"records say ${spend.usd}"
    first = usages(run_dir)
    assert len(first) == 4 and all(u.estimated and u.cost_usd for u in first) and spend.estimated == 4

    params = write(tmp_path / "f.yaml", fake.url, topics=12, budget=1.5, name="gpt-3.5-turbo", price=10000.0,
                   max_tokens=10)
    _run_dir, stop = collect(params)  # a resume starts from what the records say was spent: not $0
    assert stop is not None
    assert billed(fake) <= 1.5, f"billed ${billed(fake):.3f} on a $1.50 budget over two runs"
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake))


def test_paid_empty_replies_count_on_the_record_per_attempt_and_in_the_ledger(tmp_path, fake):
    # the first attempt of every request: an empty finish_reason=length reply billed at its max_tokens
    fake.configure(empty_first=1, empty_bills_limit=True, bill_per_mtok={"input": 1000.0, "output": 1000.0})
    run_dir, stop = collect(write(tmp_path / "f.yaml", fake.url, topics=3, budget=None, retries=2))
    assert stop is None
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake)), "the records miss paid empty replies"
    done = usages(run_dir)
    assert len(done) == 3
    for usage in done:
        attempts = usage.paid_attempts or []
        assert [a["finish_reason"] for a in attempts] == ["length", "stop"] and attempts[0]["completion_tokens"] == 40
        assert usage.cost_usd == pytest.approx(sum(a["cost_usd"] for a in attempts))
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake))
    assert recorded_spend(run_dir).repaid == 3

    fake.configure(empty_first=5)  # every attempt empty: the items fail, and their paid replies still count
    before = billed(fake)
    run_dir, _ = collect(write(tmp_path / "g.yaml", fake.url, topics=5, budget=None, retries=1))
    assert billed(fake) > before
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake)), "failed items' paid replies missed"  # both runs
    failed = [rec for rec in RunStore(run_dir).iter(Candidate) if not rec.ok and rec.usage is not None]
    assert failed and all(rec.usage.cost_usd and len(rec.usage.paid_attempts or []) == 2 for rec in failed)


def test_a_paid_empty_reply_whose_retry_the_budget_refuses_is_recorded_with_its_cost(tmp_path, fake):
    fake.configure(empty_first=1, empty_bills_limit=True, bill_per_mtok={"input": 1000.0, "output": 1000.0})
    run_dir, stop = collect(write(tmp_path / "f.yaml", fake.url, topics=12, budget=0.5, retries=2))
    assert stop is not None
    assert recorded_spend(run_dir).usd == pytest.approx(billed(fake)), "a paid reply of an item cut by the stop"
    assert billed(fake) <= 0.5
    cut = [rec for rec in RunStore(run_dir).iter(Candidate) if "the retry was not sent" in (rec.error or "")]
    assert cut and all(r.usage.cost_usd and r.error_kind == "empty" for r in cut)  # failed: a resume asks again


def test_a_sweep_summary_says_which_records_were_estimated_or_over_their_limit(tmp_path, fake, capsys):
    """The lines a sweep ends with: the driver's lease server, which holds the budget for its executions, says what
    was spent of it (``SharedLimits``), and the spend line what of the records was estimated (``spend_line``)."""
    fake.configure(omit_usage=True)
    params = write(tmp_path / "f.yaml", fake.url, topics=2, budget=5.0)
    run = open_run(params)
    with SharedLimits(run, jobs=1, per_cell=False) as shared:  # what the sweep's driver holds for its executions
        link = shared.link
        staged = open_run(params, lease_server=link.lease_server, shared_budget=link.shared_budget, lock_held=True)
        asyncio.run(run_collect(staged, progress="none"))
    log = capsys.readouterr().out + (spend_line(run) or "")
    assert link.shared_budget and "; of its records: 2 estimated: a reply had no usage" in log, log
    spent = dollars(recorded_spend(run.dir).usd)  # what the server counted is what the records hold
    assert f"budget: spent {spent} of $5.0000; every reply cost at most what it reserved" in log, log


def test_the_purse_sets_aside_the_largest_overrun_for_every_call_in_flight():
    async def main() -> None:
        purse = Purse(1.0)
        assert await purse.reserve(0.1)
        purse.settle(0.1, 0.4)  # a reply three times its reservation: a $0.30 overrun, seen for the first time
        assert (purse.overruns, purse.margin, purse.surprise) == (1, pytest.approx(0.3), pytest.approx(0.3))
        assert await purse.reserve(0.1)  # 0.4 spent + 0.1 + 0.3 set aside = 0.8
        assert purse.committed() == pytest.approx(0.8)
        waiting = asyncio.ensure_future(purse.reserve(0.1))  # 0.8 + 0.1 + 0.3 > 1: it waits
        await asyncio.sleep(0)
        assert not waiting.done()
        purse.settle(0.1, 0.4)  # as much over as before: covered by the margin, no surprise
        assert purse.surprise == pytest.approx(0.3) and purse.spent == pytest.approx(0.8)
        assert await waiting is False  # 0.8 + 0.1 + 0.3 can never fit: no call starts that could pass the budget
        assert purse.spent <= purse.limit

    asyncio.run(main())
