"""What a sweep will send, stage by stage, before anything is sent.

For collect (per model) and for every judge (per judge, with its mode: both pairwise
orders, one request per checklist requirement, one per packed batch, none for automated
checks): the items, how many the run folder already holds, the first-turn requests still
to send, and how many of those the response cache already answers. Repair turns and
retries come on top. Judge requests of answers not collected yet are counted from the
plan; whether the cache holds them cannot be known before the answers exist.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.collect import WorkItem, make_candidate, plan
from bench.config.templates import render
from bench.core.outcome import row_format
from bench.core.records import Candidate, Judgment
from bench.core.tally import Planned
from bench.judge.grader import Item, Judge
from bench.judge.stage import items_for, judgment_counts, load_judges, next_attempts
from bench.models.client import LLM
from bench.models.preflight import preflight
from bench.pipeline import Run, make_llm, open_run


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
    work = plan(run.sweep, run.scenarios, run.cells)
    out = _collect_plans(run, llm, work) if run.sweep.collects else []
    judges = load_judges(run)
    if judges:
        stored = {c.id: c for c in run.store.latest(Candidate).values() if c.ok}
        future = {it.candidate_id: make_candidate(it, [], output="") for it in work if it.candidate_id not in stored}
        graded = (run.store.done_ids(Judgment), run.store.attempts(Judgment))
        for judge in judges:
            out.append(_judge_plan(run, llm, judge, [*stored.values(), *future.values()], set(future), graded))
    return out


def _collect_plans(run: Run, llm: LLM, work: list[WorkItem]) -> list[StagePlan]:
    store = run.store
    done, tries = store.done_ids(Candidate), store.attempts(Candidate)
    limit = run.sweep.limits.max_attempts
    plans = []
    for model in run.sweep.models:
        mine = [it for it in work if it.cell.model.id == model.id]
        if not mine:
            continue
        todo = [it for it in mine if it.candidate_id not in done and tries.get(it.candidate_id, 0) < limit]
        keys = [llm.request_key(model.spec(), render(it.cell.prompt, it.scenario), sample=it.sample,
                                attempt=tries.get(it.candidate_id, 0) + 1) for it in todo]
        cached = llm.cache.contains(keys) if keys and llm.cache is not None else 0
        plans.append(StagePlan("collect", model.id, "collect", len(mine), len(mine) - len(todo), len(todo), cached))
    return plans


def _judge_plan(run: Run, llm: LLM, judge: Judge, candidates: list[Candidate], future: set[str],
                graded: tuple[set[str], dict[str, int]]) -> StagePlan:
    done, tries = graded
    items = items_for(judge, run.scenarios, candidates)
    per_item = len(judge.judgment_ids(items[0])) if items else 1
    pending, exhausted = next_attempts(judge, items, done, tries, run.sweep.limits.max_attempts)
    n_done = (len(items) - len(pending) - len(exhausted)) * per_item
    if judge.grader.packed:  # which items share a call is decided while grading
        requests = math.ceil(len(pending) / max(1, judge.entry.batch_size))
        return StagePlan("judge", judge.entry.id, judge.mode, len(items) * per_item, n_done, requests, 0, 0)
    known = [it for it in pending if not future.intersection(it.ids)]
    requests, keys = _requests(judge, llm, known, done)
    unknown = sum(len(judge.grader.first_requests(judge, it, done) or []) for it in pending
                  if future.intersection(it.ids))
    cached = llm.cache.contains(keys) if keys and llm.cache is not None else 0
    return StagePlan("judge", judge.entry.id, judge.mode, len(items) * per_item, n_done, requests + unknown,
                     cached, unknown)


def _requests(judge: Judge, llm: LLM, items: Iterable[Item], done: set[str]) -> tuple[int, list[str]]:
    spec, keys = judge.entry.spec(), []
    for item in items:
        for messages, rf in judge.grader.first_requests(judge, item, done) or []:
            keys.append(llm.request_key(spec, messages, response_format=rf, attempt=item.attempt))
    return len(keys), keys


def plan_table(plans: list[StagePlan]) -> str:
    """Return the plans as an aligned table with a total line."""
    head = ("stage", "model/judge", "mode", "items", "done", "requests", "cached", "to send")
    rows = [(p.stage, p.id, p.mode, str(p.items), str(p.done), str(p.requests),
             f"{p.cached}{'+?' if p.unknown else ''}", str(p.to_send)) for p in plans]
    total = ("total", "", "", str(sum(p.items for p in plans)), str(sum(p.done for p in plans)),
             str(sum(p.requests for p in plans)), str(sum(p.cached for p in plans)), str(sum(p.to_send for p in plans)))
    fmt = row_format([head, *rows, total])
    return "\n".join(fmt.format(*r) for r in [head, *rows, total])


def validate(params: str | Path, cells: str | None = None) -> int:
    """`bench validate`: print the grid and, per stage, the requests a sweep would send now; run the preflight.

    Calls no model: the preflight only checks model strings, keys and that every api_base answers.
    """
    run = open_run(params, cells=cells)
    print(run.describe())
    for cell in run.cells:
        print(f"  cell {cell.key}: {cell.model.model} {cell.model.params or ''}")
    for j in run.sweep.judges:
        print(f"  judge {j.id}: {j.model}, rubric {j.rubric}")
    plans = plan_requests(run, make_llm(run))
    print("requests a sweep would send now (first turns; retries and repair turns come on top; "
          "'+?': answers not collected yet, so their judge requests cannot be looked up in the cache):")
    print(plan_table(plans))
    preflight([c.model.spec() for c in run.cells] + [j.spec() for j in run.sweep.judges])
    print("preflight: ok (every model string known, every key set, every api_base answering); nothing was called")
    return 0


# -- the totals of a sweep's progress (bench.sweep.progress, notebooks): everything planned, done or not --

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
