"""The images a judge is shown: a rubric with ``images: true`` shows the judge each graded item's scenario
images, after the text of its user message, as the model under test saw them (bench.core.images).

Every grading mode builds its messages as text, then passes them through :func:`with_images`; a rubric
without ``images: true``, or items without images, leave the messages exactly as they were (the same
list: their cache keys and judgment ids do not change).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.config.rubrics import Rubric
from bench.core.images import attach_images
from bench.judge.grader import Item


def with_images(rubric: Rubric, messages: list[dict[str, Any]], items: Sequence[Item],
                labels: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Return ``messages`` with the images of the items' scenarios after the user text, when ``rubric.images``.

    ``labels`` (the packed mode: one short id per item) put a text part naming the item before its images,
    so the judge can tell which image goes with which item of a packed call.
    """
    if not rubric.images:
        return messages
    for n, item in enumerate(items):
        label = f"Images of item {labels[n]}:" if labels is not None else None
        messages = attach_images(messages, item.scenario.images, label)
    return messages
