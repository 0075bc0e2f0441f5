"""A JSON instance of a JSON schema from a seeded random generator: what a dry model and the fake provider reply to
a structured-output request. Standard library only; OpenAI's strict subset and more; ``pattern`` is not matched."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 8  # deeper than this, arrays take their minimum and objects their required properties only
_FORMATS = {"date-time": "2025-01-01T12:00:00Z", "date": "2025-01-01", "time": "12:00:00",
            "email": "someone@example.com", "uri": "https://example.com/", "uuid": "00000000-0000-4000-8000-000000000000"}


class SchemaInstance:
    """Builds one instance of a schema; ``prose(rng, max_chars)`` supplies free-form strings (cut to ``maxLength``)."""

    def __init__(self, root: dict[str, Any], rng: random.Random,
                 prose: Callable[[random.Random, int | None], str]):
        self.root, self.rng, self.prose = root, rng, prose

    def of(self, schema: Any, depth: int = 0, name: str = "") -> Any:
        """Return an instance of ``schema`` (a sub-schema of the root)."""
        if not isinstance(schema, dict):
            return None if schema is False else "any"  # `true` accepts anything; `false` nothing
        schema = self._resolved(schema)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return self.rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                options = [o for o in schema[key] if not (isinstance(o, dict) and o.get("type") == "null")]
                return self.of(self.rng.choice(options or schema[key]), depth, name)
        if schema.get("allOf"):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = self._resolved(part) if isinstance(part, dict) else {}
                merged["properties"] = {**merged.get("properties", {}), **part.get("properties", {})}
                merged["required"] = [*merged.get("required", []), *part.get("required", [])]
                merged.update({k: v for k, v in part.items() if k not in ("properties", "required")})
            return self.of(merged, depth, name)
        kind = _type_of(schema)
        make = {"object": self._object, "array": self._array, "integer": self._integer, "number": self._number,
                "boolean": self._boolean, "null": lambda s, d, n: None}.get(kind, self._string)
        return make(schema, depth, name)

    def _resolved(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Follow ``$ref`` (local JSON pointers only) until a schema without one."""
        seen = 0
        while isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#") and seen < 32:
            target: Any = self.root
            for part in filter(None, schema["$ref"][1:].split("/")):
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**rest, **(target if isinstance(target, dict) else {})}
            seen += 1
        return schema

    def _object(self, schema: dict[str, Any], depth: int, name: str) -> dict[str, Any]:
        props = schema.get("properties") or {}
        required = list(schema.get("required") or ())
        keep = [k for k in props if k in required or depth < MAX_DEPTH]
        out = {k: self.of(props[k], depth + 1, k) for k in keep}
        extra = schema.get("additionalProperties")
        for k in required:  # required without a declared schema: what additionalProperties allows
            if k not in out:
                out[k] = self.of(extra if isinstance(extra, dict) else {}, depth + 1, k)
        return out

    def _array(self, schema: dict[str, Any], depth: int, name: str) -> list[Any]:
        lo = int(schema.get("minItems") or 0)
        hi = int(schema["maxItems"]) if schema.get("maxItems") is not None else max(lo, 3)
        prefix = schema.get("prefixItems") or []
        items = schema.get("items") if isinstance(schema.get("items"), (dict, bool)) else {}
        if isinstance(schema.get("items"), list):  # draft 4's tuple form
            prefix, items = schema["items"], schema.get("additionalItems", {})
        ids = _keyed_by(items)
        if ids is not None:  # one element per key (a packed reply's grades, one per item id shown)
            n = max(len(ids), lo) if schema.get("maxItems") is None else min(max(len(ids), lo), hi)
            out = [self.of(items, depth + 1, name) for _ in range(n)]
            for element, key in zip(out, ids):
                element["id"] = key
            return out
        n = lo if depth >= MAX_DEPTH else min(max(lo, self.rng.randint(1, 3), len(prefix)), hi)
        out, seen = [], set()
        for _ in range(n * 8):  # uniqueItems: a repeated element is drawn again, a few times at most
            if len(out) >= n:
                break
            element = self.of(prefix[len(out)] if len(out) < len(prefix) else items, depth + 1, name)
            key = json.dumps(element, sort_keys=True)
            if schema.get("uniqueItems") and key in seen:
                continue
            seen.add(key)
            out.append(element)
        return out

    def _integer(self, schema: dict[str, Any], depth: int, name: str) -> int:
        lo, hi = _bounds(schema, integer=True)
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            first, last = math.ceil(lo / step), math.floor(hi / step)
            return step * self.rng.randint(first, max(first, last))
        return self.rng.randint(int(lo), int(max(lo, hi)))

    def _number(self, schema: dict[str, Any], depth: int, name: str) -> float:
        lo, hi = _bounds(schema, integer=False)
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step > 0:
            first, last = math.ceil(lo / step), math.floor(hi / step)
            return float(step * self.rng.randint(first, max(first, last)))
        value = round(self.rng.uniform(lo, hi), 2)
        return value if lo <= value <= hi else (lo + hi) / 2

    def _boolean(self, schema: dict[str, Any], depth: int, name: str) -> bool:
        return self.rng.random() < 0.7  # mostly true: a requirement is usually met

    def _string(self, schema: dict[str, Any], depth: int, name: str) -> str:
        lo = int(schema.get("minLength") or 0)
        hi = int(schema["maxLength"]) if schema.get("maxLength") is not None else None
        text = _FORMATS.get(str(schema.get("format")))
        if text is None:
            text = f"id-{self.rng.randrange(10**6)}" if name == "id" else self.prose(self.rng, hi)
        if hi is not None and len(text) > hi:
            cut = text[:hi].rsplit(" ", 1)[0].rstrip(" ,;")
            text = cut if len(cut) >= max(lo, 1) else text[:hi]
        return text + "." * max(0, lo - len(text))


def _type_of(schema: dict[str, Any]) -> str:
    """Return the one type to produce: the declared one (the first non-null of a list), else the likely one."""
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), declared[0] if declared else None)
    if declared:
        return str(declared)
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if "minimum" in schema or "maximum" in schema:
        return "number"
    return "string"


def _bounds(schema: dict[str, Any], integer: bool) -> tuple[float, float]:
    """Return the inclusive (low, high) a number may take: its bounds, exclusive ones moved inwards."""
    eps = 1 if integer else 0.01
    lo, hi = schema.get("minimum"), schema.get("maximum")
    ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if ex_lo is True and lo is not None:  # draft 4: a flag on minimum
        lo += eps
    elif isinstance(ex_lo, (int, float)) and not isinstance(ex_lo, bool):
        lo = ex_lo + eps if lo is None else max(lo, ex_lo + eps)
    if ex_hi is True and hi is not None:
        hi -= eps
    elif isinstance(ex_hi, (int, float)) and not isinstance(ex_hi, bool):
        hi = ex_hi - eps if hi is None else min(hi, ex_hi - eps)
    if integer:
        lo = math.ceil(lo) if lo is not None else None
        hi = math.floor(hi) if hi is not None else None
    lo = lo if lo is not None else (0 if hi is None or hi >= 0 else hi - 10)
    hi = hi if hi is not None else lo + 10
    return lo, max(lo, hi)


def _keyed_by(items: Any) -> list[Any] | None:
    """Return the allowed ids when array elements are objects keyed by an ``id`` enum, else None."""
    if not isinstance(items, dict):
        return None
    enum = ((items.get("properties") or {}).get("id") or {}).get("enum")
    return list(enum) if isinstance(enum, list) and enum else None
