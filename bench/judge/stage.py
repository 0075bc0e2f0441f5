"""The judge stage: every judge of a run (a jury, concurrently, under one cap) grades its items.

Items come from the run's successful candidates (one per candidate; for pairwise, each
cell's answer against the judge's ``baseline`` cell on the same scenario and sample) or,
for pairwise datasets such as JudgeBench, from the scenarios' ``response_A``/``response_B``.
Judgments already done are skipped; failures are redone on the next run; records are
appended in batches as they are made.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from bench.collect import CollectResult
from bench.core.errors import ParamsError
from bench.judge.modes import Item, Judge, run_judge
from bench.models.client import LLM
from bench.core.progress import Progress, requests_on_the_wire
from bench.core.records import Candidate, Judgment, Scenario
from bench.config.rubrics import load_rubric
from bench.core.store import BatchWriter, RunStore


@dataclass
class JudgeResult(CollectResult):
    """What a judge run did, over all judges (the same counters as collect's, of judgments)."""

    def __str__(self) -> str:
        gave_up = f", {self.exhausted} not asked again (limits.max_attempts reached)" if self.exhausted else ""
        return (f"judge: {self.planned} judgments planned, {self.skipped} already done, {self.done} new, "
                f"{self.failed} failed{gave_up}, {self.calls} model calls, {self.wall_s:.1f}s")


def load_judges(run, only=None) -> list[Judge]:
    """Return the run's judges with their rubrics loaded (``only``: judge ids to keep)."""
    entries = run.sweep.judges
    if only:
        wanted = [only] if isinstance(only, str) else list(only)
        unknown = sorted(set(wanted) - {j.id for j in entries})
        if unknown:
            raise ParamsError(f"unknown judge(s) {unknown} in {run.params_path}; judges are "
                              f"{[j.id for j in entries]}")
        entries = [j for j in entries if j.id in wanted]
    return [Judge(e, load_rubric(e.rubric, run.root, run.params_path.parent)) for e in entries]


def _question(c: Candidate) -> str:
    users = [m.get("content", "") for m in c.messages if m.get("role") == "user"]
    return str(users[-1]) if users else ""


def items_for(judge: Judge, scenarios: list[Scenario], candidates: list[Candidate],
              owns_dataset: bool = True) -> list[Item]:
    """Return the items ``judge`` grades in this run (dataset pairs only where ``owns_dataset``)."""
    if judge.mode == "pairwise":
        return _pair_items(judge, scenarios, candidates, owns_dataset)
    by_scenario = {s.id: s for s in scenarios}
    return [Item(by_scenario[c.scenario_id], _question(c), (c.output or "",), (c.id,))
            for c in candidates if c.scenario_id in by_scenario]


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
    key = lambda c: f"{c.model_id}/{c.prompt_id}@{c.prompt_version}"  # noqa: E731
    base = {(c.scenario_id, c.sample): c for c in candidates if key(c) == base_key}
    return [Item(by_scenario[c.scenario_id], _question(c), (c.output or "", b.output or ""), (c.id, b.id))
            for c in candidates if key(c) != base_key and c.scenario_id in by_scenario
            and (b := base.get((c.scenario_id, c.sample))) is not None]


def next_attempts(judge: Judge, items: list[Item], done: set[str], tries: dict[str, int], max_attempts: int,
                  settled: set[str] | frozenset[str] = frozenset()) -> tuple[list[Item], list[Item]]:
    """Return (items to grade now, each with its attempt number; items left failed after ``max_attempts``).

    Items whose every judgment succeeded are neither, nor are items whose open judgments are
    all ``settled`` (failed earlier in this same sweep: a sweep asks each item once). An item
    that failed n times is asked again as attempt n + 1: a fresh request, never the reply that failed.
    """
    pending, exhausted = [], []
    for item in items:
        open_ids = [i for i in judge.judgment_ids(item) if i not in done]
        if not open_ids or settled.issuperset(open_ids):
            continue
        n = max(tries.get(i, 0) for i in open_ids)
        (exhausted if n >= max_attempts else pending).append(replace(item, attempt=n + 1) if n else item)
    return pending, exhausted


async def judge_stage(run, llm: LLM, judges: list[Judge], *, shard: str | None = None,
                      progress: str = "auto", failed_since: str | None = None) -> JudgeResult:
    """Grade every pending item of every judge; return what was done.

    ``failed_since`` (an ISO time; the sweep's start): items that failed since then are not
    asked again in this stage, so one sweep pays for each item once.
    """
    t0, calls0 = time.monotonic(), llm.calls
    store = RunStore(run.dir, shard=shard)
    store.ensure_writable()
    candidates = [c for c in RunStore(run.dir).latest(Candidate).values() if c.ok]
    cell_keys = {c.key for c in run.cells} | {j.entry.baseline for j in judges if j.entry.baseline}
    candidates = [c for c in candidates if f"{c.model_id}/{c.prompt_id}@{c.prompt_version}" in cell_keys]
    every = run.sweep.cells()  # dataset pairs are judged by one execution: the one with the grid's first cell
    owns_dataset = not every or every[0].key in {c.key for c in run.cells}
    done = store.done_ids(Judgment)
    tries = store.attempts(Judgment)
    settled = failed_after(store, failed_since)
    result, work = JudgeResult(), []
    for judge in judges:
        items = items_for(judge, run.scenarios, candidates, owns_dataset)
        pending, exhausted = next_attempts(judge, items, done, tries, run.sweep.limits.max_attempts, settled)
        per_item = len(judge.judgment_ids(items[0])) if items else 1
        result.planned += len(items) * per_item
        result.skipped += (len(items) - len(pending) - len(exhausted)) * per_item
        result.exhausted += len(exhausted) * per_item
        work.append((judge, pending, len(pending) * per_item))
    bar = Progress("judge", {j.entry.id: n for j, _p, n in work}, mode=progress, wire=requests_on_the_wire(llm))
    writer = BatchWriter(store)  # a failed write sets writer.halt: no new item starts, the rest is rescued

    def emit(j: Judgment) -> None:
        writer.add(j)
        result.done += j.ok
        result.failed += not j.ok
        bar.update(j.judge_id, failed=not j.ok)

    async def all_judges() -> None:
        try:
            await asyncio.gather(*(run_judge(j, items, llm, emit, seed=run.sweep.seed, done=done, halt=writer.halt)
                                   for j, items, _n in work))
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


class JudgeStream:
    """Judges candidates as collect produces them (the pipelined sweep): one event loop, one cap.

    Single-item modes grade a candidate as soon as it arrives; batch mode grades every k
    arrivals; pairwise against a baseline waits for both answers of a scenario. ``drain``
    grades what is left (partial batches) and waits for everything in flight. Once ``halt``
    (the stage's ``store.Halt``) is set by a failed write, nothing new is started. ``planned(judge_id, n)``
    is told of the ``n`` judgments each new candidate adds (a progress bar whose total grows).
    """

    def __init__(self, run, llm: LLM, judges: list[Judge], emit, done: set[str], halt=None, planned=None):
        self.run, self.llm, self.judges, self.emit, self.done = run, llm, judges, emit, done
        self.halt, self.planned = halt, planned
        self.by_scenario = {s.id: s for s in run.scenarios}
        self.tasks: set[asyncio.Task] = set()
        self.batches: dict[str, list[Item]] = {j.entry.id: [] for j in judges}
        self.waiting: dict[tuple, dict[str, Candidate]] = {}

    def feed(self, cand: Candidate) -> None:
        """Take one new successful candidate and start whatever grading it completes."""
        if self.halt:  # a write failed: no new call (the candidate is kept; a resume grades it)
            return
        for judge in self.judges:
            for item in self._ready_items(judge, cand):
                todo = [i for i in judge.judgment_ids(item) if i not in self.done]
                if not todo:
                    continue
                if self.planned is not None:
                    self.planned(judge.entry.id, len(todo))
                if judge.mode == "batch":
                    self._add_to_batch(judge, item)
                else:
                    self._spawn(run_judge(judge, [item], self.llm, self.emit, seed=self.run.sweep.seed,
                                          done=self.done, halt=self.halt))

    def _ready_items(self, judge: Judge, cand: Candidate) -> list[Item]:
        if judge.mode != "pairwise":
            return items_for(judge, self.run.scenarios, [cand])
        if not judge.entry.baseline:
            return []  # dataset pairs are judged from the scenarios after collect
        slot = self.waiting.setdefault((judge.entry.id, cand.scenario_id, cand.sample), {})
        slot[f"{cand.model_id}/{cand.prompt_id}@{cand.prompt_version}"] = cand
        if judge.entry.baseline not in slot:
            return []
        if f"{cand.model_id}/{cand.prompt_id}@{cand.prompt_version}" == judge.entry.baseline:
            return items_for(judge, self.run.scenarios, list(slot.values()))
        return items_for(judge, self.run.scenarios, [cand, slot[judge.entry.baseline]])

    def _add_to_batch(self, judge: Judge, item: Item) -> None:
        batch = self.batches[judge.entry.id]
        batch.append(item)
        if len(batch) >= max(1, judge.entry.batch_size):
            self.batches[judge.entry.id] = []
            self._spawn(run_judge(judge, batch, self.llm, self.emit, seed=self.run.sweep.seed, halt=self.halt))

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def drain(self) -> None:
        """Grade partial batches and wait for every grading started so far."""
        for judge in self.judges:
            rest, self.batches[judge.entry.id] = self.batches[judge.entry.id], []
            if rest and not self.halt:
                self._spawn(run_judge(judge, rest, self.llm, self.emit, seed=self.run.sweep.seed, halt=self.halt))
        while self.tasks:
            await asyncio.gather(*list(self.tasks))

    async def settle(self, cancel: bool) -> None:
        """Wait for (or, if ``cancel``, cancel) every grading still running, so none outlives the HTTP session.

        Called when the stage stops early: after a failed write, gradings in flight finish
        (they are paid; their judgments are kept); after another error they are cancelled.
        """
        while self.tasks:
            tasks = list(self.tasks)
            if cancel:
                for task in tasks:
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def failed_after(store: RunStore, since: str | None) -> set[str]:
    """Return the ids of judgments that failed at or after ``since`` and never succeeded (none if None)."""
    if since is None:
        return set()
    return {i for i, r in store.failed(Judgment).items() if r.created_at >= since}


def judgment_counts(run, judges: list[Judge] | None = None) -> tuple[int, int]:
    """Return (judgments saved, judgments planned) of the run's cells by its judges (or by ``judges``).

    The planned count includes the answers not collected yet (one judgment per planned answer;
    two, one per order, per pair against a baseline), so it does not move as answers arrive.
    """
    from bench.collect import plan  # noqa: PLC0415

    judges = load_judges(run) if judges is None else judges
    store = RunStore(run.dir)
    done = store.done_ids(Judgment)
    every = run.sweep.cells()
    mine = {c.key for c in run.cells}
    owns_dataset = not every or every[0].key in mine
    work = plan(run.sweep, run.scenarios, run.cells)
    key = lambda c: f"{c.model_id}/{c.prompt_id}@{c.prompt_version}"  # noqa: E731
    ok = [c for c in store.latest(Candidate).values() if c.ok]
    saved = planned = 0
    for judge in judges:
        base = judge.entry.baseline if judge.mode == "pairwise" else None
        candidates = [c for c in ok if key(c) in mine or (base and key(c) == base)]
        items = items_for(judge, run.scenarios, candidates, owns_dataset)
        saved += sum(i in done for item in items for i in judge.judgment_ids(item))
        if judge.mode == "pairwise" and not base:  # dataset pairs: known up front
            planned += 2 * len(items)
        elif base:
            baseline = [c for c in every if c.key == base]
            slots = {(it.scenario.id, it.sample) for it in plan(run.sweep, run.scenarios, baseline)}
            planned += 2 * sum(it.cell.key != base and (it.scenario.id, it.sample) in slots for it in work)
        else:
            planned += len(work)
    return saved, planned


def pending_judgments(run, failed_since: str | None = None) -> int:
    """Return how many items some judge of the run has not graded successfully yet (0: nothing to do)."""
    judges = load_judges(run)
    store = RunStore(run.dir)
    candidates = [c for c in store.latest(Candidate).values() if c.ok]
    done, tries, settled = store.done_ids(Judgment), store.attempts(Judgment), failed_after(store, failed_since)
    return sum(len(next_attempts(j, items_for(j, run.scenarios, candidates), done, tries,
                                 run.sweep.limits.max_attempts, settled)[0]) for j in judges)
