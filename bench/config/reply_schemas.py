"""The JSON schemas of a judge's replies, for OpenAI-style ``response_format``: closed objects, every property
required, integer scales as ``enum`` (llama.cpp's grammar enforces enum, not minimum/maximum)."""

from __future__ import annotations

import re
from typing import Any

from bench.config.rubric_spec import RubricSpec

_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


def item_schema(rubric: RubricSpec) -> dict[str, Any]:
    """Return the JSON schema of one grade: ``{"scores": {<criterion>: int}, "rationale": str}``."""
    return _object({"scores": _scores_schema(rubric), "rationale": {"type": "string"}})


def packed_schema(rubric: RubricSpec, ids: list[str]) -> dict[str, Any]:
    """Return the JSON schema of a packed reply's grades: ``{"grades": [{"id", "scores", "rationale"}, …]}``."""
    ids = list(dict.fromkeys(str(i) for i in ids))
    if not ids:
        raise ValueError("packed_schema needs at least 1 item id")
    grade = _object({"id": {"type": "string", "enum": ids}, "scores": _scores_schema(rubric),
                     "rationale": {"type": "string"}})
    return _object({"grades": {"type": "array", "items": grade}})


def requirement_schema() -> dict[str, Any]:
    """Return the JSON schema of one checklist answer: ``{"fulfilled": bool, "feedback": str}``."""
    return _object({"fulfilled": {"type": "boolean"}, "feedback": {"type": "string"}})


def pairwise_schema(rubric: RubricSpec) -> dict[str, Any]:
    """Return the JSON schema of a pairwise verdict: ``{"verdict": <label>, "rationale": str}``."""
    return _object({"verdict": {"type": "string", "enum": list(rubric.labels)}, "rationale": {"type": "string"}})


def response_format(schema: dict[str, Any], name: str = "judgment") -> dict[str, Any]:
    """Return an OpenAI ``response_format`` (strict json_schema) wrapping one of the schemas above."""
    return {"type": "json_schema",
            "json_schema": {"name": _SCHEMA_NAME.sub("_", name)[:64] or "judgment", "schema": schema, "strict": True}}


def _scores_schema(rubric: RubricSpec) -> dict[str, Any]:
    if not rubric.criteria:
        raise ValueError(f"rubric {rubric.key} (mode {rubric.mode}) has no criteria, so no score schema")
    return _object({c.id: {"type": "integer", "enum": c.levels, "description": c.description}
                    for c in rubric.criteria})


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """Return a closed JSON-schema object with every property required."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}
