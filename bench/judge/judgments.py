"""The judge stage: every judge of a run (a jury, concurrently, under one cap) grades its items.
Done judgments are skipped, failures redone on the next run, and records appended as they are made."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Set
from dataclasses import dataclass, replace
from typing import ClassVar

from bench.collect import plan
from bench.config.rubric_spec import mode_refusal
from bench.config.rubrics import check_reference_keys, load_rubric
from bench.config.scenarios import reference_source
from bench.core.digests import current_candidates
from bench.core.errors import ParamsError
from bench.core.images import content_text
from bench.core.progress import Progress, requests_in_flight
from bench.core.records import Candidate, Judgment, Scenario
from bench.core.stage_result import StageResult
from bench.core.store import RunStore
from bench.core.writer import RecordWriter
from bench.judge.automated import refuse_unrunnable_checks
from bench.judge.grader import Item, Judge, grade_items
from bench.judge.transcripts import answer_items, asked, transcript_text, turn_count
from bench.models.client import LLM
from bench.models.routing import ModelSpec
from bench.run import Run


@dataclass
class JudgeResult(StageResult):
    """What a judge run did, over all judges (the same counters as collect's, of judgments)."""

    stage: ClassVar[str] = "judge"
    noun: ClassVar[str] = "judgments"


def judge_specs(judges: Iterable[Judge]) -> list[ModelSpec]:
    """Return the models the judges call (an ``automated`` judge calls none: no key needed)."""
    return [j.entry.spec() for j in judges if j.rubric.mode != "automated"]


def load_judges(run: Run, only: str | Iterable[str] | None = None) -> list[Judge]:
    """Return the run's judges with their rubrics loaded (``only``: judge ids to keep)."""
    entries = run.sweep.judges
    if only:
        wanted = [only] if isinstance(only, str) else list(only)
        unknown = sorted(set(wanted) - {j.id for j in entries})
        if unknown:
            raise ParamsError(f"unknown judge(s) {unknown} in {run.params_path}; judges are "
                              f"{[j.id for j in entries]}")
        entries = [j for j in entries if j.id in wanted]
    judges = [Judge(e, load_rubric(e.rubric, run.root, run.params_path.parent), run.params_path.parent)
              for e in entries]
    for judge in judges:  # a judge entry's own mode: its rubric must have what that mode grades with
        if (refused := mode_refusal(judge.rubric, judge.mode)) is not None:
            raise ParamsError(f"{run.params_path}: judge '{judge.entry.id}' (mode: {judge.mode}), rubric "
                              f"{judge.rubric.path} {refused}")
        if judge.entry.model is None and judge.mode != "automated":
            raise ParamsError(f"{run.params_path}: judge '{judge.entry.id}' has no model: its rubric "
                              f"{judge.rubric.path} grades in mode {judge.mode}, which asks a model; add "
                              f"`model: provider/name` (only a checks-only judge, mode automated, needs none)")
    refuse_unrunnable_checks(judges, run.scenarios, run.params_path)  # a check's reference key: before any spend
    for judge in judges:  # a reference key the rubric shows its judge: before any spend too
        check_reference_keys(judge.rubric, run.scenarios, reference_source(run.sweep, run.params_path))
    return judges


def grid_positions(run: Run) -> dict[tuple[str, str, int], int]:
    """Return each answer's place in the grid's order, ``(cell, scenario id, sample) -> position``; packs follow it."""
    samples = range(run.sweep.samples)
    keys = ((c.key, s.id, n) for c in run.sweep.cells() for s in run.scenarios for n in samples)
    return {key: position for position, key in enumerate(keys)}


def _question(c: Candidate) -> str:
    said = asked(c)  # a conversation: the user message its last turn answers (None for a plain answer)
    if said is not None:
        return said
    users = [m.get("content", "") for m in c.messages if m.get("role") == "user"]
    return content_text(users[-1]) if users else ""  # a message with images: its text parts (bench.core.images)


def items_for(judge: Judge, scenarios: list[Scenario], candidates: list[Candidate],
              owns_dataset: bool = True) -> list[Item]:
    """Return the items ``judge`` grades in this run (dataset pairs only where ``owns_dataset``)."""
    if judge.grader.compares:
        items = _pair_items(judge, scenarios, candidates, owns_dataset)
    else:
        by_scenario = {s.id: s for s in scenarios}
        items = [item for c in candidates if c.scenario_id in by_scenario
                 for item in answer_items(judge, by_scenario[c.scenario_id], c, _question(c))]
    return [replace(item, repeat=r) for r in range(judge.entry.repeats) for item in items]  # `repeats: k`


def _pair_items(judge: Judge, scenarios: list[Scenario], candidates: list[Candidate],
                owns_dataset: bool) -> list[Item]:
    dataset = [s for s in scenarios if "response_A" in s.fields and "response_B" in s.fields]
    if dataset:
        return [] if not owns_dataset else [Item(s, str(s.fields.get("question", "")), (str(s.fields["response_A"]), str(s.fields["response_B"])),
                     (f"{s.id}:A", f"{s.id}:B")) for s in dataset]
    base_key = judge.entry.baseline
    if not base_key:
        raise ParamsError(f"judge {judge.entry.id} is pairwise but names no baseline cell "
                          f"(baseline: model_id/prompt_id@version) and the scenarios hold no response_A/response_B")
    by_scenario = {s.id: s for s in scenarios}
    base = {(c.scenario_id, c.sample): c for c in candidates if c.cell == base_key}
    return [Item(by_scenario[c.scenario_id], _question(c), (c.output or "", b.output or ""), (c.id, b.id),
                 reasonings=(c.reasoning, b.reasoning), transcripts=(_shown(c), _shown(b)))
            for c in candidates if c.cell != base_key and c.scenario_id in by_scenario
            and (b := base.get((c.scenario_id, c.sample))) is not None]


def _shown(c: Candidate) -> str | None:
    """Return a pairwise side's conversation as its judge reads it (None: a plain answer, shown as it was)."""
    return transcript_text(c) if c.transcript is not None else None


def next_attempts(judge: Judge, items: list[Item], done: Set[str], tries: dict[str, int], max_attempts: int,
                  settled: Set[str] = frozenset()) -> tuple[list[Item], list[Item]]:
    """Return (items to grade now, with attempt numbers; items out of attempts), skipping done and ``settled`` ones."""
    pending, exhausted = [], []
    for item in items:
        open_ids = [i for i in judge.judgment_ids(item) if i not in done]
        if not open_ids or settled.issuperset(open_ids):
            continue
        n = max(tries.get(i, 0) for i in open_ids)
        (exhausted if n >= max_attempts else pending).append(replace(item, attempt=n + 1) if n else item)
    return pending, exhausted


def owns_dataset(run: Run) -> bool:
    """Return True if this execution judges the dataset pairs: the one with the grid's first cell (or no grid)."""
    every = run.sweep.cells()
    return not every or every[0].key in {c.key for c in run.cells}


async def judge_stage(run: Run, llm: LLM, judges: list[Judge], *, shard: str | None = None,
                      progress: str = "auto", failed_since: str | None = None) -> JudgeResult:
    """Grade every pending item of every judge; items failed since ``failed_since`` are not asked again."""
    t0, calls0 = time.monotonic(), llm.calls
    store = RunStore(run.dir, shard=shard)
    store.ensure_writable()
    candidates = current_candidates(run.dir, [c for c in RunStore(run.dir).latest(Candidate).values() if c.ok])
    cell_keys = {c.key for c in run.cells} | {j.entry.baseline for j in judges if j.entry.baseline}
    candidates = [c for c in candidates if c.cell in cell_keys]
    order = grid_positions(run)  # the grid's order, not the order answers were written: packs cut alike every run
    candidates.sort(key=lambda c: order.get((c.cell, c.scenario_id, c.sample), len(order)))
    mine = owns_dataset(run)
    done = store.done_ids(Judgment)
    tries = store.attempts(Judgment)
    settled = failed_after(store, failed_since)
    result, work = JudgeResult(), []
    for judge in judges:
        items = items_for(judge, run.scenarios, candidates, mine)
        pending, exhausted = next_attempts(judge, items, done, tries, run.sweep.limits.max_attempts, settled)
        per_item = len(judge.judgment_ids(items[0])) if items else 1
        result.planned += len(items) * per_item
        result.skipped += (len(items) - len(pending) - len(exhausted)) * per_item
        result.exhausted += len(exhausted) * per_item
        work.append((judge, pending, len(pending) * per_item))
    bar = Progress("judge", {j.entry.id: n for j, _p, n in work}, mode=progress, in_flight=requests_in_flight(llm))
    writer = RecordWriter(store)  # a failed write sets writer.halt: no new item starts, the rest is rescued

    def emit(j: Judgment) -> None:
        writer.add(j)
        result.done += j.ok
        result.failed += not j.ok
        bar.update(j.judge_id, failed=not j.ok)

    async def all_judges() -> None:
        try:
            await asyncio.gather(*(grade_items(j, items, llm, emit, seed=run.sweep.seed, done=done,
                                               halt=writer.halt) for j, items, _n in work))
        finally:
            writer.stop()

    try:
        await asyncio.gather(writer.run(), all_judges())
    finally:
        writer.flush()
        bar.close()
    writer.halt.check()  # one message: the error, what was saved where, what to do
    result.calls, result.wall_s = llm.calls - calls0, time.monotonic() - t0
    return result


def failed_after(store: RunStore, since: str | None) -> set[str]:
    """Return the ids of judgments that failed at or after ``since`` and never succeeded (none if None)."""
    if since is None:
        return set()
    return {i for i, r in store.failed(Judgment).items() if r.created_at >= since}


def judgment_counts(run: Run, judges: list[Judge] | None = None) -> tuple[int, int]:
    """Return (judgments saved, judgments planned) of the run's cells; planned counts answers not collected yet."""
    judges = load_judges(run) if judges is None else judges
    store = RunStore(run.dir)
    done = store.done_ids(Judgment)
    every = run.sweep.cells()
    mine = {c.key for c in run.cells}
    dataset = owns_dataset(run)
    work = plan(run.sweep, run.scenarios, run.cells)
    ok = current_candidates(run.dir, [c for c in store.latest(Candidate).values() if c.ok])
    saved = planned = 0
    for judge in judges:
        compares, orders = judge.grader.compares, len(judge.grader.orders)
        base = judge.entry.baseline if compares else None
        candidates = [c for c in ok if c.cell in mine or (base and c.cell == base)]
        items = items_for(judge, run.scenarios, candidates, dataset)
        saved += sum(i in done for item in items for i in judge.judgment_ids(item))
        k = judge.entry.repeats
        if compares and not base:  # dataset pairs: known up front (items_for has made the repeats already)
            planned += orders * len(items)
        elif base:
            baseline = [c for c in every if c.key == base]
            slots = {(it.scenario.id, it.sample) for it in plan(run.sweep, run.scenarios, baseline)}
            planned += k * orders * sum(it.cell.key != base and (it.scenario.id, it.sample) in slots for it in work)
        else:  # per_turn: one per turn of each answer collected, one per answer still to collect
            extra = sum(turn_count(c) - 1 for c in candidates) if judge.rubric.per_turn else 0
            planned += k * (len(work) + extra)
    return saved, planned


def pending_judgments(run: Run, failed_since: str | None = None) -> int:
    """Return how many items some judge of the run has not graded successfully yet (0: nothing to do)."""
    judges = load_judges(run)
    store = RunStore(run.dir)
    candidates = current_candidates(run.dir, [c for c in store.latest(Candidate).values() if c.ok])
    done, tries, settled = store.done_ids(Judgment), store.attempts(Judgment), failed_after(store, failed_since)
    return sum(len(next_attempts(j, items_for(j, run.scenarios, candidates), done, tries,
                                 run.sweep.limits.max_attempts, settled)[0]) for j in judges)
