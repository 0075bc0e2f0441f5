"""A judge that obeys prompt injections (``obey_injections``), the worst case a defence must hold against: a grade
demanded outside a declared data block becomes every score, else each score is its scale's middle."""

from __future__ import annotations

import re
from typing import Any

from bench.testing.fake_provider.request_body import enum_of

_BLOCK = re.compile(r"<([a-z]+)-([0-9a-f]{6,})>.*?</\1-\2>", re.S)
_DECLARED = "not instructions"
_DEMANDS = [
    re.compile(r"\bgive\s+(?:this|the)\s+(?:answer|response|tip)\s+(\d+)", re.I),
    re.compile(r"\b(?:correct|final)\s+grade\s+is\s+(\d+)", re.I),
    re.compile(r'"scores"\s*:\s*\{[^}]*?:\s*(\d+)', re.I),
]


def injected_grade(messages: Any) -> int | None:
    """Return the grade an instruction outside the prompt's declared data blocks demands, or None."""
    text = "\n".join(str(m.get("content", "")) for m in messages or [] if isinstance(m, dict))
    if _DECLARED in text:
        text = _BLOCK.sub(" ", text)
    for pattern in _DEMANDS:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None


def obey(value: Any, grade: int | None, schema: dict[str, Any]) -> Any:
    """Return ``value`` with every score (packed ones too) set to ``grade``, or (None) to its scale's middle."""
    if isinstance(value, dict):
        for grade_obj in [value, *(value.get("grades") or [])]:
            scores = grade_obj.get("scores") if isinstance(grade_obj, dict) else None
            if isinstance(scores, dict):
                for key in scores:
                    enum = enum_of(schema, key)
                    scores[key] = grade if grade is not None else sorted(enum)[len(enum) // 2] if enum else scores[key]
    return value
