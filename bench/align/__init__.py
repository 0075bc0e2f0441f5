"""Judges aligned to human reviews (`bench align RUN --judge ID`, docs/align.md). Only the command is cheap to
import: the rest loads polars on first use."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {"align_command": "bench.align.command", "align": "bench.align.alignment",
         "make_folds": "bench.align.folds", "check_no_leak": "bench.align.folds",
         "check_built_apart": "bench.align.folds",
         "Fold": "bench.align.folds", "FoldLeak": "bench.align.folds", "TooFewReviews": "bench.align.folds",
         "agreement": "bench.align.heldout", "Agreement": "bench.align.heldout",
         "reviewed_answers": "bench.align.reviews", "ReviewedAnswer": "bench.align.reviews",
         "variant_text": "bench.align.variants", "cross_validate": "bench.align.crossval"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.align' has no attribute {name!r}")
    return getattr(import_module(module), name)
