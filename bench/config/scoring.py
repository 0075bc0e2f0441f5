"""A rubric's scoring maths: criterion scores to one composite, a 0–1 normalized score, a hybrid score.
On scales that differ each score is first mapped to 0–1, and so is the composite."""

from __future__ import annotations

from bench.config.rubric_spec import Criterion, HybridWeights, RubricSpec


def shared_scale(rubric: RubricSpec) -> bool:
    """Return True when every criterion uses the same scale (then `composite` stays on that scale)."""
    return len({c.scale for c in rubric.criteria}) <= 1


def composite_scale(rubric: RubricSpec) -> tuple[int, int]:
    """Return the scale `composite` reports on: the criteria's common scale, or (0, 1) if they differ."""
    if rubric.criteria and shared_scale(rubric):
        return rubric.criteria[0].scale
    return (0, 1)


def composite(rubric: RubricSpec, scores: dict[str, float]) -> float:
    """Return the weighted mean of the criterion scores, on `composite_scale`; ValueError for a bad criterion."""
    _check_scores(rubric, scores)
    total = sum(c.weight for c in rubric.criteria)
    if shared_scale(rubric):
        return sum(c.weight * float(scores[c.id]) for c in rubric.criteria) / total
    return sum(c.weight * _unit(c, scores[c.id]) for c in rubric.criteria) / total


def normalized(rubric: RubricSpec, scores: dict[str, float]) -> float:
    """Return the weighted mean of the criterion scores, each mapped to 0–1 on its own scale."""
    _check_scores(rubric, scores)
    total = sum(c.weight for c in rubric.criteria)
    return sum(c.weight * _unit(c, scores[c.id]) for c in rubric.criteria) / total


def hybrid_score(rubric: RubricSpec, scores: dict[str, float], automated: float) -> float:
    """Return a hybrid 0–1 score: ``weights.llm`` × `normalized` + ``weights.automated`` × ``automated``."""
    w = rubric.weights or HybridWeights(llm=1.0, automated=1.0)
    return w.llm * normalized(rubric, scores) + w.automated * float(automated)


def _unit(c: Criterion, score: float) -> float:
    lo, hi = c.scale
    return (float(score) - lo) / (hi - lo)


def _check_scores(rubric: RubricSpec, scores: dict[str, float]) -> None:
    if not rubric.criteria:
        raise ValueError(f"rubric {rubric.key} (mode {rubric.mode}) has no criteria to score")
    ids = [c.id for c in rubric.criteria]
    missing = [i for i in ids if i not in scores]
    unknown = sorted(set(scores) - set(ids))
    if missing or unknown:
        raise ValueError(f"rubric {rubric.key}: scores must name exactly the criteria {', '.join(ids)}"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unknown {', '.join(unknown)}" if unknown else ""))
