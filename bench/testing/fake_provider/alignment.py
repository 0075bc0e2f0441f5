"""A judge that misreads one anchor, and reads it right once its prompt shows what the anchor means
(``misread_anchor``): the tests know its one systematic mistake and can see `bench align` fix it."""

from __future__ import annotations

from typing import Any

ALIGNMENT_DEFAULTS: dict[str, Any] = {"misread_anchor": {}}


def misread(value: Any, body: dict[str, Any], text: str, cfg: dict[str, Any]) -> Any:
    """Return a judge's grade ``value`` with its misread anchor applied (unless its prompt holds an ``unless`` text)."""
    rule = cfg.get("misread_anchor", {}).get(str(body.get("model")))
    unless = rule and ([rule["unless"]] if isinstance(rule["unless"], str) else rule["unless"])
    if not rule or not isinstance(value, dict) or any(t in text for t in unless):
        return value
    grades = value["grades"] if isinstance(value.get("grades"), list) else [value]
    for grade in grades:
        scores = grade.get("scores") if isinstance(grade, dict) else None
        if isinstance(scores, dict) and scores.get(rule["criterion"]) == rule["value"]:
            scores[rule["criterion"]] = rule["as"]
    return value
