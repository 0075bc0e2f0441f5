"""The k folds of `bench align`'s cross-validation, split by review unit (an answer), and the check that they
never leak: :func:`check_no_leak` raises when a reviewed answer both builds a variant and scores it."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from bench.config.align import MIN_PER_FOLD
from bench.core.errors import BenchError


class TooFewReviews(BenchError):
    """Fewer reviewed answers than k folds need: nothing is built, nothing is sent."""


class FoldLeak(BenchError):
    """A reviewed answer would both build a variant and score it (a bug: the held-out agreement would lie)."""


@dataclass(frozen=True)
class Fold:
    """One fold: the answers that build its variant (``train``) and those that score it (``test``)."""

    index: int
    train: tuple[str, ...]
    test: tuple[str, ...]


def make_folds(units: Iterable[str], k: int, seed: int, *, judge: str = "the judge", also: str = "") -> list[Fold]:
    """Return ``k`` folds over the review units (each held out once); raise TooFewReviews with the counts when
    there are fewer than ``MIN_PER_FOLD`` per fold (``also``: said after the count, e.g. reviews that do not count)."""
    order = sorted(set(units))
    need = k * MIN_PER_FOLD
    if len(order) < need:
        raise TooFewReviews(f"too few reviews to align {judge}: {len(order)} answer(s) reviewed blind{also}, and {k} "
                            f"folds need at least {need} ({MIN_PER_FOLD} held out per fold); review more answers "
                            f"(bench review export/apply) or lower --k")
    random.Random(seed).shuffle(order)
    folds = []
    for i in range(k):
        test = tuple(sorted(order[i::k]))
        held = set(test)
        folds.append(Fold(i, tuple(u for u in sorted(order) if u not in held), test))
    check_no_leak(folds, order)
    return folds


def check_no_leak(folds: list[Fold], units: Iterable[str]) -> None:
    """Raise FoldLeak unless every fold's train and test are disjoint and every unit is held out exactly once."""
    seen: list[str] = []
    for f in folds:
        both = set(f.train) & set(f.test)
        if both:
            raise FoldLeak(f"fold {f.index}: {len(both)} answer(s) both build and score its variant: "
                           f"{', '.join(sorted(both)[:3])}")
        seen += f.test
    if sorted(seen) != sorted(set(units)) or len(seen) != len(set(seen)):
        raise FoldLeak("the folds do not hold out every reviewed answer exactly once")


def check_built_apart(fold: Fold, built_from: Iterable[str], scored_on: Iterable[str]) -> None:
    """Raise FoldLeak when what a fold's variant was built from (examples shown, answers the optimizer saw) is
    not within its train answers, or what it was scored on is not within its test answers."""
    built, scored = set(built_from), set(scored_on)
    if not built <= set(fold.train) or not scored <= set(fold.test) or built & scored:
        raise FoldLeak(f"fold {fold.index}: its variant was built from {sorted(built - set(fold.train))[:3]} "
                       f"outside its train answers, or scored on {sorted(scored - set(fold.test))[:3]} outside "
                       f"its held-out ones")
