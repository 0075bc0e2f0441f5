"""The collect stage: every (model, prompt) cell answers every scenario, `samples` times. Done work is skipped
(a re-run makes zero calls); failures are stored with ``error`` and redone on the next run."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from bench.collect.answers import answer
from bench.collect.tool_runs import check_functions
from bench.collect.work_items import WorkItem, plan
from bench.core.errors import Halted
from bench.core.progress import Progress, requests_in_flight
from bench.core.records import Candidate
from bench.core.stage_result import StageResult
from bench.core.store import RunStore
from bench.core.writer import Halt, RecordWriter
from bench.models.client import LLM
from bench.models.ratelimit import URGENCY, endpoint_key
from bench.models.routing import ModelSpec
from bench.run import Run


@dataclass
class CollectResult(StageResult):
    """What a collect run did: planned answers, skipped (already done), new successes and failures."""

    stage: ClassVar[str] = "collect"


def answer_counts(run: Run) -> tuple[int, int]:
    """Return (answers saved, answers planned) of the run's cells: successful candidates in the run folder, and all."""
    ids = [it.candidate_id for it in plan(run.sweep, run.scenarios, run.cells)]
    done = RunStore(run.dir).done_ids(Candidate)
    return sum(i in done for i in ids), len(ids)


async def collect_stage(run: Run, llm: LLM, *, shard: str | None = None, progress: str = "auto",
                        sink: Callable[[Candidate], None] | None = None, halt: Halt | None = None,
                        expect: Callable[[list[WorkItem]], None] | None = None) -> CollectResult:
    """Produce every missing candidate of the run's cells, one lane per endpoint; a failed write or ``Halted``
    stops new calls, raised once at the end. ``expect``, then ``sink``: told the items, then each success."""
    t0, calls0 = time.monotonic(), llm.calls
    check_functions({c.prompt.key: c.prompt for c in run.cells}.values(), run.params_path)
    store = RunStore(run.dir, shard=shard)
    store.ensure_writable()
    tries = store.attempts(Candidate)
    result, pending = _pending(run, store, tries, expect)
    bar = Progress("collect", dict(Counter(it.cell.model.id for it in pending)), mode=progress,
                   in_flight=requests_in_flight(llm))
    writer = RecordWriter(store, halt=halt)

    async def worker(lane: Lane) -> None:
        for item in lane.items:  # a lane's shared iterator: each item is taken by exactly one worker
            lane.left -= 1
            URGENCY.set((lane.left + 1) / lane.workers)  # rounds left: a full cap serves the most urgent lane first
            if writer.halt:  # a write failed: start no new call (the ones in flight finish, and are kept)
                return
            try:
                cand = await answer(item, llm, tries.get(item.candidate_id, 0) + 1)
            except Halted as stop:  # the budget is reached (or a batch refused): no record, no new item
                for paid in getattr(stop, "finished", []):  # a conversation's paid turns: failed, with their spend
                    keep(item, paid)
                writer.halt.stop(stop)
                return
            keep(item, cand)

    def keep(item: WorkItem, cand: Candidate) -> None:
        writer.add(cand)
        result.done += cand.ok
        result.failed += not cand.ok
        bar.update(item.cell.model.id, failed=not cand.ok)
        if sink is not None and cand.ok:
            sink(cand)

    try:
        workers = [worker(lane) for lane in lanes(pending, llm) for _ in range(lane.workers)]
        await asyncio.gather(writer.run(), _then(asyncio.gather(*workers), writer))
    finally:
        writer.flush()  # whatever happens (Ctrl-C, a bug, a full disk), nothing already answered is lost
        bar.close()
    if halt is None:
        writer.halt.check()  # one message: the error, what was saved where, what to do
    result.calls, result.wall_s = llm.calls - calls0, time.monotonic() - t0
    return result


def _pending(run: Run, store: RunStore, tries: dict[str, int],
             expect: Callable[[list[WorkItem]], None] | None = None) -> tuple[CollectResult, list[WorkItem]]:
    """Return the stage's result so far and the items it must still answer, in the grid's order (told ``expect``)."""
    items = plan(run.sweep, run.scenarios, run.cells)
    done_ids = store.done_ids(Candidate)
    pending = [it for it in items if it.candidate_id not in done_ids]
    result = CollectResult(planned=len(items), skipped=len(items) - len(pending))
    max_attempts = run.sweep.limits.max_attempts
    left = [it for it in pending if tries.get(it.candidate_id, 0) < max_attempts]  # the rest: failed, never re-paid
    result.exhausted, pending = len(pending) - len(left), left
    if expect is not None:
        expect(pending)
    return result, pending


@dataclass
class Lane:
    """One endpoint's work in a stage: its items (in plan order), how many workers take them, how many are left."""

    items: Iterator[WorkItem]
    workers: int
    left: int


def lanes(items: list[WorkItem], llm: LLM) -> list[Lane]:
    """Return the stage's lanes: one per endpoint, its items (in plan order) and its worker count."""
    by_endpoint: dict[str, list[WorkItem]] = {}
    specs: dict[str, ModelSpec] = {}
    keys: dict[int, str] = {}  # a model entry's endpoint key, worked out once per entry
    for it in items:
        key = keys.get(id(it.cell.model))
        if key is None:
            spec = it.cell.model.spec()
            key = keys[id(it.cell.model)] = endpoint_key(spec)
            specs.setdefault(key, spec)
        by_endpoint.setdefault(key, []).append(it)
    out = []
    for key, work in by_endpoint.items():
        spec = specs[key]
        pool = llm.pool(len(work), [spec])
        n = min(pool, spec.max_concurrency) if spec.max_concurrency and spec.batch is None else pool
        out.append(Lane(iter(work), n, len(work)))
    return out


async def _then(task: asyncio.Future, writer: RecordWriter) -> None:
    try:
        await task
    finally:
        writer.stop()
