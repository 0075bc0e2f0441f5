"""The contract of grading: what a judge grades (Item), who grades (Judge), what a mode does (Grader). A grader
never raises for a bad reply or a failed call: it emits a Judgment with ``error``."""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.config.checks import Trajectory
from bench.config.entries import JudgeEntry
from bench.config.rubrics import Rubric
from bench.core.digests import Digest, judge_digest, rubric_digest
from bench.core.records import JudgeMode, Judgment, Scenario, content_hash
from bench.core.writer import Halt
from bench.models.client import LLM

Request = tuple[list[dict], dict]  # (messages, response_format) of one first-turn request
Emit = Callable[[Judgment], None]  # takes each Judgment as soon as it is made


@dataclass(frozen=True)
class Item:
    """What a judge grades: one response (or A and B) to a scenario; a whole conversation, or one turn (per_turn)."""

    scenario: Scenario
    question: str  # what the model was asked (the filled user prompt, or the dataset question)
    texts: tuple[str, ...]
    ids: tuple[str, ...]  # candidate ids (dataset pairs use "<scenario id>:A" / ":B")
    attempt: int = 1  # > 1: a resume asking an item whose judgment failed again, as a fresh request
    repeat: int = 0  # which of the judge's `repeats` gradings (a distinct request, cached like any other)
    solution: str | None = None  # ``solve_first``: the judge's own answer to ``question`` (bench.judge.solutions)
    reasonings: tuple[str | None, ...] = ()  # each response's reasoning, shown only on request (shown_reasoning)
    transcripts: tuple[str | None, ...] = ()  # shown instead of ``texts`` (None: a plain answer); checks read texts
    trajectories: tuple[Trajectory | None, ...] = ()  # each response's tool calls, read by trajectory checks
    turn: int | None = None  # a ``per_turn`` judge: the assistant turn graded (1-based); None: the whole answer


class Grader(Protocol):
    """A grading mode: how a judge turns items into Judgments."""

    compares: bool  # an item is two responses to one question, graded against each other
    orders: tuple[str | None, ...]  # the judgments of one item: (None,), or one per order shown ("AB", "BA")
    packed: bool  # several items share one request: its messages are known only while grading

    def requests_per_item(self, judge: Judge) -> float:
        """Return the first-turn requests one item costs (a packed item costs 1/k; checks only, 0)."""
        ...

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> list[Request] | None:
        """Return every first-turn request grading ``item`` sends (None when ``packed``)."""
        ...

    async def grade(self, judge: Judge, items: list[Item], llm: LLM, emit: Emit, *, seed: int,
                    done: Set[str], halt: Halt | None) -> None:
        """Grade ``items`` not in ``done``, emitting each Judgment; no new item once ``halt`` is set."""
        ...


GRADERS: dict[JudgeMode, Grader] = {}  # mode name -> its grader; bench.judge.modes fills it, one entry per mode


@dataclass
class Judge:
    """A judge entry of the params file with its loaded rubric."""

    entry: JudgeEntry
    rubric: Rubric
    folder: Path | None = None  # the params file's folder: `kind: python` checks import their modules from it

    @property
    def mode(self) -> JudgeMode:
        """Return the entry's mode, else ``packed`` for a rubric with ``pack_size`` > 1, else the rubric's."""
        if self.entry.mode:
            return self.entry.mode
        return "packed" if self.entry.pack_size > 1 and self.rubric.mode == "rubric" else self.rubric.mode

    @property
    def grader(self) -> Grader:
        """Return the grader of this judge's mode."""
        return GRADERS[self.mode]

    @property
    def params(self) -> dict[str, Any]:
        """Return the judge params that determine its grades (the pack size included when items are packed)."""
        out = dict(self.entry.params)
        if self.grader.packed:
            out["pack_size"] = self.entry.pack_size
        if self.entry.embedding_model is not None:  # similarity checks grade by it
            out["embedding_model"] = self.entry.embedding_model.label()
        return out

    def base(self, item: Item, order: str | None = None) -> dict[str, Any]:
        """Return the identity and provenance fields every Judgment of this judge on ``item`` carries."""
        r = self.rubric
        return {"judge_id": self.entry.id, "judge_model": self.entry.model or "none", "judge_endpoint": self.entry.endpoint,
                "judge_params": self.params, "rubric_id": r.id, "rubric_version": r.version, "rubric_hash": r.hash,
                "mode": self.mode, "candidate_ids": list(item.ids), "scenario_id": item.scenario.id, "order": order,
                "attempt": item.attempt, "repeat": item.repeat, "turn": item.turn}

    @property
    def digests(self) -> list[Digest]:
        """Return what this judge and its rubric version stand for in a run folder (one digest per name)."""
        e = self.entry
        return [judge_digest(e.id, e.model or "none", e.endpoint, self.params, self.mode),
                rubric_digest(self.rubric.key, self.rubric.hash)]

    def judgment_ids(self, item: Item) -> list[str]:
        """Return the ids of the judgments this judge produces for ``item`` (known before any call)."""
        return [Judgment.id_prefix + content_hash(Judgment.identity(self.base(item, o))) for o in self.grader.orders]


async def grade_items(judge: Judge, items: list[Item], llm: LLM, emit: Emit, seed: int = 0,
                      done: Set[str] = frozenset(), halt: Halt | None = None) -> None:
    """Grade every item not in ``done`` (pairwise: its missing order), emitting each Judgment, until ``halt``."""
    await judge.grader.grade(judge, items, llm, emit, seed=seed, done=done, halt=halt)
