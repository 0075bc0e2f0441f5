"""A judge that misreads one anchor, and reads it right once its prompt shows what the anchor means
(``misread_anchor``): the tests know its one systematic mistake and can see `bench align` fix it."""

from __future__ import annotations

from typing import Any

ALIGNMENT_DEFAULTS: dict[str, Any] = {"misread_anchor": {}}
_KEYS = {"criterion", "value", "as", "unless"}


def misread(value: Any, body: dict[str, Any], text: str, cfg: dict[str, Any]) -> Any:
    """Return a judge's grade ``value`` with its misread anchor applied (unchanged for any other judge, a prompt
    holding an ``unless`` text, or a value that is not a grade)."""
    rule = cfg.get("misread_anchor", {}).get(str(body.get("model")))
    if not rule or not isinstance(value, dict) or any(t in text for t in _texts(rule["unless"])):
        return value
    grades = value["grades"] if isinstance(value.get("grades"), list) else [value]
    for grade in grades:
        scores = grade.get("scores") if isinstance(grade, dict) else None
        if isinstance(scores, dict) and scores.get(rule["criterion"]) == rule["value"]:
            scores[rule["criterion"]] = rule["as"]
    return value


def _texts(unless: str | list[str]) -> list[str]:
    return [unless] if isinstance(unless, str) else list(unless)


def validate_alignment_config(cfg: dict[str, Any]) -> None:
    """Raise ValueError when ``misread_anchor`` is malformed."""
    rules = cfg["misread_anchor"]
    shape = ('misread_anchor must map judge model names to {"criterion": str, "value": int, "as": int, '
             '"unless": str or [str, ...]}')
    if not isinstance(rules, dict):
        raise ValueError(f"{shape}, got {rules!r}")
    for name, rule in rules.items():
        ok = (isinstance(name, str) and isinstance(rule, dict) and set(rule) == _KEYS
              and isinstance(rule["criterion"], str)
              and all(isinstance(rule[k], int) and not isinstance(rule[k], bool) for k in ("value", "as"))
              and rule["value"] != rule["as"]
              and (isinstance(rule["unless"], str) and rule["unless"]
                   or isinstance(rule["unless"], list) and rule["unless"]
                   and all(isinstance(t, str) and t for t in rule["unless"])))
        if not ok:
            raise ValueError(f"{shape} (value and as different), got {name!r}: {rule!r}")
