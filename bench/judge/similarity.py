"""The checks of an automated or hybrid judge: similarity checks embed their texts through ``LLM.embed``
(cached, budgeted, priced) and score their cosine; every other check runs in process (bench.config.checks)."""

from __future__ import annotations

import asyncio

from bench.config.checks import CheckResult
from bench.config.structured_checks import SimilarityCheck, similarity_outcome, similarity_texts
from bench.core.errors import ProviderError
from bench.core.records import Usage, add_usage
from bench.judge._asking import Spend
from bench.judge.grader import Item, Judge
from bench.models.client import LLM
from bench.models.embeddings import cosine
from bench.models.routing import ModelSpec


def similarity_checks(judge: Judge) -> list[SimilarityCheck]:
    """Return the judge's similarity checks (none: its checks send nothing)."""
    return [c for c in judge.rubric.checks if isinstance(c, SimilarityCheck)]


async def similarities(judge: Judge, item: Item, llm: LLM, spend: Spend) -> dict[str, CheckResult]:
    """Return each similarity check's result, usage added to ``spend``; raises ProviderError or Halted."""
    spec = judge.entry.embedding_model.spec()  # type: ignore[union-attr] - refused at load without one
    out: dict[str, CheckResult] = {}
    hits: list[Usage] = []  # embeddings the cache (or an identical request in flight) answered: none paid
    try:
        await _each(judge, item, llm, spec, spend, hits, out)
    finally:  # only what was sent is spent (cached parts would count their first cost again); hits are counted
        if hits:
            spend.parts += [add_usage(hits)] if not spend.parts else [Usage.model_construct(  # type: ignore[list-item]
                prompt_tokens=0, completion_tokens=0, cost_usd=0.0, calls=0, cache_hits=len(hits), cached=True)]
    return out


async def _each(judge: Judge, item: Item, llm: LLM, spec: ModelSpec, spend: Spend, hits: list[Usage],
                out: dict[str, CheckResult]) -> None:
    for check in similarity_checks(judge):
        reference = item.scenario.reference or {}
        if check.reference not in reference:
            out[check.id] = CheckResult(check.id, False, f"the scenario has no reference '{check.reference}'")
            continue
        answer, options = similarity_texts(check, item.texts[0] or "", reference[check.reference])
        if not answer or not answer.strip():
            why = "the answer is empty" if answer is not None else f"extract {check.extract!r} found no answer"
            out[check.id] = CheckResult(check.id, False, why, 0.0)
            continue
        got = await asyncio.gather(*(llm.embed(spec, t) for t in [answer, *options]), return_exceptions=True)
        for g in got:
            if isinstance(g, ProviderError):
                spend.failed(g)
            elif not isinstance(g, BaseException):
                (hits.append if g.usage.cached else spend.reply)(g.usage)
        if error := next((g for g in got if isinstance(g, BaseException)), None):
            raise error
        sims = [cosine(got[0].vector, g.vector) for g in got[1:]]  # type: ignore[union-attr]
        best = max(range(len(sims)), key=sims.__getitem__)
        out[check.id] = CheckResult(check.id, *similarity_outcome(check, sims[best], options[best]))
