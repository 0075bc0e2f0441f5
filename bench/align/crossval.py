"""`bench align`'s cross-validation: per fold, variants built from its train answers and graded on its held-out
ones; then each variant kind's held-out agreement over all folds, and the kind chosen. A leak raises."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bench.align.folds import Fold, check_built_apart
from bench.align.heldout import Agreement, agreement
from bench.align.optimizer import Proposal, propose
from bench.align.reviews import ReviewedAnswer
from bench.align.variants import KINDS, ORIGINAL, pick_examples, variant_rubric, variant_text
from bench.core.errors import BenchError
from bench.core.records import Usage
from bench.core.spend import paid_cost
from bench.judge import Judge
from bench.judge.rubric import grade_rubric
from bench.models.client import LLM
from bench.models.routing import ModelSpec


@dataclass
class Setup:
    """What the cross-validation needs besides the answers and folds."""

    llm: LLM
    judge: Judge
    optimizer: ModelSpec | None  # None: no anchor rewrites (only the few-shot variant)
    max_examples: int
    rubric_id: str  # the id the variants are written under (their prompts do not show it)
    resamples: int = 2000
    seed: int = 0


@dataclass
class Variant:
    """One variant kind over every fold: its held-out grades and agreement, or why it could not be built."""

    kind: str
    grades: dict[str, dict[str, float] | None] = field(default_factory=dict)
    agreement: Agreement | None = None
    error: str | None = None


@dataclass
class CrossValidation:
    """The before, every variant kind's held-out agreement, what each fold was built from and scored on."""

    before: Agreement
    variants: dict[str, Variant]
    folds: list[dict[str, Any]]
    # requests sent, answered by the cache, paid now (cost_usd None: some paid reply had no known price)
    usage: dict[str, Any] = field(default_factory=lambda: {"calls": 0, "cache_hits": 0, "cost_usd": 0.0})

    def best(self) -> str:
        """Return the kind with the highest held-out kappa (ties: the simplest; none better: the rubric)."""
        order = [ORIGINAL, *KINDS]
        scores = {ORIGINAL: self.before.kappa, **{k: v.agreement.kappa for k, v in self.variants.items()
                                                    if v.agreement is not None}}
        valid = [k for k in order if scores.get(k) is not None]
        if not valid:
            return ORIGINAL
        return max(valid, key=lambda k: (round(scores[k], 4), -order.index(k)))


def kinds(setup: Setup) -> tuple[str, ...]:
    """Return the variant kinds this setup builds: every kind with an optimizer, else the few-shot one alone."""
    return KINDS if setup.optimizer is not None else ("examples",)


def fold_texts(setup: Setup, train: list[ReviewedAnswer], proposal: Proposal | None) -> dict[str, str | None]:
    """Return each variant kind's rubric text built from ``train`` (None: it cannot be, its optimizer failed)."""
    source, examples = setup.judge.rubric, pick_examples(train, setup.max_examples)
    anchors = proposal.anchors if proposal is not None else None
    texts: dict[str, str | None] = {"examples": variant_text(source, setup.rubric_id, examples=examples)}
    if setup.optimizer is not None:
        texts["anchors"] = variant_text(source, setup.rubric_id, anchors=anchors) if anchors is not None else None
        texts["both"] = (variant_text(source, setup.rubric_id, anchors=anchors, examples=examples)
                         if anchors is not None else None)
    return texts


async def cross_validate(setup: Setup, answers: list[ReviewedAnswer], folds: list[Fold],
                         before: dict[str, dict[str, float] | None]) -> CrossValidation:
    """Return the held-out agreement of every variant kind over ``folds``, and the judge's before."""
    by_unit = {a.unit: a for a in answers}
    trains = [[by_unit[u] for u in f.train] for f in folds]
    proposals = await asyncio.gather(*(_propose(setup, t) for t in trains))
    result = CrossValidation(agreement(answers, before, setup.judge.rubric, resamples=setup.resamples,
                                       seed=setup.seed), {k: Variant(k) for k in kinds(setup)}, [])
    jobs = []
    for fold, train, proposal in zip(folds, trains, proposals, strict=True):
        texts = fold_texts(setup, train, proposal)
        shown = pick_examples(train, setup.max_examples)
        built = [a.unit for a in shown] + list(proposal.shown if proposal is not None else ())
        check_built_apart(fold, built, fold.test)  # raises on a leak: nothing of a fold's test builds its variant
        result.folds.append({"fold": fold.index, "train": list(fold.train), "test": list(fold.test),
                             "examples": [a.unit for a in shown],
                             "optimizer_shown": list(proposal.shown) if proposal is not None else [],
                             "optimizer_error": proposal.error if proposal is not None else None,
                             "rewrites": _rewrites(proposal)})
        count_usage(result.usage, proposal.usage if proposal is not None else None)
        for kind, text in texts.items():
            if text is None:
                result.variants[kind].error = f"fold {fold.index}: {proposal.error}"
                continue
            judge = Judge(setup.judge.entry, variant_rubric(text, setup.judge.rubric.path.parent, setup.rubric_id))
            jobs += [(kind, unit, _grade(setup.llm, judge, by_unit[unit])) for unit in fold.test]
    graded = await asyncio.gather(*(job for _k, _u, job in jobs))
    for (kind, unit, _job), (grades, usage) in zip(jobs, graded, strict=True):
        result.variants[kind].grades[unit] = grades
        count_usage(result.usage, usage)
    for v in result.variants.values():
        if v.error is None:
            v.agreement = agreement(answers, v.grades, setup.judge.rubric, resamples=setup.resamples,
                                    seed=setup.seed)
    return result


async def final_text(setup: Setup, answers: list[ReviewedAnswer], kind: str,
                     provenance: dict[str, Any]) -> tuple[str, Proposal | None]:
    """Return the chosen kind's rubric text built from every reviewed answer: the version written."""
    proposal = await _propose(setup, answers) if kind in ("anchors", "both") else None
    if proposal is not None and proposal.anchors is None:
        raise BenchError(f"the optimizer's proposal over every reviewed answer failed ({proposal.error}); "
                         f"nothing was written: run bench align again (what succeeded is cached)")
    examples = pick_examples(answers, setup.max_examples) if kind in ("examples", "both") else []
    text = variant_text(setup.judge.rubric, setup.rubric_id, anchors=proposal.anchors if proposal else None,
                        examples=examples, provenance=provenance)
    return text, proposal


async def _propose(setup: Setup, train: list[ReviewedAnswer]) -> Proposal | None:
    if setup.optimizer is None:
        return None
    return await propose(setup.llm, setup.optimizer, setup.judge.rubric, pick_examples(train, setup.max_examples))


async def _grade(llm: LLM, judge: Judge, answer: ReviewedAnswer) -> tuple[dict[str, float] | None, Usage | None]:
    """Return a variant's grades of one answer (None when its grading failed) and the grading's usage."""
    j = await grade_rubric(judge, answer.item, llm)
    return (dict(j.scores) if j.ok and j.scores else None), j.usage


def count_usage(total: dict[str, Any], usage: Usage | None) -> None:
    """Add one call's usage to ``total``: the requests sent, the cache's answers, the cost paid now."""
    if usage is None:
        return
    total["calls"] += usage.calls or 0
    total["cache_hits"] += usage.cache_hits or 0
    paid = paid_cost(usage)
    total["cost_usd"] = None if paid is None or total["cost_usd"] is None else total["cost_usd"] + paid


def _rewrites(proposal: Proposal | None) -> dict[str, dict[str, str]]:
    if proposal is None or not proposal.anchors:
        return {}
    return {c: {str(level): text for level, text in levels.items()} for c, levels in proposal.anchors.items()}
