"""The rubric prompt *without* bench's injection defence (the answer pasted in plainly): the baseline
``benchmarks/injection.py`` measures the defence against. No mode uses it."""

from __future__ import annotations

from bench.config.reply_schemas import response_format
from bench.core.errors import JudgeParseError, ProviderError
from bench.judge._prompts import RUBRIC_USER, clip, criterion_scales, score_fields
from bench.judge.layout import judge_messages
from bench.judge.grader import Item, Judge
from bench.judge.replies import extract_json, validate_scores
from bench.models.client import LLM


def undefended_messages(judge: Judge, item: Item) -> list[dict]:
    """Return the rubric mode's messages for ``item`` with the answer pasted in plainly (no tags, no data note)."""
    text, _note = clip(item.texts[0], judge.rubric.max_chars)
    user = RUBRIC_USER.format(context=f"The model was asked:\n{item.question}", response=text, note="",
                              fields=score_fields(judge.rubric)).replace("\n\n\n\n", "\n\n")
    return judge_messages(judge, user)


async def grade_undefended(judge: Judge, item: Item, llm: LLM) -> float | None:
    """Return the composite the judge gives ``item`` under the undefended prompt (None if it cannot be read)."""
    try:
        comp = await llm.complete(judge.entry.spec(), undefended_messages(judge, item),
                                  response_format=response_format(judge.rubric.item_schema(), "grade"))
        scores = validate_scores(extract_json(comp.text), criterion_scales(judge.rubric))
    except (JudgeParseError, ProviderError):
        return None
    return judge.rubric.composite(scores)
