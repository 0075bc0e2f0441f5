"""The collect stage: every (model, prompt) cell answers every scenario, `samples` times.

Work already done (a successful candidate with the same content id) is skipped, so a
re-run makes zero calls and an interrupted run continues where it stopped. Failures are
stored as candidates with ``error`` and redone on the next run. Candidates are appended
in batches (one write + fsync each) as they arrive, and optionally handed to a sink
(the judge stage, in a pipelined sweep).
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bench.config.params import Cell, Sweep
from bench.config.templates import render
from bench.core.errors import Halted, ProviderError
from bench.core.flags import flags
from bench.core.progress import Progress, requests_on_the_wire
from bench.core.records import Candidate, Scenario, content_hash, failed_usage
from bench.core.secrets import redact
from bench.core.stage import StageResult
from bench.core.store import RunStore
from bench.core.writer import BatchWriter, Halt
from bench.models.client import LLM


@dataclass(frozen=True)
class WorkItem:
    """One candidate to produce: a cell, a scenario and a sample index, with its id known up front."""

    cell: Cell
    scenario: Scenario
    sample: int

    @property
    def candidate_id(self) -> str:
        return Candidate.id_prefix + content_hash(Candidate.identity(self._identity()))

    def _identity(self) -> dict:
        p, m = self.cell.prompt, self.cell.model
        return {"model": m.model, "endpoint": m.endpoint, "params": dict(m.params), "prompt_id": p.id,
                "prompt_version": p.version, "prompt_hash": p.content_hash, "scenario_id": self.scenario.id,
                "sample": self.sample}


@dataclass
class CollectResult(StageResult):
    """What a collect run did: planned answers, skipped (already done), new successes and failures."""

    stage: ClassVar[str] = "collect"


def plan(sweep: Sweep, scenarios: list[Scenario], cells: Iterable[Cell]) -> list[WorkItem]:
    """Return every work item of the given cells in a stable order (cell, scenario, sample)."""
    return [WorkItem(c, s, k) for c in cells for s in scenarios for k in range(sweep.samples)]


def answer_counts(sweep: Sweep, run_dir: Path, scenarios: list[Scenario], cells: list[Cell]) -> tuple[int, int]:
    """Return (answers saved, answers planned) of ``cells``: successful candidates in the run folder, and all."""
    ids = [it.candidate_id for it in plan(sweep, scenarios, cells)]
    done = RunStore(run_dir).done_ids(Candidate)
    return sum(i in done for i in ids), len(ids)


def make_candidate(item: WorkItem, messages: list[dict], *, output: str | None = None,
                   error: Exception | None = None, usage=None, attempt: int = 1) -> Candidate:
    """Return the Candidate record of a finished work item: its answer, or its failure as data."""
    kind = getattr(error, "kind", None) or ("internal" if error is not None else None)
    if error is not None and usage is None:
        usage = failed_usage(error)
    return Candidate(**item._identity(), id=item.candidate_id, model_id=item.cell.model.id, messages=messages,
                     output=output, error=None if error is None else str(error), error_kind=kind, usage=usage,
                     attempt=attempt, flags=flags(output))


async def collect(sweep: Sweep, run_dir: Path, scenarios: list[Scenario], cells: list[Cell], llm: LLM, *,
                  shard: str | None = None, progress: str = "auto",
                  sink: Callable[[Candidate], None] | None = None, halt: Halt | None = None) -> CollectResult:
    """Produce every missing candidate of ``cells``; return what was done.

    Concurrency is bounded by ``llm``'s cap (one cap for the whole process). If a write of
    the stage fails (disk full), no new call starts, calls in flight finish, what could not
    be written is saved to a rescue file, and StoreError says so once. A call refused because
    ``limits.budget_usd`` is reached (``Halted``: bench.models.budget) stops it the same way: its
    item and the items not started get no record, and that Halted is raised once at the end.
    ``halt``: shared with the caller's writers (a pipelined judge); then the caller raises it, after its own rescue.
    """
    t0, calls0 = time.monotonic(), llm.calls
    store = RunStore(run_dir, shard=shard)
    store.ensure_writable()
    items = plan(sweep, scenarios, cells)
    done_ids = store.done_ids(Candidate)
    tries = store.attempts(Candidate)
    pending = [it for it in items if it.candidate_id not in done_ids]
    result = CollectResult(planned=len(items), skipped=len(items) - len(pending))
    exhausted = [it for it in pending if tries.get(it.candidate_id, 0) >= sweep.limits.max_attempts]
    if exhausted:  # asked max_attempts times already: left failed, reported, never paid for again
        result.exhausted = len(exhausted)
        pending = [it for it in pending if tries.get(it.candidate_id, 0) < sweep.limits.max_attempts]
    bar = Progress("collect", _totals(pending), mode=progress, wire=requests_on_the_wire(llm))
    writer = BatchWriter(store, halt=halt)
    work = iter(pending)

    async def worker() -> None:
        for item in work:  # a shared iterator: each item is taken by exactly one worker
            if writer.halt:  # a write failed: start no new call (the ones in flight finish, and are kept)
                return
            try:
                cand = await _produce(item, llm, tries.get(item.candidate_id, 0) + 1)
            except Halted as stop:  # the budget is reached (or a batch refused): no record, no new item
                writer.halt.stop(stop)
                return
            writer.add(cand)
            result.done += cand.ok
            result.failed += not cand.ok
            bar.update(item.cell.model.id, failed=not cand.ok)
            if sink is not None and cand.ok:
                sink(cand)

    try:
        n_workers = llm.pool(len(pending), {c.model.spec() for c in cells})
        await asyncio.gather(writer.run(), _then(asyncio.gather(*(worker() for _ in range(n_workers))), writer))
    finally:
        writer.flush()  # whatever happens (Ctrl-C, a bug, a full disk), nothing already answered is lost
        bar.close()
    if halt is None:
        writer.halt.check()  # one message: the error, what was saved where, what to do
    result.calls, result.wall_s = llm.calls - calls0, time.monotonic() - t0
    return result


async def _then(task: asyncio.Future, writer: BatchWriter) -> None:
    try:
        await task
    finally:
        writer.stop()


def _totals(items: list[WorkItem]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for it in items:
        totals[it.cell.model.id] = totals.get(it.cell.model.id, 0) + 1
    return totals


async def _produce(item: WorkItem, llm: LLM, attempt: int = 1) -> Candidate:
    """Answer one work item; a failure becomes a candidate with ``error``, never an exception.

    ``attempt`` > 1 (a resume asking a failure again) is part of the request's identity, so
    it is a fresh request, never a reply kept for an earlier attempt.
    """
    messages = render(item.cell.prompt, item.scenario)
    try:
        comp = await llm.complete(item.cell.model.spec(), messages, sample=item.sample, attempt=attempt,
                                  label=item.candidate_id)
    except ProviderError as err:
        return make_candidate(item, messages, error=err, attempt=attempt)
    except (asyncio.CancelledError, Halted):  # Halted: not the item's failure; it was not started (no record)
        raise
    except Exception as err:  # a bug must not lose the sweep: record it, warn, go on
        warnings.warn(f"collect: unexpected {type(err).__name__} for {item.candidate_id}: {redact(str(err))}",
                      RuntimeWarning)
        return make_candidate(item, messages, error=err, attempt=attempt)
    return make_candidate(item, messages, output=comp.text, usage=comp.usage, attempt=attempt)

