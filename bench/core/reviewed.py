"""What one human review covers and what counts as reviewed: a unit is an answer's (or pair's) candidate ids and
the rubric ``id@version``; a reviewer's latest review counts, *blind* when saved with grades hidden."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.core.records import Judgment, Review, versioned

Unit = tuple[tuple[str, ...], str]  # (candidate ids, rubric id@version): what one review covers
Scale = Mapping[str, tuple[float, float]]  # criterion id (and "composite") -> (lowest, highest)
COMPOSITE = "composite"


def judgment_unit(j: Judgment) -> Unit:
    """Return the unit a review of ``j`` covers: its answer (or pair) on its rubric version."""
    return tuple(j.candidate_ids), j.rubric_key


def review_unit(r: Review, judgments: Mapping[str, Judgment]) -> Unit | None:
    """Return a review's unit: its judgment's, else the answer and rubric version it names (None: neither known)."""
    j = judgments.get(r.judgment_id)
    if j is not None:
        return judgment_unit(j)
    if r.candidate_ids and r.rubric_id and r.rubric_version:
        return tuple(r.candidate_ids), versioned(r.rubric_id, r.rubric_version)
    return None


def current_units(judgments: Iterable[Judgment]) -> dict[Unit, str]:
    """Return the units ``judgments`` grade (a pair once: its AB order) with the rubric hash of the last of each;
    a checks-only (automated) judgment gives no unit: there is no judge's grade for a human to review."""
    return {judgment_unit(j): j.rubric_hash for j in judgments if j.order in (None, "AB") and j.mode != "automated"}


def scale_of(rubric: Any) -> dict[str, tuple[float, float]]:
    """Return a rubric's scales (each criterion's, and the composite's) as plain data, for :func:`off_scale`."""
    out = {c.id: (float(c.scale[0]), float(c.scale[1])) for c in rubric.criteria}
    if out:
        lo, hi = rubric.composite_scale
        out[COMPOSITE] = (float(lo), float(hi))
    return out


def off_scale(values: Mapping[str, Any], scale: Scale | None) -> list[str]:
    """Return ``"name = value"`` for each value that is not a finite number within its scale (NaN, ±inf, or
    outside ``scale[name]``); a name without a known scale is checked for being finite only."""
    bad = []
    for name, v in values.items():
        if v is None:
            continue
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        lo, hi = (scale or {}).get(name, (-math.inf, math.inf))
        if not number or not math.isfinite(v) or not lo <= v <= hi:
            where = f" (scale {lo:g}–{hi:g})" if name in (scale or {}) else ""
            bad.append(f"{name} = {v!r}{where}")
    return bad


def damaged_review(r: Review, scale: Scale | None) -> str | None:
    """Return a line naming the review, its judgment and its bad values when they break ``scale``, else None."""
    bad = off_scale({**(r.scores or {}), COMPOSITE: r.score}, scale)
    return f"review {r.id} of judgment {r.judgment_id} by {r.reviewer!r}: {', '.join(bad)}" if bad else None


@dataclass
class Reviewed:
    """The reviews of one run, read the one way every count and estimate reads them."""

    latest: dict[tuple[Unit, str], Review] = field(default_factory=dict)  # (unit, reviewer) -> usable review
    units: int = 0  # the run's units: answers (pairs) × rubric version that a review can cover
    damaged: dict[str, str] = field(default_factory=dict)  # damaged review record's id -> a line naming it

    @property
    def reviewed(self) -> set[Unit]:
        """Return the units with at least one usable review."""
        return {unit for unit, _ in self.latest}

    @property
    def blind(self) -> set[Unit]:
        """Return the units some reviewer's latest review of which was saved blind: those calibrate."""
        return {unit for (unit, _), r in self.latest.items() if r.blind}

    def line(self) -> str:
        """Return the one sentence every place says: reviewed of all, and how many blind."""
        n, blind = len(self.reviewed), len(self.blind)
        return (f"{n} of {self.units} answers reviewed (answer × rubric version); {blind} blind "
                f"(judges' grades hidden until saved: only these calibrate the leaderboard)")

    def note(self) -> str:
        """Return one line naming the damaged review records set aside ("" when none)."""
        if not self.damaged:
            return ""
        lines = list(self.damaged.values())
        more = f"; and {len(lines) - 5} more" if len(lines) > 5 else ""
        return (f"{len(lines)} review record(s) set aside, their values break the rubric's scale "
                f"(kept in the run folder): " + "; ".join(lines[:5]) + more)


def reviewed(judgments: Mapping[str, Judgment], reviews: Iterable[Review], scales: Mapping[str, Scale],
             every: Mapping[str, Judgment] | None = None, units: Mapping[Unit, str] | None = None) -> Reviewed:
    """Return the run's reviews as :class:`Reviewed`: each reviewer's latest usable review of each current unit.
    ``judgments``: the latest current ones; ``every``: all, set-aside included; ``scales``: per rubric hash."""
    current = current_units(judgments.values()) if units is None else units
    out = Reviewed(units=len(current))
    for r in sorted(reviews, key=lambda r: r.created_at):
        own = judgments.get(r.judgment_id) or (every or {}).get(r.judgment_id)
        problem = damaged_review(r, scales.get(own.rubric_hash) if own is not None else None)
        if problem:
            out.damaged[r.id] = problem
            continue
        unit = review_unit(r, judgments)
        if unit in current and (own is None or own.rubric_hash == current[unit]):
            out.latest[(unit, r.reviewer)] = r
    return out
