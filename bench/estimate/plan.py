"""What a sweep will send, stage by stage, before anything is sent: the requests `bench validate` shows,
and the totals a sweep's progress counts against. Repair turns and retries come on top."""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.outcome import row_format
from bench.core.tally import Planned
from bench.estimate.work import stage_work
from bench.judge.judgments import judgment_counts, load_judges
from bench.models.client import LLM
from bench.run import Run


@dataclass
class StagePlan:
    """The requests one model (collect) or one judge will send in the next sweep."""

    stage: str  # "collect" or "judge"
    id: str  # model id or judge id
    mode: str  # "collect", or the judge's grading mode
    items: int  # answers to produce / grades to make (pairwise: one per order)
    done: int  # already in the run folder
    requests: int  # first-turn requests still to send (before the cache answers some)
    cached: int  # of ``requests``, answered by the response cache
    unknown: int = 0  # of ``requests``, whose cache entry cannot be checked yet (answers not collected)

    @property
    def to_send(self) -> int:
        return self.requests - self.cached


def plan_requests(run: Run, llm: LLM) -> list[StagePlan]:
    """Return one StagePlan per model (collect) and per judge of ``run``; sends nothing."""
    return [StagePlan(w.stage, w.id, w.mode, w.items, w.done, w.requests, w.cached, w.unknown)
            for w in stage_work(run, llm)]


def plan_table(plans: list[StagePlan]) -> str:
    """Return the plans as an aligned table with a total line."""
    head = ("stage", "model/judge", "mode", "items", "done", "requests", "cached", "to send")
    rows = [(p.stage, p.id, p.mode, str(p.items), str(p.done), str(p.requests),
             f"{p.cached}{'+?' if p.unknown else ''}", str(p.to_send)) for p in plans]
    total = ("total", "", "", str(sum(p.items for p in plans)), str(sum(p.done for p in plans)),
             str(sum(p.requests for p in plans)), str(sum(p.cached for p in plans)), str(sum(p.to_send for p in plans)))
    fmt = row_format([head, *rows, total])
    return "\n".join(fmt.format(*r) for r in [head, *rows, total])


# -- the totals of a sweep's progress (bench.sweep.cluster.progress, notebooks): everything planned, done or not --

def planned_per_model(run: Run) -> dict[str, int]:
    """Return the answers the run's cells plan per model id, done or not (nothing when the sweep collects none)."""
    per: dict[str, int] = {}
    if run.sweep.collects:
        each = len(run.scenarios) * run.sweep.samples  # collect.plan: every cell × scenario × sample
        for cell in run.cells:
            per[cell.model.id] = per.get(cell.model.id, 0) + each
    return per


def planned_progress(run: Run) -> Planned:
    """Return what the run plans, for bench.core.tally.progress_line: answers per model, judgments in all
    (None without judges), and the cells and (judge, rubric version) pairs whose records count."""
    judges = load_judges(run)
    return Planned(planned_per_model(run), judgment_counts(run, judges)[1] if judges else None,
                   cells=frozenset(c.key for c in run.cells),
                   rubrics=frozenset((j.entry.id, j.rubric.key) for j in judges))
