"""The agreement `bench align` chooses by: quadratic Cohen's kappa of a judge's grades with the reviewers', pooled
over criteria, with a bootstrap interval over the reviewed answers. A failed grading counts in ``failed``, never 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from bench.align.reviews import ReviewedAnswer
from bench.analysis import cohen_kappa
from bench.analysis.agreement_bootstrap import agreement_draws
from bench.config.rubrics import Rubric

Grades = Mapping[str, Mapping[str, float] | None]  # unit -> the judge's grade per criterion (None: failed)


@dataclass(frozen=True)
class Agreement:
    """A judge's agreement with the reviewers on some answers."""

    kappa: float | None  # None: undefined (no pair, or every grade the same)
    ci_low: float | None
    ci_high: float | None
    answers: int  # answers with at least one pair
    pairs: int
    failed: int  # answers whose grading failed (no pair)
    per_criterion: dict[str, float | None]

    def as_dict(self) -> dict:
        return asdict(self)

    def shown(self) -> str:
        """Return ``0.62 [0.41, 0.79]`` (or "undefined"), as the command prints it."""
        if self.kappa is None:
            return "undefined"
        interval = f" [{self.ci_low:.2f}, {self.ci_high:.2f}]" if self.ci_low is not None else ""
        return f"{self.kappa:.2f}{interval}"


def agreement(answers: list[ReviewedAnswer], grades: Grades, rubric: Rubric, *, resamples: int = 2000,
              seed: int = 0, level: float = 0.95) -> Agreement:
    """Return the judge's ``grades`` against the reviewers' on ``answers``: pooled quadratic kappa and its CI."""
    x, y, items, by = [], [], [], {}
    failed = 0
    for a in answers:
        g = grades.get(a.unit)
        if g is None:
            failed += 1
            continue
        for c in rubric.criteria:
            if c.id not in g or c.id not in a.human:
                continue
            lo, hi = c.scale
            for human in a.human[c.id]:
                pair = ((g[c.id] - lo) / (hi - lo), (human - lo) / (hi - lo))
                x.append(pair[0])
                y.append(pair[1])
                items.append(a.unit)
                by.setdefault(c.id, []).append(pair)
    per = {c: _defined(cohen_kappa([p[0] for p in ps], [p[1] for p in ps], "quadratic")) for c, ps in by.items()}
    kappa = _defined(cohen_kappa(x, y, "quadratic")) if x else None
    lo_ci = hi_ci = None
    if kappa is not None:
        draws = agreement_draws(np.array(x), np.array(y), np.array(items), weights="quadratic",
                                resamples=resamples, seed=seed)
        lo_ci, hi_ci = (None if v is None else round(v, 6) for v in draws.interval("kappa", level))
    return Agreement(kappa, lo_ci, hi_ci, len(set(items)), len(x), failed, per)


def _defined(value: float) -> float | None:
    return None if value != value else round(float(value), 6)  # NaN: undefined
