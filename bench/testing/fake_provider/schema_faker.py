"""A value valid against a JSON schema, built deterministically from a seed (the fake's structured replies)."""

from __future__ import annotations

import random
from typing import Any

from bench.testing.fake_provider.request_body import compact_json

STRING_FORMATS: dict[str, str] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "email": "fake@example.com",
    "uri": "https://example.com/fake",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


class SchemaFaker:
    """Builds a value that validates against a JSON schema, deterministically from a seed.

    Supports object (properties, required, additionalProperties), string (minLength,
    maxLength, enum, a few formats), integer and number (minimum, maximum, exclusive
    bounds, integer multipleOf), boolean, null, array (items, prefixItems, minItems,
    maxItems, uniqueItems), enum, const, anyOf/oneOf (the first option), allOf (merged)
    and local ``$ref`` (``#/$defs/...``).
    """

    MAX_DEPTH = 16

    def __init__(self, root: dict[str, Any], seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)

    def value(self, schema: Any, depth: int = 0) -> Any:
        """A value valid against ``schema``."""
        if not isinstance(schema, dict) or depth > self.MAX_DEPTH:
            return "fake"
        if "$ref" in schema:
            return self.value(self._resolve(schema["$ref"]), depth + 1)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return self.rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.value(schema[key][0], depth + 1)
        if schema.get("allOf"):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged.update(self._resolve(part["$ref"]) if "$ref" in part else part)
            return self.value(merged, depth + 1)
        maker = getattr(self, f"_{self._type(schema)}", self._string)
        return maker(schema, depth)

    def _resolve(self, ref: str) -> Any:
        """Follow a local JSON pointer such as ``#/$defs/Name``."""
        node: Any = self.root
        for token in ref.lstrip("#").strip("/").split("/"):
            if token:
                node = node[token.replace("~1", "/").replace("~0", "~")]
        return node

    @staticmethod
    def _type(schema: dict[str, Any]) -> str:
        """The (first non-null) type of ``schema``, inferred when absent."""
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind:
            return kind
        if "properties" in schema or "required" in schema:
            return "object"
        return "array" if "items" in schema else "string"

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        """All declared properties, plus any required ones not declared."""
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {name: self.value(sub, depth + 1) for name, sub in props.items()}
        for name in schema.get("required") or []:
            if name not in out:
                out[name] = self.value(extra if isinstance(extra, dict) else {}, depth + 1)
        return out

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        """``minItems``..``maxItems`` items (at least one when allowed, at most minItems+3).

        An array of objects with an enumerated ``id`` (a judge's packed grades) gets one
        item per id, as a well-behaved judge would answer.
        """
        items_schema = schema.get("items")
        ids = (items_schema.get("properties", {}).get("id", {}).get("enum")
               if isinstance(items_schema, dict) else None)
        if ids:
            return [{**self.value(items_schema, depth + 1), "id": i} for i in ids]
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", low + 3))
        count = self.rng.randint(max(low, min(1, high)), max(low, high))
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        if isinstance(items, list):  # draft-4 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        out: list[Any] = []
        seen: set[str] = set()
        for _ in range(count * 8):
            if len(out) >= count:
                break
            sub = prefix[len(out)] if len(out) < len(prefix) else items
            item = self.value(sub, depth + 1)
            if schema.get("uniqueItems"):
                key = compact_json(item)
                if key in seen:
                    continue
                seen.add(key)
            out.append(item)
        return out

    def _string(self, schema: dict[str, Any], depth: int = 0) -> str:
        """A format example, or ``fake-<hex>`` padded/truncated to the length bounds."""
        text = STRING_FORMATS.get(schema.get("format", ""), f"fake-{self.rng.getrandbits(32):08x}")
        low = int(schema.get("minLength", 0))
        text = text + "x" * max(0, low - len(text))
        if "maxLength" in schema:
            text = text[: int(schema["maxLength"])]
        return text

    def _bounds(self, schema: dict[str, Any], step: float) -> tuple[float, float]:
        """Inclusive (low, high) from minimum/maximum and their exclusive variants."""
        low, high = schema.get("minimum"), schema.get("maximum")
        ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if ex_low is True and low is not None:        # draft-4 boolean form
            low += step
        elif isinstance(ex_low, (int, float)) and not isinstance(ex_low, bool):
            low = ex_low + step if low is None else max(low, ex_low + step)
        if ex_high is True and high is not None:
            high -= step
        elif isinstance(ex_high, (int, float)) and not isinstance(ex_high, bool):
            high = ex_high - step if high is None else min(high, ex_high - step)
        if low is None and high is None:
            low, high = 0, 100
        elif low is None:
            low = high - 100
        elif high is None:
            high = low + 100
        return low, high

    def _integer(self, schema: dict[str, Any], depth: int = 0) -> int:
        """An integer in range (a multiple of ``multipleOf`` when one exists in range)."""
        low, high = self._bounds(schema, 1)
        low, high = int(-(-low // 1)), int(high // 1)  # ceil, floor
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            first, last = -(-low // step), high // step
            if first <= last:
                return self.rng.randint(first, last) * step
        return self.rng.randint(low, max(low, high))

    def _number(self, schema: dict[str, Any], depth: int = 0) -> float:
        """A float strictly inside the range (rounded to 3 places when that stays inside)."""
        low, high = self._bounds(schema, 0)
        value = low + (high - low) * (0.1 + 0.8 * self.rng.random())
        rounded = round(value, 3)
        return rounded if low < rounded < high or low == high else value

    def _boolean(self, schema: dict[str, Any], depth: int = 0) -> bool:
        """True or False."""
        return self.rng.random() < 0.5

    def _null(self, schema: dict[str, Any], depth: int = 0) -> None:
        """None."""
        return None
