"""The work of the collect stage: one item per (cell, scenario, sample), its candidate id known before any call
(so what is done is skipped without asking), the messages its first request asks, and its Candidate record."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.config.params import Cell, Sweep
from bench.config.templates import fill_prompt
from bench.core.flags import flags
from bench.core.images import attach_images
from bench.core.records import Candidate, Scenario, content_hash, failed_usage


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


def plan(sweep: Sweep, scenarios: list[Scenario], cells: Iterable[Cell]) -> list[WorkItem]:
    """Return every work item of the given cells in a stable order (cell, scenario, sample)."""
    return [WorkItem(c, s, k) for c in cells for s in scenarios for k in range(sweep.samples)]


def request_messages(item: WorkItem) -> list[dict]:
    """Return the messages a work item asks first: the filled prompt (up to its first user turn), then the images."""
    return attach_images(fill_prompt(item.cell.prompt, item.scenario), item.scenario.images)


def make_candidate(item: WorkItem, messages: list[dict], *, output: str | None = None,
                   error: Exception | None = None, usage=None, attempt: int = 1,
                   reasoning: str | None = None, **conversation: Any) -> Candidate:
    """Return the Candidate of a finished work item: its answer or its failure (``conversation``: transcript, …)."""
    kind = conversation.pop("error_kind", None) or getattr(error, "kind", None) or (
        "internal" if error is not None else None)
    if error is not None and usage is None:
        usage = failed_usage(error)
    return Candidate(**item._identity(), id=item.candidate_id, model_id=item.cell.model.id, messages=messages,
                     output=output, error=None if error is None else str(error), error_kind=kind, usage=usage,
                     attempt=attempt, flags=flags(output),
                     reasoning=reasoning if error is None else getattr(error, "reasoning", None),  # a reasoning_cut
                     **conversation)
