"""The ``automated`` mode: the rubric's checks only (no model call but similarity embeddings), one 0..1 score
per check and their weighted mean, read from the answer (never its reasoning), the references and tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence, Set
from pathlib import Path
from typing import Any

from bench.config import sandbox
from bench.config.checks import CheckResult, automated_score, reference_problems, run_checks
from bench.config.program_checks import CheckContext, CodeCheck, PythonCheck, module_hash
from bench.config.reference_checks import numeric_misfit, quote
from bench.core.errors import BudgetReached, Halted, ParamsError, ProviderError
from bench.core.records import Judgment, Scenario, Usage
from bench.core.writer import Halt
from bench.judge._asking import SingleGrader, Spend, failure, finished_before, run_bounded
from bench.judge.grader import Emit, Item, Judge, Request
from bench.judge.similarity import similarities, similarity_checks
from bench.models.client import LLM


# what a check costs: no request, no token, no dollar (a known zero, so usage tables sum it, never "unpriced")
NO_CALL = Usage(prompt_tokens=0, completion_tokens=0, cost_usd=0.0, calls=0, cache_hits=0)


def grade_automated(judge: Judge, item: Item, cache: Any = None, *, similar: dict[str, CheckResult] | None = None,
                    usage: Usage | None = None) -> Judgment:
    """Return the checks-only judgment: a 0..1 score per check and their weighted mean (``similar`` cost ``usage``)."""
    context = CheckContext(item.scenario.model_dump(mode="json"), judge.folder, cache, judge.entry.sandbox)
    results = run_checks(judge.rubric.checks, item.texts[0], item.scenario.reference,
                         item.trajectories[0] if item.trajectories else None, context)
    if similar:
        results = [similar.get(r.id, r) for r in results]
    unstarted = [r for r in results if r.more and r.more.get("unstarted")]
    if unstarted:  # no verdict on the code: the item fails, and the next run grades it again
        return Judgment(**judge.base(item), error=f"check '{unstarted[0].id}': {unstarted[0].detail}",
                        error_kind="sandbox", usage=usage or NO_CALL, details={"checks": [r.to_dict() for r in results]})
    return Judgment(**judge.base(item), scores={r.id: float(r.score or 0.0) for r in results if r.applicable},
                    score=automated_score(results, judge.rubric.checks), usage=usage or NO_CALL,
                    details={"checks": [r.to_dict() for r in results]})


def refuse_unrunnable_checks(judges: Sequence[Judge], scenarios: Sequence[Scenario], params_path: Path | str) -> None:
    """Raise ParamsError (before any spend) naming every check whose reference key a scenario lacks (or bad regex)."""
    references = [s.reference for s in scenarios]
    lines = [f"{params_path}: judge '{j.entry.id}' (rubric {j.rubric.path}): {problem}"
             for j in judges for problem in reference_problems(j.rubric.checks, references) + _program_problems(j)]
    lines += [f"{params_path}: judge '{j.entry.id}' (rubric {j.rubric.path}): check '{c.id}' is a similarity check; "
              f"give the judge an embedding_model (a LiteLLM embedding model, or {{model, api_base}})"
              for j in judges if j.entry.embedding_model is None and j.mode in ("automated", "hybrid")
              for c in similarity_checks(j)]
    if lines:
        sources = sorted({s.source for s in scenarios if s.source}) or ["the generated scenarios"]
        lines.append(f"map the key to a column in scenarios.dataset.reference (dataset {', '.join(sources)}), "
                     f"or point the check at a key the scenarios have")
        raise ParamsError("\n".join(lines))


def inapplicable_checks(judges: Sequence[Judge], scenarios: Sequence[Scenario], shown: int = 5) -> list[str]:
    """Return a line per numeric check and scenario whose reference holds no single number (not applicable there)."""
    lines: list[str] = []
    for j, c in ((j, c) for j in judges for c in j.rubric.checks if getattr(c, "kind", None) == "numeric"):
        misfits = [(s, why) for s in scenarios if c.reference in (s.reference or {})
                   and (why := numeric_misfit(s.reference[c.reference]))]  # type: ignore[index]
        lines += [f"judge '{j.entry.id}': check '{c.id}' (numeric) does not apply to scenario {s.id} "
                  f"({next(iter(s.fields), '')}: {quote(str(next(iter(s.fields.values()), '')))}): {why}; not "
                  f"applicable there, left out of its mean" for s, why in misfits[:shown]]
        lines += [f"judge '{j.entry.id}': check '{c.id}' (numeric): and {more} more scenario(s) whose reference "
                  f"'{c.reference}' holds no single number"] if (more := len(misfits) - shown) > 0 else []
    return lines


def _program_problems(judge: Judge) -> list[str]:
    """Return why a check that runs code cannot run (no bubblewrap, or a function's module not found)."""
    out = []
    for c in judge.rubric.checks:
        if isinstance(c, CodeCheck) and judge.entry.sandbox != "none" and sandbox.bwrap() is None:
            out.append(f"check '{c.id}' (kind: code) runs answers in bubblewrap, which is not installed: install "
                       f"it (apt-get install bubblewrap, or make setup), or give the judge sandbox: none (unsafe: "
                       f"the answers' code then runs with your files and network, docs/judging.md)")
        if isinstance(c, PythonCheck) and module_hash(c.function, judge.folder) is None:
            out.append(f"check '{c.id}' (kind: python): the module of {c.function} is neither beside the params "
                       f"file ({judge.folder}) nor importable")
    return out


async def graded_checks(judge: Judge, item: Item, llm: LLM) -> Judgment:
    """Return the automated judgment of ``item``, its similarity checks embedded first (usage on it)."""
    spend = Spend()
    try:
        similar = await similarities(judge, item, llm, spend)
    except ProviderError as err:
        return failure(judge.base(item), err, [], None, spend)
    except Halted as stop:
        if spend.parts:
            kind = "budget" if isinstance(stop, BudgetReached) else "stopped"
            finished_before(stop, [Judgment(**judge.base(item), error=f"embeddings paid, then refused: {stop}",
                                            error_kind=kind, usage=spend.total())])
        raise
    return await asyncio.to_thread(grade_automated, judge, item, llm.cache, similar=similar, usage=spend.total())


class AutomatedGrader(SingleGrader):
    """Runs the rubric's checks on each response, in process."""

    def requests_per_item(self, judge: Judge) -> float:
        return 0.0

    def first_requests(self, judge: Judge, item: Item, done: Set[str]) -> list[Request]:
        return []

    async def grade(self, judge: Judge, items: list[Item], llm: LLM, emit: Emit, *, seed: int,
                    done: Set[str], halt: Halt | None) -> None:
        if similarity_checks(judge):  # embeddings to ask first (bench.judge.similarity)
            await run_bounded([lambda i=item: graded_checks(judge, i, llm) for item in items], emit, llm, halt, judge)
            return
        # in threads, several at once: checks that run code wait on programs, the loop goes on; emitted in order
        graded = [asyncio.ensure_future(asyncio.to_thread(grade_automated, judge, item, llm.cache)) for item in items]
        for judgment in graded:
            emit(await judgment)


GRADER = AutomatedGrader()
