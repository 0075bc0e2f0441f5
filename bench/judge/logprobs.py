"""Probability-weighted rubric scores (as G-Eval does): the expected score over the score tokens' probabilities.

A judge asked with ``params: {logprobs: true, top_logprobs: 10}`` gets, with its reply, the
probability of each sampled token and of its most likely alternatives (OpenAI, vLLM and
llama.cpp's server return them). For each criterion of a rubric reply such as
``{"scores": {"tone": 4, …}}``, the token holding the value is found in the reply, and its
alternatives that are whole values on the criterion's scale are kept: the expected score is
Σ value · p / Σ p over them. It breaks the ties a sampled integer leaves (a 4 the judge nearly
made a 5 is not a 4 it nearly made a 3), and it is stored beside the sampled score, never instead.

Rules: a value token is the token in which the value's first digit sits; a value written over
two tokens (``1`` ``0`` for 10 on a 1–10 scale) has no expectation (its alternatives are not
whole values). When the valid alternatives hold less than ``MIN_MASS`` of the probability, the
judge was not choosing among scores at that token, so that criterion has no expectation either.
The composite is the rubric's composite of the expectations, only when every criterion has one.
"""

from __future__ import annotations

import math
import re

MIN_MASS = 0.5
_VALUE = re.compile(r"^\s*(\d+)\s*$")


def expected_scores(reply: str, logprobs: list | None, scales: dict[str, tuple[int, int]]) -> dict[str, float]:
    """Return criterion → expected score for the criteria whose value token's alternatives can be read."""
    if not logprobs:
        return {}
    text = "".join(tok for tok, _alts in logprobs)
    if text != reply:
        return {}  # the logprobs are not of this reply (a repair turn's, say): nothing to read
    starts, at = [], 0
    for tok, _alts in logprobs:
        starts.append(at)
        at += len(tok)
    out: dict[str, float] = {}
    for crit, (low, high) in scales.items():
        found = re.search(rf'"{re.escape(crit)}"\s*:\s*(\d+)', reply)
        if found is None:
            continue
        pos = found.start(1)
        index = max(i for i, s in enumerate(starts) if s <= pos)
        token, alts = logprobs[index]
        if _VALUE.match(token) is None or _VALUE.match(token).group(1) != found.group(1):
            continue  # the value shares its token with other text, or spans several tokens
        weights: dict[int, float] = {}
        for alt, lp in alts:
            m = _VALUE.match(alt)
            if m and low <= int(m.group(1)) <= high:
                weights[int(m.group(1))] = weights.get(int(m.group(1)), 0.0) + math.exp(lp)
        mass = sum(weights.values())
        if mass >= MIN_MASS:
            out[crit] = sum(v * p for v, p in weights.items()) / mass
    return out
