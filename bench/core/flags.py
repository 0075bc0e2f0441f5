"""Injection-like text in a model's answer: what a judge should never take as a verdict or an instruction.

An answer is graded by a judge that reads it; text in it that looks like a verdict (a JSON grade,
``[[A>B]]``, "the correct grade is 5") or addresses the judge ("ignore the rubric", "note to the
evaluator", a ``SYSTEM:`` line, a closing tag) may move the grade. The judge prompt already
delimits answers (``bench.judge._prompts``); these flags make such answers visible in the
records (``Candidate.flags``) and in the review panel, so a human can look at them first.
The patterns aim at few false alarms on ordinary answers (checked on JudgeBench's answers in
``tests/judge/test_injection.py``); they are a signal for review, not a filter.
"""

from __future__ import annotations

import re

_PATTERNS = {
    "verdict-like": [
        r'"\s*(?:scores?|verdict|grades?|rating)\s*"\s*:\s*[\[{"\d]',  # a JSON grade
        r"\[\[\s*[AB]\s*(?:>>|>|=|<<|<)\s*[AB]\s*\]\]",  # an arena verdict label
        r"\b(?:correct|final|right|true)\s+(?:grade|score|verdict|rating)\s+(?:is|=|:)",
        r"\b(?:give|grade|rate|score)\s+(?:this|the|my)\s+(?:answer|response|tip|reply)\s+(?:a\s+)?\d",
        r"\b\d\s*/\s*\d+\s+(?:reference\s+)?(?:answer|response)\b",  # "a 5/5 reference answer"
    ],
    "instruction-like": [
        r"\bignore\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous\s+|prior\s+|above\s+)?"
        r"(?:instructions|rubric|rules|criteria|prompt)",
        r"\b(?:note|message|instructions?)\s+(?:to|for)\s+the\s+(?:evaluator|judge|grader|reviewer|assessor)",
        r"(?m)^\s*(?:system|assistant|developer)\s*:",
        r"\b(?:dear|attention)\s+(?:the\s+)?(?:evaluator|judge|grader)\b",
        r"\bgrade\s+(?:it|this)\s+accordingly\b",
    ],
    "delimiter": [
        r"</?\s*(?:answer|response|prompt)(?:-[0-9a-f]+)?\s*>",
    ],
}
_COMPILED = {kind: [re.compile(p, re.I) for p in pats] for kind, pats in _PATTERNS.items()}


def flags(text: str | None) -> list[str]:
    """Return the kinds of injection-like text in ``text`` (``verdict-like``, ``instruction-like``,
    ``delimiter``), in that order; empty for an ordinary answer."""
    if not text:
        return []
    return [kind for kind, patterns in _COMPILED.items() if any(p.search(text) for p in patterns)]
