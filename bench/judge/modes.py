"""The grading modes by name: each mode is one module holding its grader; this mapping is the registry.

``rubric`` (one item per call), ``packed`` (k items per call, only bad items re-graded singly),
``checklist`` (one call per requirement, concurrently), ``pairwise`` (both orders, the swapped
verdict mapped back), ``automated`` (checks only) and ``hybrid`` (weighted automated + LLM).
A reply that cannot be parsed gets one repair turn; then it is stored as a failure with the
prompt, the raw reply and the reason — never as a score. Adding a mode: one module, one entry.
"""

from __future__ import annotations

from bench.judge import automated, checklist, hybrid, packed, pairwise, rubric
from bench.judge.grader import GRADERS

GRADERS.update({
    "rubric": rubric.GRADER,
    "packed": packed.GRADER,
    "checklist": checklist.GRADER,
    "pairwise": pairwise.GRADER,
    "automated": automated.GRADER,
    "hybrid": hybrid.GRADER,
})
