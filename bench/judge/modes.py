"""The grading modes by name: each mode is one module holding its grader; this mapping is the registry."""

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
