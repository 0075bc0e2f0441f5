"""Two runs compared on the items they share: :func:`compare_runs` returns a :class:`Comparison`,
:func:`write_diff_report` writes its HTML page. Every name loads on first use (no polars or plotly at import)."""

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
