"""Two runs compared on the items they share: "did my change help, by more than noise?"

:func:`compare_runs` (also ``bench.analysis.compare_runs``; `bench compare RUN_A RUN_B`) matches the answers
of two run folders by scenario id, sample and cell (:mod:`bench.compare.matching`; ``mapping`` pairs cells
whose names differ) and returns a :class:`Comparison`: per matched cell × judge × criterion, and the
composite, the mean difference B − A with a paired bootstrap interval over scenarios, a paired test
(an exact sign-flip permutation test up to ``N_EXACT`` scenarios, Wilcoxon's signed-rank test above) and
its Holm-adjusted p-value across everything compared (:mod:`bench.compare.paired`); pairwise judges get
the win rate of B's answers over A's; what only one run holds is listed, and a judge or rubric that
differs between the runs is said first. :func:`write_diff_report` writes ``reports/<a>-vs-<b>/index.html``
(:mod:`bench.compare.diff_report`); :func:`compare_command` is the command (:mod:`bench.compare.command`).

``import bench.compare`` imports neither polars nor plotly: every name loads on first use. The
statistics build on ``bench.analysis``, which re-exports ``compare_runs``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {"compare_runs": "bench.compare.comparison", "Comparison": "bench.compare.comparison",  # polars, numpy
         "N_EXACT": "bench.compare.paired", "write_diff_report": "bench.compare.diff_report",  # plotly
         "compare_command": "bench.compare.command"}

__all__ = ["Comparison", "N_EXACT", "compare_command", "compare_runs", "write_diff_report"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'bench.compare' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
