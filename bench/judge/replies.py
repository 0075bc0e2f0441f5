"""Judge replies turned into data: JSON found in prose or code fences, verdict labels, validated scores;
they find what was meant, or raise JudgeParseError with a readable reason, and never guess a score."""

from __future__ import annotations

import json
import re
from typing import Any

from bench.core.errors import JudgeParseError

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)
_LABEL = re.compile(r"\[\[\s*([AB]\s*(?:>>|>|=|<<|<)\s*[AB])\s*\]\]")
_STRONG = {"A<<B": "B>>A", "A<B": "B>A", "B<<A": "A>>B", "B<A": "A>B", "B=A": "A=B"}
MIRROR = {"A>>B": "B>>A", "A>B": "B>A", "A=B": "A=B", "B>A": "A>B", "B>>A": "A>>B"}


def extract_json(text: str | None) -> Any:
    """Return the first JSON value in ``text``: the whole reply, a fenced block, or a balanced {…}/[…] span."""
    if not text or not text.strip():
        raise JudgeParseError("empty reply")
    for chunk in (text, *(m.group(1) for m in _FENCE.finditer(text)), *_balanced_spans(text)):
        try:
            return json.loads(chunk.strip(), strict=False)
        except ValueError:
            continue
    raise JudgeParseError(f"no JSON found in the reply ({_preview(text)})")


def _balanced_spans(text: str, limit: int = 20) -> list[str]:
    """Return up to ``limit`` top-level balanced {…} or […] spans, respecting JSON strings."""
    spans: list[str] = []
    depth, start, in_str, esc = 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            esc, in_str = (False, in_str) if esc else (ch == "\\", ch != '"')
            continue
        if ch == '"' and depth:
            in_str = True
        elif ch in "{[":
            start, depth = (i if depth == 0 else start), depth + 1
        elif ch in "}]" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start:i + 1])
                if len(spans) >= limit:
                    break
    return spans


def parse_verdict(text: str | None, labels: list[str]) -> str:
    """Return a pairwise reply's verdict: ``[[A>B]]``-style, else JSON; several bracketed labels raise."""
    found = {_normalize(m.group(1)) for m in _LABEL.finditer(text or "")}
    found &= set(labels)
    if len(found) == 1:
        return found.pop()
    if len(found) > 1:
        raise JudgeParseError(f"ambiguous verdict: the reply names {sorted(found)}")
    try:
        data = extract_json(text)
    except JudgeParseError:
        raise JudgeParseError(f"no verdict label like [[A>B]] and no JSON verdict ({_preview(text)})") from None
    given = _normalize(str(data.get("verdict", ""))) if isinstance(data, dict) else ""
    named = {_normalize(label): label for label in labels}  # a rubric's own label as it spells it ("A is better")
    if given not in named:
        raise JudgeParseError(f"verdict {given or None!r} is not one of {labels}")
    return named[given]


def _normalize(label: str) -> str:
    label = re.sub(r"\s+", "", label)
    return _STRONG.get(label, label)


def validate_scores(obj: Any, scales: dict[str, tuple[int, int]]) -> dict[str, float]:
    """Return ``{criterion: score}`` from a judge object; raise if a criterion is missing or off its scale."""
    if not isinstance(obj, dict):
        raise JudgeParseError(f"expected a JSON object, got {type(obj).__name__}")
    scores = obj.get("scores", obj)
    if not isinstance(scores, dict):
        raise JudgeParseError("'scores' is not an object")
    out: dict[str, float] = {}
    for crit, (lo, hi) in scales.items():
        value = scores.get(crit)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise JudgeParseError(f"criterion {crit!r}: missing or not a number ({value!r})")
        if not lo <= value <= hi or value != int(value):
            raise JudgeParseError(f"criterion {crit!r}: {value!r} is off the {lo}–{hi} scale")
        out[crit] = float(value)
    return out


def rationale_of(obj: Any) -> str | None:
    """Return the judge's rationale text if the object has one."""
    if isinstance(obj, dict):
        for key in ("rationale", "reasoning", "explanation", "feedback"):
            if isinstance(obj.get(key), str):
                return obj[key]
    return None


def _preview(text: str | None, n: int = 80) -> str:
    t = (text or "").strip().replace("\n", " ")
    return repr(t[:n] + ("…" if len(t) > n else ""))
