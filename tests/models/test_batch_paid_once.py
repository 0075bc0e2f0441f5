"""A batched item is paid once, and every line the provider bills is counted (issue 28, item 2).

Each test runs the collect stage of a small grid whose model has ``batch:`` against the session's fake
provider, with a fault from the fake's knobs: a lost reply to "create batch" (``batch_route_fail``
``create_lost``), a batch list that cannot be read, an output file that answers a request twice with
different replies, holds lines of no request, or lines that are not JSON. What is counted is what the
provider saw and billed (``batches`` stats: ``created``, ``lines_billed`` and their tokens); the records'
spend must equal the bill.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bench.core.errors import ProviderError
from bench.core.records import Candidate
from bench.core.spend import recorded_spend
from bench.core.store import RunStore
from bench.models.batches import BatchInfo, batches_of, summary_line
from bench.models.batches.lookup import lookup
from bench.models.batches.batch_api import BatchApi, close_clients, jsonl_line
from bench.models.routing import ModelSpec, resolve
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import grid, model

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0, "batch_discount": 0.5}
FAST = {"poll_s": 0.05, "poll_max_s": 0.2, "gather_s": 0.1}


def _grid(tmp_path: Path, url: str, topics: int, retries: int) -> Path:
    return grid(tmp_path / "g.yaml", url, topics=topics, models=[model("m1", url, batch=FAST, price=PRICE)],
                limits={"max_concurrency": 8, "timeout_s": 10, "retries": retries, "backoff_s": 0.01})


def _collect(tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    run = open_run(path)
    return asyncio.run(run_collect(run, progress="none")), run


def _candidates(run_dir: Path) -> dict[str, Candidate]:
    return RunStore(run_dir).latest(Candidate)


def _billed(fake) -> tuple[int, float]:
    """Return the lines the fake provider billed and their USD at PRICE's batch price."""
    stats = fake.stats()["batches"]
    usd = (stats["billed_prompt_tokens"] * 1.0 + stats["billed_completion_tokens"] * 2.0) / 1e6 * 0.5
    return stats["lines_billed"], usd


def test_a_lost_create_reply_with_no_retries_is_found_and_its_items_paid_once(fake, tmp_path, monkeypatch):
    fake.configure(batch_route_fail={"create_lost": 1})  # the batch runs at the provider; its creator hears a 503
    path = _grid(tmp_path, fake.url, topics=20, retries=0)
    _collect(tmp_path, path, monkeypatch)
    result, run = _collect(tmp_path, path, monkeypatch)  # a re-run asks only what is not recorded done
    cands = _candidates(run.dir)
    assert len(cands) == 20 and all(c.ok for c in cands.values())
    stats = fake.stats()["batches"]
    assert (stats["created"], stats["lines_billed"]) == (1, 20), "20 paid lines, 1 batch"
    assert recorded_spend(run.dir).usd == pytest.approx(_billed(fake)[1])


def test_a_batch_whose_lookup_failed_is_adopted_by_the_rerun_not_asked_again(fake, tmp_path, monkeypatch, capsys):
    fake.configure(batch_route_fail={"create_lost": 1, "list_batches": 1000})  # nothing can tell if it exists
    path = _grid(tmp_path, fake.url, topics=20, retries=0)
    first, run = _collect(tmp_path, path, monkeypatch)
    cands = _candidates(run.dir)
    assert first.failed == 20 and all(c.error_kind == "batch_unknown" for c in cands.values())
    [bad, *_] = cands.values()
    assert "not asked again until it is found or confirmed absent" in bad.error and "bench_batch=" in bad.error
    assert fake.stats()["batches"]["created"] == 1
    fake.configure(batch_route_fail={})  # the provider's batch list can be read again
    second, run = _collect(tmp_path, path, monkeypatch)  # each item asked again, as a new attempt (a new key)
    cands = _candidates(run.dir)
    assert second.done == 20 and all(c.ok for c in cands.values())
    [batch_id] = {c.usage.batch_id for c in cands.values()}
    stats = fake.stats()["batches"]
    assert (stats["created"], stats["lines_billed"]) == (1, 20), "the re-run adopted the batch: 20 paid lines"
    assert "adopted" in capsys.readouterr().out
    assert [b.batch_id for b in batches_of(run.dir)] == [batch_id]


def test_a_create_the_provider_confirms_never_happened_is_asked_again(fake, tmp_path, monkeypatch):
    fake.configure(batch_route_fail={"create": 1})  # refused with a 503: no batch exists, the list says so
    path = _grid(tmp_path, fake.url, topics=5, retries=0)
    first, run = _collect(tmp_path, path, monkeypatch)
    assert first.failed == 5 and fake.stats()["batches"]["created"] == 0
    assert [b.status for b in batches_of(run.dir)] == ["never_created"]
    second, run = _collect(tmp_path, path, monkeypatch)
    assert second.done == 5 and fake.stats()["batches"]["created"] == 1


def test_a_lost_create_reply_is_found_by_its_input_file_where_the_provider_keeps_no_metadata(
        fake, tmp_path, monkeypatch):
    fake.configure(batch_route_fail={"create_lost": 1}, batch_drop_metadata=True)
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, topics=5, retries=1), monkeypatch)
    assert result.done == 5
    stats = fake.stats()["batches"]
    assert (stats["created"], stats["lines_billed"]) == (1, 5), "never created twice"


def test_a_lookup_matches_a_batch_without_metadata_by_its_requests_and_never_guesses(fake, tmp_path):
    fake.configure(batch_drop_metadata=True)  # a provider that keeps no metadata
    api = BatchApi(resolve(ModelSpec(model="openai/m1", api_base=fake.url)))
    body = {"model": "m1", "messages": [{"role": "user", "content": "hi"}]}

    async def main(info: BatchInfo):
        file_id = await api.upload("in.jsonl", b"".join(jsonl_line(k, body) for k in ("k1", "k2")))
        made = await api.create(file_id, "24h", {"bench_batch": "lost"})
        try:
            return made.id, await lookup(api, info, lambda fn, *args: fn(*args))
        finally:
            await close_clients()  # LiteLLM's clients of this loop

    now = BatchInfo("lost", "e", "openai/m1", ["k1", "k2"], at=_iso_now())
    made, found = asyncio.run(main(now))
    assert found is not None and found.id == made, "found by its input file's custom_ids"
    _, other = asyncio.run(main(BatchInfo("other", "e", "openai/m1", ["k3"], at=_iso_now())))
    assert other is None, "a batch of other requests is not it: the list confirms absence"
    fake.configure(batch_route_fail={"list_batches": 10**6})
    with pytest.raises(ProviderError):  # a list that cannot be read is never taken for "absent"
        asyncio.run(main(now))


def _iso_now() -> str:
    return datetime.now(timezone.utc).isoformat()


def test_a_request_answered_twice_differently_is_a_conflict_recorded_failed_with_both_replies(
        fake, tmp_path, monkeypatch):
    fake.configure(batch_duplicate_lines=1)
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, topics=5, retries=2), monkeypatch)
    cands = _candidates(run.dir)
    assert result.done == 4 and result.failed == 1
    [bad] = [c for c in cands.values() if not c.ok]
    assert bad.error_kind == "batch_conflict" and "(again)" in bad.error, "both replies are kept, none wins"
    assert len(bad.usage.paid_attempts) == 2, "both lines were billed and are on its record"
    [info] = batches_of(run.dir)
    assert len(info.conflicts) == 1 and len(next(iter(info.conflicts.values()))) == 2
    assert "4 of 5 batched requests answered" in summary_line(run.dir)
    assert _billed(fake)[0] == 6 and recorded_spend(run.dir).usd == pytest.approx(_billed(fake)[1])


def test_lines_of_no_request_are_counted_apart_and_in_the_spend(fake, tmp_path, monkeypatch):
    fake.configure(batch_unknown_lines=1)
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, topics=5, retries=2), monkeypatch)
    assert result.done == 5
    line = summary_line(run.dir)
    assert "5 of 5 batched requests answered" in line and "1 output lines of no request" in line
    assert _billed(fake)[0] == 6 and recorded_spend(run.dir).usd == pytest.approx(_billed(fake)[1])


def test_an_unreadable_paid_line_is_counted_in_the_spend_and_its_request_asked_again(fake, tmp_path, monkeypatch):
    fake.configure(batch_unreadable_lines=1)
    result, run = _collect(tmp_path, _grid(tmp_path, fake.url, topics=5, retries=2), monkeypatch)
    cands = _candidates(run.dir)
    assert result.done == 5 and all(c.ok for c in cands.values())
    assert _billed(fake)[0] == 6 and recorded_spend(run.dir).usd == pytest.approx(_billed(fake)[1])
    [retried] = [c for c in cands.values() if c.usage.paid_attempts]
    assert retried.usage.attempts == 2 and len(retried.usage.paid_attempts) == 2, "the unreadable line, then its answer"
    assert "1 unreadable output lines" in summary_line(run.dir)
