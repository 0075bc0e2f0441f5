"""Style control for pairwise ratings: a model that wins only by writing more is ranked first raw and not once
its answers' length is controlled for; without a style effect, the control changes little."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from bench.analysis.style_control import style_battles, style_controlled_ratings, style_features
from bench.analysis.tables import JUDGMENT_SCHEMA

QUALITY = {"verbose": 0.0, "plain": 0.0, "solid": 0.6}
LENGTHS = {"verbose": (900, 3000), "plain": (200, 1200), "solid": (200, 1200)}


def _arena(seed: int, length_effect: float, scenarios: int = 300) -> tuple[pl.DataFrame, dict[str, str]]:
    """Round-robin battles per scenario; the judge prefers quality and, by ``length_effect``, the longer answer."""
    rng = np.random.default_rng(seed)
    rows, texts = [], {}
    for s in range(scenarios):
        answers = {}
        for cell, (lo, hi) in LENGTHS.items():
            cid = f"{cell}-{s}"
            texts[cid] = "w " * int(rng.integers(lo, hi) // 2)
            answers[cell] = cid
        for a, b in (("verbose", "plain"), ("solid", "plain"), ("verbose", "solid")):
            la, lb = len(texts[answers[a]]), len(texts[answers[b]])
            logit = QUALITY[a] - QUALITY[b] + length_effect * (la - lb) / (la + lb)
            won = rng.random() < 1 / (1 + np.exp(-logit))
            rows.append({"id": f"j{s}{a}{b}", "judge": "arena", "mode": "pairwise", "scenario": f"s{s}",
                         "cell": a, "cell_b": b, "candidate": answers[a], "candidate_b": answers[b],
                         "verdict": "A>B" if won else "B>A", "order": "AB"})
    frame = pl.DataFrame([{k: r.get(k) for k in JUDGMENT_SCHEMA} for r in rows], schema=JUDGMENT_SCHEMA,
                         orient="row")
    return frame, texts


def _by_cell(frame: pl.DataFrame) -> dict[str, dict]:
    return {r["cell"]: r for r in frame.iter_rows(named=True)}


def test_a_model_that_wins_only_by_length_is_not_first_once_style_is_controlled():
    judgments, texts = _arena(0, length_effect=5.0)
    result = style_controlled_ratings(style_battles(judgments, texts), resamples=100)
    cells = _by_cell(result.ratings)
    assert cells["verbose"]["rank"] == 1, "raw: the verbose model wins on length"
    assert cells["verbose"]["rating"] > cells["plain"]["ci_high"]
    assert cells["solid"]["controlled_rank"] == 1, "controlled: the better model is first"
    raw_gap = cells["verbose"]["rating"] - cells["plain"]["rating"]
    controlled_gap = cells["verbose"]["controlled"] - cells["plain"]["controlled"]
    assert abs(controlled_gap) < raw_gap / 3, (raw_gap, controlled_gap)
    assert cells["plain"]["controlled_ci_low"] <= cells["verbose"]["controlled"] <= cells["plain"]["controlled_ci_high"]
    length = result.coefficients.filter(pl.col("feature") == "length").row(0, named=True)
    assert length["coef"] > 0 and length["ci_low"] > 0, "the judge's taste for length is measured"


def test_without_a_style_effect_the_control_changes_little():
    judgments, texts = _arena(1, length_effect=0.0)
    result = style_controlled_ratings(style_battles(judgments, texts), resamples=50)
    for row in result.ratings.iter_rows(named=True):
        assert row["controlled"] == pytest.approx(row["rating"], abs=40)
    length = result.coefficients.filter(pl.col("feature") == "length").row(0, named=True)
    assert length["ci_low"] <= 0 <= length["ci_high"]


def test_constant_styles_and_empty_input_are_said_not_crashed_on():
    judgments, texts = _arena(2, length_effect=0.0, scenarios=40)
    same = {cid: "the same answer" for cid in texts}
    result = style_controlled_ratings(style_battles(judgments, same), resamples=10)
    assert result.coefficients.is_empty() and any("no variation" in n for n in result.notes)
    assert result.ratings.height == 3 and result.ratings["controlled"].is_finite().all()
    empty = style_controlled_ratings(style_battles(judgments.clear(), texts), resamples=10)
    assert empty.ratings.is_empty() and empty.notes


def test_style_features_count_markdown():
    text = "# Title\nSome **bold** and __more__.\n- one\n- two\n1. three\n## Sub\n"
    assert style_features(text) == {"length": float(len(text)), "headers": 2.0, "lists": 3.0, "bold": 2.0}
    assert style_features(None)["length"] == 0.0
