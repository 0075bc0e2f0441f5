"""The judge stage pipelined with collect: each new answer is graded as soon as what it completes is there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from bench.core.records import Candidate
from bench.core.writer import Halt
from bench.judge.grader import Emit, Item, Judge, grade_items
from bench.judge.stage import items_for
from bench.models.client import LLM
from bench.run import Run


class JudgeStream:
    """Judges candidates as collect produces them (the pipelined sweep): one event loop, one cap.

    Single-item modes grade a candidate as soon as it arrives; the packed mode grades every k
    arrivals; pairwise against a baseline waits for both answers of a scenario. ``drain``
    grades what is left (partial packs) and waits for everything in flight. Once ``halt``
    (the stage's ``Halt``) is set by a failed write, nothing new is started. ``planned(judge_id, n)``
    is told of the ``n`` judgments each new candidate adds (a progress bar whose total grows).
    """

    def __init__(self, run: Run, llm: LLM, judges: list[Judge], emit: Emit, done: set[str],
                 halt: Halt | None = None, planned: Callable[[str, int], None] | None = None):
        self.run, self.llm, self.judges, self.emit, self.done = run, llm, judges, emit, done
        self.halt, self.planned = halt, planned
        self.tasks: set[asyncio.Task] = set()
        self.packs: dict[tuple[str, int], list[Item]] = {}  # (judge id, repeat) → items waiting for a packed call
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
                if judge.grader.packed:
                    self._add_to_pack(judge, item)
                else:
                    self._spawn(grade_items(judge, [item], self.llm, self.emit, seed=self.run.sweep.seed,
                                            done=self.done, halt=self.halt))

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

    def _add_to_pack(self, judge: Judge, item: Item) -> None:
        key = (judge.entry.id, item.repeat)  # one repeat per packed call
        pack = self.packs.setdefault(key, [])
        pack.append(item)
        if len(pack) >= max(1, judge.entry.pack_size):
            self.packs[key] = []
            self._spawn(grade_items(judge, pack, self.llm, self.emit, seed=self.run.sweep.seed, halt=self.halt))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def drain(self) -> None:
        """Grade partial packs and wait for every grading started so far."""
        by_id = {j.entry.id: j for j in self.judges}
        for (judge_id, _repeat), rest in list(self.packs.items()):
            self.packs[(judge_id, _repeat)] = []
            judge = by_id[judge_id]
            if rest and not self.halt:
                self._spawn(grade_items(judge, rest, self.llm, self.emit, seed=self.run.sweep.seed, halt=self.halt))
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
