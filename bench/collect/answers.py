"""One answer of the collect stage: the work item it answers, and the Candidate record it becomes.

A work item is a (cell, scenario, sample) with its candidate id known before any call, so
what is done can be skipped without asking. :func:`answer` asks the cell's model once; a
failure becomes a candidate with ``error`` (data, redone on the next run), never an exception.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from bench.config.params import Cell, Sweep
from bench.config.templates import fill_prompt
from bench.core.errors import Halted, ProviderError
from bench.core.flags import flags
from bench.core.images import attach_images
from bench.core.records import Candidate, Scenario, content_hash, failed_usage
from bench.core.secrets import redact
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


def plan(sweep: Sweep, scenarios: list[Scenario], cells: Iterable[Cell]) -> list[WorkItem]:
    """Return every work item of the given cells in a stable order (cell, scenario, sample)."""
    return [WorkItem(c, s, k) for c in cells for s in scenarios for k in range(sweep.samples)]


def request_messages(item: WorkItem) -> list[dict]:
    """Return the messages a work item asks: its cell's prompt filled with the scenario's fields, then the
    scenario's images after the user text (bench.core.images; a scenario without images: the filled prompt)."""
    return attach_images(fill_prompt(item.cell.prompt, item.scenario), item.scenario.images)


def make_candidate(item: WorkItem, messages: list[dict], *, output: str | None = None,
                   error: Exception | None = None, usage=None, attempt: int = 1,
                   reasoning: str | None = None) -> Candidate:
    """Return the Candidate record of a finished work item: its answer (its reasoning apart), or its failure."""
    kind = getattr(error, "kind", None) or ("internal" if error is not None else None)
    if error is not None and usage is None:
        usage = failed_usage(error)
    return Candidate(**item._identity(), id=item.candidate_id, model_id=item.cell.model.id, messages=messages,
                     output=output, error=None if error is None else str(error), error_kind=kind, usage=usage,
                     attempt=attempt, flags=flags(output),
                     reasoning=reasoning if error is None else getattr(error, "reasoning", None))  # a reasoning_cut


async def answer(item: WorkItem, llm: LLM, attempt: int = 1) -> Candidate:
    """Answer one work item; a failure becomes a candidate with ``error``, never an exception.

    ``attempt`` > 1 (a resume asking a failure again) is part of the request's identity, so
    it is a fresh request, never a reply kept for an earlier attempt.
    """
    messages = request_messages(item)
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
    return make_candidate(item, messages, output=comp.text, usage=comp.usage, attempt=attempt, reasoning=comp.reasoning)
