"""One grade per conversation from a ``per_turn`` judge's grades of its turns: the mean over the graded turns,
so every statistic counts one item per answer. The first turn's record stands for them."""

from __future__ import annotations

from collections.abc import Iterable
from statistics import fmean

from bench.core.records import Judgment


def per_conversation(judgments: Iterable[Judgment]) -> list[tuple[Judgment, int | None]]:
    """Return each judgment with the number of turns it stands for (None: a whole answer's).
    A conversation's turn judgments become one: the first turn's record with the mean over successful turns."""
    out: list[tuple[Judgment, int | None]] = []
    groups: dict[tuple, list[Judgment]] = {}
    for j in judgments:
        if j.turn is None:
            out.append((j, None))
            continue
        key = (j.judge_id, j.rubric_key, j.rubric_hash, tuple(j.candidate_ids), j.repeat)
        if key not in groups:
            groups[key] = []
            out.append((j, -1))  # a place held for the conversation, filled below
        groups[key].append(j)
    merged = iter(_merged(turns) for turns in groups.values())
    return [next(merged) if n == -1 else (j, n) for j, n in out]


def _merged(turns: list[Judgment]) -> tuple[Judgment, int]:
    """Return the conversation's one judgment (the first turn's, its grades the means) and its graded turns."""
    first = min(turns, key=lambda j: j.turn or 0)
    good = [j for j in turns if j.ok and j.score is not None]
    if not good:
        return first, 0
    names = [c for c in good[0].scores or {} if all(c in (j.scores or {}) for j in good)]
    weighted = all(j.expected_score is not None and all(c in (j.expected_scores or {}) for c in names) for j in good)
    return first.model_copy(update={
        "error": None, "error_kind": None, "scores": {c: fmean(j.scores[c] for j in good) for c in names},  # type: ignore[index]
        "score": fmean(j.score for j in good),  # type: ignore[misc]
        "expected_scores": {c: fmean(j.expected_scores[c] for j in good) for c in names} if weighted else None,  # type: ignore[index]
        "expected_score": fmean(j.expected_score for j in good) if weighted else None}), len(good)  # type: ignore[misc]
