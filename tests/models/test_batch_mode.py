"""Batch API mode end to end: the real client, LiteLLM's files/batches calls, the fake provider's /v1/batches.

Each test runs the collect stage (in process, or in a child process that is killed) of a small grid whose
model has ``batch:`` against the session's fake provider, and checks what a researcher relies on:
the records, the batch ids and prices on them, what the provider was asked (batches created, direct
chat requests), and what happens when a batch fails lines, expires, is cancelled or refused.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from bench.core.errors import BatchRejected, BudgetReached, PreflightError
from bench.core.records import Candidate, Judgment
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.models.batches import BatchPolicy, batches_of
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import grid, judge, model
from bench.testing.in_process import run_stages
from tests.staged import started_stages

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0, "batch_discount": 0.5}
FAST = {"poll_s": 0.05, "poll_max_s": 0.2, "gather_s": 0.1}


def _grid(tmp_path: Path, url: str, topics: int = 5, batch: dict | bool | None = None, **extra) -> Path:
    settings = {**FAST, **batch} if isinstance(batch, dict) else FAST if batch is None else batch
    extra.setdefault("limits", {"max_concurrency": 8, "timeout_s": 10, "retries": 2})
    return grid(tmp_path / "g.yaml", url, topics=topics,
                models=[model("m1", url, batch=settings, price=PRICE)], **extra)


def _collect(tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    run = open_run(path)
    result = asyncio.run(run_collect(run, progress="none"))
    return result, run


def _candidates(run_dir: Path) -> dict[str, Candidate]:
    return RunStore(run_dir).latest(Candidate)


def _batch_stats(fake) -> dict:
    return fake.stats()["batches"]


def test_a_batched_model_is_answered_through_one_batch_at_the_batch_price(fake, tmp_path, monkeypatch):
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url), monkeypatch)
    cands = _candidates(run.dir)
    assert result.done == 5 and len(cands) == 5 and all(c.ok for c in cands.values())
    stats = fake.stats()
    assert stats["requests"] == 0, "a batched model sends no direct chat request"
    assert _batch_stats(fake)["created"] == 1
    [info] = batches_of(run.dir)
    assert info.status == "completed" and len(info.keys) == 5 and info.answered == set(info.keys)
    assert sorted(info.labels) == sorted(cands), "the ledger names the items in the batch"
    ledger = "".join(p.read_text() for p in (run.dir / "batches").glob("*.jsonl"))
    assert fake.url.split("//")[1] not in ledger, "the ledger keeps a digest of the endpoint, never its api_base"
    for c in cands.values():
        assert c.usage.batch_id == info.batch_id and c.usage.attempts == 1
        full = (c.usage.prompt_tokens * 1.0 + c.usage.completion_tokens * 2.0) / 1e6
        assert c.usage.cost_usd == pytest.approx(full * 0.5), "billed at the batch price"


def test_a_large_stage_is_split_at_the_batch_limit(fake, tmp_path, monkeypatch):
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, topics=7, batch={"max_requests": 3}), monkeypatch)
    assert result.done == 7
    assert _batch_stats(fake)["created"] == 3
    assert sorted(len(b.keys) for b in batches_of(run.dir)) == [1, 3, 3]


def test_failed_lines_are_asked_again_in_a_new_batch(fake, tmp_path, monkeypatch):
    fake.configure(batch_fail_rate=0.5, seed=3)
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, topics=8, limits={"retries": 6, "timeout_s": 10}),
                           monkeypatch)
    cands = _candidates(run.dir)
    assert result.done == 8 and all(c.ok for c in cands.values())
    assert _batch_stats(fake)["created"] >= 2
    retried = [c for c in cands.values() if c.usage.attempts > 1]
    assert retried, "some lines failed in the first batch and were answered by a later one"
    first = batches_of(run.dir)[0]
    assert all(c.usage.batch_id != first.batch_id for c in retried)


def test_failed_lines_can_be_asked_directly(fake, tmp_path, monkeypatch):
    fake.configure(batch_fail_match=["t1."])
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, batch={"retry": "direct"}), monkeypatch)
    cands = _candidates(run.dir)
    assert result.done == 5 and all(c.ok for c in cands.values())
    assert fake.stats()["requests"] == 1, "the one failed line was asked as a direct call"
    [direct] = [c for c in cands.values() if c.usage.batch_id is None]
    assert "t1." in json.dumps(direct.messages)


def test_a_line_that_keeps_failing_is_recorded_failed_not_lost(fake, tmp_path, monkeypatch):
    fake.configure(batch_fail_match=["t2."])
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, limits={"retries": 1, "timeout_s": 10}), monkeypatch)
    cands = _candidates(run.dir)
    assert result.done == 4 and result.failed == 1
    [bad] = [c for c in cands.values() if not c.ok]
    assert bad.error_kind == "server" and "in a batch" in bad.error
    assert bad.usage.attempts == 2


def test_an_expired_batch_has_its_unanswered_lines_asked_again(fake, tmp_path, monkeypatch):
    fake.configure(batch_expire_after=3)
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, topics=5), monkeypatch)
    cands = _candidates(run.dir)
    assert result.done == 5 and all(c.ok for c in cands.values())
    statuses = [b.status for b in batches_of(run.dir)]
    assert statuses[0] == "expired" and statuses[-1] == "completed"
    assert sum(c.usage.attempts == 2 for c in cands.values()) == 2


def _wait_for_batch(run_dir: Path, budget_s: float = 120.0):
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        created = [b for b in batches_of(run_dir) if b.batch_id]
        if created:
            return created[0]
        time.sleep(0.05)
    raise AssertionError(f"no batch was created in {run_dir} within {budget_s:.0f} s")


def test_a_batch_cancelled_at_the_provider_is_noticed_and_its_items_recorded_failed(fake, tmp_path, monkeypatch,
                                                                                      capsys):
    fake.configure(batch_delays_s={"in_progress": 600})
    path = _grid(tmp_path, fake.url, topics=4)
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    run = open_run(path)
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", asyncio.run(run_collect(run, progress="none"))))
    thread.start()
    info = _wait_for_batch(run.dir)
    req = urllib.request.Request(f"{fake.url}/batches/{info.batch_id}/cancel", method="POST", data=b"")
    urllib.request.urlopen(req, timeout=10).read()
    thread.join(timeout=120)
    assert not thread.is_alive()
    cands = _candidates(run.dir)
    assert len(cands) == 4 and all(c.error_kind == "batch_cancelled" for c in cands.values())
    assert "CANCELLED at the provider" in capsys.readouterr().out


def test_a_batch_the_provider_refuses_stops_the_stage_with_one_message(fake, tmp_path, monkeypatch):
    fake.configure(batch_max_requests=2)
    with pytest.raises(BatchRejected) as err:
        _collect(tmp_path, _grid(tmp_path, fake.url, topics=4), monkeypatch)
    assert "failed validation" in str(err.value) and "max_requests" in str(err.value)
    assert "nothing was spent" in str(err.value)
    assert _candidates(tmp_path / "runs" / "g") == {}, "no item of a refused batch is recorded failed"
    assert fake.stats()["requests"] == 0


def test_a_provider_without_a_batch_api_is_refused_before_anything_is_sent(fake, tmp_path, monkeypatch):
    fake.configure(batches_supported=False)
    with pytest.raises(PreflightError) as err:
        _collect(tmp_path, _grid(tmp_path, fake.url), monkeypatch)
    assert "has no Batch API" in str(err.value) and "drop `batch:`" in str(err.value)
    assert fake.stats()["requests"] == 0 and _batch_stats(fake)["created"] == 0


def _records(run_dir: Path) -> tuple[dict, dict]:
    store = RunStore(run_dir)
    cands = {c.id: c.output for c in store.latest(Candidate).values()}
    judgments = {j.id: (j.score, j.scores, j.rationale) for j in store.latest(Judgment).values()}
    return cands, judgments


def test_a_sweep_in_batch_mode_ends_with_the_records_of_the_direct_one(fake, tmp_path):
    def run(where: Path, batch: dict | None) -> tuple[dict, dict]:
        where.mkdir()
        how = {"price": PRICE, **({"batch": batch} if batch else {})}
        path = grid(where / "g.yaml", fake.url, topics=4, models=[model("m1", fake.url, **how)],
                    judges=[judge("grader", fake.url, **how),  # every grading mode composes with batches
                            judge("packed", fake.url, mode="packed", pack_size=3, **how),
                            judge("checks", fake.url, rubric="tip-checklist", **how)])
        done = run_stages(where, path)
        assert done.returncode == 0, done.log
        return _records(where / "runs" / "g")

    direct = run(tmp_path / "direct", None)
    direct_requests = fake.stats()["requests"]
    fake.reset()
    batched = run(tmp_path / "batched", FAST)
    assert batched == direct and len(direct[0]) == 4 and len(direct[1]) == 12
    assert direct_requests > 12 and fake.stats()["requests"] == 0
    assert _batch_stats(fake)["created"] >= 2  # the answers, then their grades


def test_sweep_batch_puts_every_model_and_judge_without_batch_settings_through_the_batch_api(fake, tmp_path):
    """`bench sweep --batch` is ``open_run(batch=True)``: ``batch: true`` on every entry that has no settings of its
    own, kept where it has them; never for a dry run (which sends nothing)."""
    path = grid(tmp_path / "g.yaml", fake.url, models=[model("m1", fake.url), model("m2", fake.url, batch=FAST)],
                judges=[judge("grader", fake.url)])

    def policies(run) -> list:
        return [entry.spec().batch for entry in (*run.sweep.models, *run.sweep.judges)]

    assert policies(open_run(path, batch=True)) == [BatchPolicy(), BatchPolicy(**FAST), BatchPolicy()]
    assert policies(open_run(path)) == [None, BatchPolicy(**FAST), None]
    assert policies(open_run(path, batch=True, dry_run=True))[::2] == [None, None]


def test_a_killed_run_adopts_its_batch_and_never_submits_it_twice(fake, tmp_path):
    fake.configure(batch_delays_s={"in_progress": 4})  # long enough to kill the run while it polls
    path = _grid(tmp_path, fake.url, topics=4)
    with started_stages(tmp_path, path):
        info = _wait_for_batch(tmp_path / "runs" / "g", budget_s=240)  # then the run is killed (SIGKILL)
    assert _batch_stats(fake)["created"] == 1
    done = run_stages(tmp_path, path)
    assert done.returncode == 0, done.log
    assert _batch_stats(fake)["created"] == 1, "the resumed run adopted the batch instead of submitting it again"
    assert "adopted" in done.stdout
    cands = _candidates(tmp_path / "runs" / "g")
    assert len(cands) == 4 and all(c.ok and c.usage.batch_id == info.batch_id for c in cands.values())


def test_a_budget_holds_in_batch_mode_and_what_it_cuts_is_not_started(fake, tmp_path, monkeypatch):
    price = {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0, "batch_discount": 0.5}  # $0.0005 a token batched
    path = grid(tmp_path / "g.yaml", fake.url, topics=12,
                models=[model("m1", fake.url, batch=FAST, price=price, params={"max_tokens": 10})],
                limits={"max_concurrency": 8, "timeout_s": 10, "retries": 2, "budget_usd": 0.03})
    with pytest.raises(BudgetReached):
        _collect(tmp_path, path, monkeypatch)
    run_dir = tmp_path / "runs" / "g"
    cands = _candidates(run_dir)
    assert 0 < len(cands) < 12 and all(c.ok for c in cands.values()), "cut items get no record, never a failed one"
    assert recorded_spend(run_dir).usd <= 0.03
    assert all(c.usage.batch_id for c in cands.values())
    assert _batch_stats(fake)["lines_answered"] == len(cands), "no line was sent beyond the budget"


def test_batch_prices_come_from_litellms_map_or_the_declared_discount():
    from bench.models.routing import ModelSpec, price_per_token, resolve  # noqa: PLC0415 (a pure pricing check)

    mini = resolve(ModelSpec("openai/gpt-4o-mini", batch=BatchPolicy()))
    assert price_per_token(mini) == (7.5e-08, 3e-07), "LiteLLM's *_cost_per_token_batches"
    assert price_per_token(mini, False) == (1.5e-07, 6e-07)
    haiku = resolve(ModelSpec("anthropic/claude-haiku-4-5", batch=BatchPolicy()))  # listed under its bare name
    assert price_per_token(haiku) == pytest.approx((0.5e-06, 2.5e-06))  # no batch price listed: half the direct one
    own = resolve(ModelSpec("openai/x", api_base="http://127.0.0.1:9/v1", price=(2.0, 8.0), batch_discount=0.25,
                            batch=BatchPolicy()))
    assert price_per_token(own) == pytest.approx((1.5e-06, 6e-06))
