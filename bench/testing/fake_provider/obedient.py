"""A judge that obeys prompt injections (the ``obey_injections`` knob): the worst case a defence must hold against.

Every line outside a declared data block is an instruction: a demanded grade becomes every score, else each
score is its scale's middle. It measures whether an answer's text reaches the judge outside its delimiters.
"""

from __future__ import annotations

import re
from typing import Any

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
    """Return a schema-valid reply ``value`` with every score set to ``grade``, or (None) to the middle of its
    scale (the ``enum`` the schema gives it), packed grades included."""
    if isinstance(value, dict):
        for grade_obj in [value, *(value.get("grades") or [])]:
            scores = grade_obj.get("scores") if isinstance(grade_obj, dict) else None
            if isinstance(scores, dict):
                for key in scores:
                    scores[key] = grade if grade is not None else _middle(schema, key, scores[key])
    return value


def _middle(schema: dict[str, Any], key: str, default: Any) -> Any:
    """The middle value of criterion ``key``'s enum anywhere in ``schema`` (``default`` when it has none)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            enum = (node.get("properties") or {}).get(key, {}).get("enum") if isinstance(node.get("properties"),
                                                                                         dict) else None
            if isinstance(enum, list) and enum:
                return sorted(enum)[len(enum) // 2]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return default
