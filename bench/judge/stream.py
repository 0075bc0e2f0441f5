"""The judge stage pipelined with collect: each new answer is graded as soon as what it completes is there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from bench.collect import WorkItem
from bench.core.records import Candidate
from bench.core.writer import Halt
from bench.judge.grader import Emit, Item, Judge, grade_items
from bench.judge.judgments import grid_positions, items_for
from bench.models.client import LLM
from bench.run import Run


class JudgeStream:
    """Judges candidates as collect produces them (packed: k consecutive answers in the grid's order)."""

    def __init__(self, run: Run, llm: LLM, judges: list[Judge], emit: Emit, done: set[str],
                 halt: Halt | None = None, planned: Callable[[str, int], None] | None = None):
        self.run, self.llm, self.judges, self.emit, self.done = run, llm, judges, emit, done
        self.halt, self.planned = halt, planned
        self.tasks: set[asyncio.Task] = set()
        self.positions: dict[tuple[str, str, int], int] = {}  # an answer collect asks -> its place (``expect``)
        # (judge id, repeat, pack number) → the items waiting for their pack's call, and the answers arrived for it
        self.packs: dict[tuple[str, int, int], list[tuple[int, int, Item]]] = {}  # (position, turn, item)
        self.arrived: dict[tuple[str, int, int], set[int]] = {}
        self.waiting: dict[tuple, dict[str, Candidate]] = {}

    def feed(self, cand: Candidate) -> None:
        """Take one new successful candidate and start whatever grading it completes."""
        if self.halt:  # a write failed: no new call (the candidate is kept; a resume grades it)
            return
        for judge in self.judges:
            items = self._ready_items(judge, cand)
            if judge.grader.packed:
                self._add_to_packs(judge, cand, items)
                continue
            for item in items:
                todo = [i for i in judge.judgment_ids(item) if i not in self.done]
                if not todo:
                    continue
                if self.planned is not None:
                    self.planned(judge.entry.id, len(todo))
                self._spawn(grade_items(judge, [item], self.llm, self.emit, seed=self.run.sweep.seed,
                                        done=self.done, halt=self.halt))

    def expect(self, items: list[WorkItem]) -> None:
        """Take the answers collect will ask: k consecutive ones in the grid's order (``grid_positions``) are a pack."""
        order = grid_positions(self.run)
        keys = sorted(((it.cell.key, it.scenario.id, it.sample) for it in items),
                      key=lambda key: order.get(key, len(order)))
        self.positions = {key: n for n, key in enumerate(keys)}

    def _ready_items(self, judge: Judge, cand: Candidate) -> list[Item]:
        if not judge.grader.compares:
            return items_for(judge, self.run.scenarios, [cand])
        if not judge.entry.baseline:
            return []  # dataset pairs are judged from the scenarios after collect
        slot = self.waiting.setdefault((judge.entry.id, cand.scenario_id, cand.sample), {})
        slot[cand.cell] = cand
        if judge.entry.baseline not in slot:
            return []
        if cand.cell == judge.entry.baseline:
            return items_for(judge, self.run.scenarios, list(slot.values()))
        return items_for(judge, self.run.scenarios, [cand, slot[judge.entry.baseline]])

    def _add_to_packs(self, judge: Judge, cand: Candidate, items: list[Item]) -> None:
        """Put answer ``cand``'s items in their packs (one repeat a pack); grade each pack whose answers are all in."""
        k = max(1, judge.entry.pack_size)
        position = self.positions.get((cand.cell, cand.scenario_id, cand.sample), -1)  # -1: graded at the drain
        number = position // k if position >= 0 else -1
        for item in items:
            key = (judge.entry.id, item.repeat, number)
            todo = [i for i in judge.judgment_ids(item) if i not in self.done]
            if todo:
                self.packs.setdefault(key, []).append((position, item.turn or 0, item))
                if self.planned is not None:
                    self.planned(judge.entry.id, len(todo))
            self.arrived.setdefault(key, set()).add(position)
        if number < 0:
            return
        for key in {(judge.entry.id, item.repeat, number) for item in items}:
            if len(self.arrived[key]) == min(k, len(self.positions) - number * k):
                del self.arrived[key]
                if key in self.packs:
                    self._grade_pack(judge, self.packs.pop(key))

    def _grade_pack(self, judge: Judge, pack: list[tuple[int, int, Item]]) -> None:
        """Grade one pack's items in the grid's order (the grader cuts them k to a call)."""
        items = [item for _position, _turn, item in sorted(pack, key=lambda entry: entry[:2])]
        self._spawn(grade_items(judge, items, self.llm, self.emit, seed=self.run.sweep.seed, halt=self.halt))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def drain(self) -> None:
        """Grade partial packs and wait for every grading started so far."""
        by_id = {j.entry.id: j for j in self.judges}
        for (judge_id, _repeat, _number), rest in list(self.packs.items()):
            if not self.halt:
                self._grade_pack(by_id[judge_id], rest)
        self.packs.clear()
        self.arrived.clear()
        while self.tasks:
            await asyncio.gather(*list(self.tasks))

    async def settle(self, cancel: bool) -> None:
        """Wait for (with ``cancel``, cancel) every grading still running, so none outlives the HTTP session."""
        while self.tasks:
            tasks = list(self.tasks)
            if cancel:
                for task in tasks:
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
