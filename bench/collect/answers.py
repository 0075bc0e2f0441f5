"""One answer of the collect stage: a work item asked, and the Candidate record it becomes (a failure: a
candidate with ``error``, redone on the next run, never an exception)."""

from __future__ import annotations

import asyncio
import warnings

from bench.collect.conversation import converse
from bench.collect.work_items import WorkItem, make_candidate, request_messages
from bench.core.errors import Halted, ProviderError
from bench.core.records import Candidate
from bench.core.secrets import redact
from bench.models.client import LLM


async def answer(item: WorkItem, llm: LLM, attempt: int = 1) -> Candidate:
    """Answer one work item (fresh if ``attempt`` > 1); a failure becomes a candidate with ``error``, not a raise."""
    if item.cell.prompt.is_conversation:
        return await converse(item, llm, attempt)
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
