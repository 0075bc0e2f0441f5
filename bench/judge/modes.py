"""The grading modes by name: each mode is one module holding its grader; this mapping is the registry.

``rubric``, ``packed``, ``checklist``, ``pairwise``, ``automated`` and ``hybrid``. An unparseable reply gets
one repair turn, then is stored as a failure, never as a score. Adding a mode: one module, one entry.
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
