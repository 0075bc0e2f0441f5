"""Input checks shared by the analysis functions: say which function lacks which columns (polars' own error
names its internal columns, which tells the caller nothing)."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl


def require(frame: object, columns: Iterable[str], function: str, what: str = "frame") -> None:
    """Raise unless ``frame`` is a polars DataFrame with every one of ``columns``: TypeError for another
    type, ValueError naming ``function``, the missing columns and every column it needs."""
    columns = list(columns)
    if not isinstance(frame, pl.DataFrame):
        raise TypeError(f"{function}: {what} must be a polars DataFrame, not {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{function}: {what} has no column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(map(repr, missing))} (it needs {', '.join(columns)})")
