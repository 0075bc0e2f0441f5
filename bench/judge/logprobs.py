"""Probability-weighted rubric scores (as G-Eval does): the expected score over the score tokens' probabilities.
With ``params: {logprobs: true, top_logprobs: k}``, each criterion's value and its alternatives on the scale give
Σ value·p / Σ p, stored beside the sampled score, never instead; below ``MIN_MASS`` there is none."""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

MIN_MASS = 0.5
NO_LOGPROBS = "asked for, but the provider returned none: the sampled score stands (no expected score)"
_VALUE = re.compile(r"^\s*(\d+)\s*$")
_warned: set[str] = set()  # judges already warned about in this process


def logprob_note(entry: Any, logprobs: list | None) -> dict[str, str]:
    """Return ``{"logprobs": NO_LOGPROBS}`` when ``entry`` asked for logprobs and got none (warned once), else {}."""
    if logprobs or not entry.params.get("logprobs"):
        return {}
    if entry.id not in _warned:
        _warned.add(entry.id)
        warnings.warn(f"judge {entry.id} ({entry.model}) asked for logprobs but the provider returned none: its "
                      f"sampled scores stand, without expected scores", RuntimeWarning, stacklevel=2)
    return {"logprobs": NO_LOGPROBS}


def expected_scores(reply: str, logprobs: list | None, scales: dict[str, tuple[int, int]],
                    span: tuple[int, int] | None = None) -> dict[str, float]:
    """Return criterion → expected score where the value token's alternatives can be read (within ``span``)."""
    if not logprobs:
        return {}
    text = "".join(tok for tok, _alts in logprobs)
    if text != reply:
        return {}  # the logprobs are not of this reply (a repair turn's, say): nothing to read
    starts, at = [], 0
    for tok, _alts in logprobs:
        starts.append(at)
        at += len(tok)
    lo, hi = span or (0, len(reply))
    out: dict[str, float] = {}
    for crit, (low, high) in scales.items():
        found = re.compile(rf'"{re.escape(crit)}"\s*:\s*(\d+)').search(reply, lo, hi)
        if found is None:
            continue
        expected = _expectation(logprobs[max(i for i, s in enumerate(starts) if s <= found.start(1))],
                                found.group(1), low, high)
        if expected is not None:
            out[crit] = expected
    return out


def _expectation(token_alts: list, value: str, low: int, high: int) -> float | None:
    """Return Σ v·p / Σ p over a value token's alternatives on the scale [low, high], or None when unreadable."""
    token, alts = token_alts
    if _VALUE.match(token) is None or _VALUE.match(token).group(1) != value:
        return None  # the value shares its token with other text, or spans several tokens
    weights: dict[int, float] = {}
    for alt, lp in alts:
        m = _VALUE.match(alt)
        if m and low <= int(m.group(1)) <= high:
            weights[int(m.group(1))] = weights.get(int(m.group(1)), 0.0) + math.exp(lp)
    mass = sum(weights.values())
    return sum(v * p for v, p in weights.items()) / mass if mass >= MIN_MASS else None


def object_spans(reply: str) -> list[tuple[int, int]]:
    """Return the (start, end) offsets of the JSON objects inside the reply's first array."""
    spans, depth, array_depth, opened, in_string, escaped = [], 0, None, 0, False, False
    for i, ch in enumerate(reply):
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if ch == "[" and array_depth is None:
                array_depth = depth
            elif ch == "{" and array_depth is not None and depth == array_depth + 1:
                opened = i
        elif ch in "]}":
            if ch == "}" and array_depth is not None and depth == array_depth + 1:
                spans.append((opened, i + 1))
            if ch == "]" and depth == array_depth:
                break
            depth -= 1
    return spans
