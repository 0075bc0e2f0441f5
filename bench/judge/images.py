"""The images a judge is shown: with ``images: true`` each graded item's scenario images follow the text of its
user message, as the model under test saw them; otherwise the messages stay exactly as they were."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.config.rubrics import Rubric
from bench.core.images import attach_images
from bench.judge.grader import Item


def with_images(rubric: Rubric, messages: list[dict[str, Any]], items: Sequence[Item],
                labels: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Return ``messages`` with the items' scenario images after the user text, when ``rubric.images``."""
    if not rubric.images:
        return messages
    for n, item in enumerate(items):
        label = f"Images of item {labels[n]}:" if labels is not None else None
        messages = attach_images(messages, item.scenario.images, label)
    return messages
