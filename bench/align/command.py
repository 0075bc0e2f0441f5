"""`bench align RUN --judge ID [--k K] [--params FILE] [--dry-run]`: the command, cheap to import (the work,
:func:`bench.align.alignment.align`, loads polars on first use)."""

from __future__ import annotations

from bench import align as api  # its alignment loads polars on first use (bench.cli stays cheap)


def align_command(run: str, *, judge: str, k: int | None = None, params: str | None = None, dry_run: bool = False,
                  resamples: int = 2000, track: bool = True) -> int:
    """Align judge ``judge`` of run ``run`` to its blind reviews; return 0 (a refusal is a BenchError: exit 2 or 4)."""
    return api.align(run, judge=judge, k=k, params=params, dry_run=dry_run, resamples=resamples, track=track)
