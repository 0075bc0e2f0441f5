"""Do the calibrated leaderboard's 95% intervals hold what they promise? A simulation with a known truth.

Each repetition draws one cell of ``--items`` judged answers: a human score per answer on a 1–5
scale (the truth is the mean human score of all of them), and a judge score that is the human
score plus a bias plus noise, rounded and clipped to the scale. ``--reviews`` answers, drawn at
random, get their human score. Three 95% intervals of the cell's mean human score are computed
with bench's own code (``bench.analysis.calibrated.calibrated_leaderboard`` on the frames
``bench.analysis.tables`` would hold): the judge alone, the reviews alone and PPI++ from both.
Printed: each interval's empirical coverage of the truth and its mean width.

Then the small-sample grid (``--case-reps`` repetitions per case, vectorised through
``bench.analysis.calibrated.calibrated_intervals``, the leaderboard's own interval code): answers of
latent quality q ~ N(3.2, 0.9); human score round(q + N(0, 0.7)) clipped to 1–5 (discrete, with
rater noise); three judges: ``good-biased`` round(q + 0.8 + N(0, 0.4)), ``nonlinear`` (convex and
biased) round(1 + 4·((q − 1)/4)^2.5 + 0.6 + N(0, 0.5)), ``useless`` uniform on 1–5 whatever q;
``n`` = 10, 30 and 100 reviews among ``N`` = 200 and 2,000 judged answers. Printed: each case's
coverage and mean width (and the human-only interval's), then one JSON line with all of it.

    python benchmarks/calibration.py                  # 1000 repetitions, bias 0.6; 4000 per small-sample case
    python benchmarks/calibration.py --reps 2000 --bias 0 --reviews 30
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import polars as pl

from bench.analysis.calibrated import calibrated_intervals, calibrated_leaderboard
from bench.analysis.tables import COMPOSITE, REVIEW_SCHEMA

KEYS = ("judge_only", "human_only", "calibrated")
SCALE = (1.0, 5.0)
JUDGES = ("good-biased", "nonlinear", "useless")
REVIEWS = (10, 30, 100)
ITEMS = (200, 2000)
CHUNK = 500  # repetitions drawn at once: bounds memory at 2,000 answers per cell


def draw(rng: np.random.Generator, items: int, reviews: int, bias: float, noise: float):
    """One cell: (scores frame, reviews frame, the true mean human score)."""
    human = np.clip(np.rint(rng.normal(3.2, 1.0, items)), 1, 5)
    judge = np.clip(np.rint(human + bias + rng.normal(0, noise, items)), 1, 5)
    ids = [f"j{i}" for i in range(items)]
    scores = pl.DataFrame({"judge": "judge", "cell": "m/p@v1", "judgment": ids, "criterion": COMPOSITE,
                           "value": judge})
    picked = rng.choice(items, reviews, replace=False)
    revs = pl.DataFrame({"judgment": [ids[i] for i in picked], "reviewer": "r", "criterion": COMPOSITE,
                         "value": human[picked], "verdict": None, "created_at": "2026-01-01T00:00:00Z"},
                        schema=REVIEW_SCHEMA)
    return scores, revs, float(human.mean())


def simulate(reps: int, items: int, reviews: int, bias: float, noise: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    cover = {k: 0 for k in KEYS}
    width = {k: 0.0 for k in KEYS}
    for _ in range(reps):
        scores, revs, truth = draw(rng, items, reviews, bias, noise)
        [row] = calibrated_leaderboard(scores, revs, scale=SCALE).iter_rows(named=True)
        bounds = {"judge_only": (row["judge_only_ci_low"], row["judge_only_ci_high"]),
                  "human_only": (row["human_only_ci_low"], row["human_only_ci_high"]),
                  "calibrated": (row["ci_low"], row["ci_high"])}
        for key, (low, high) in bounds.items():
            cover[key] += low <= truth <= high
            width[key] += high - low
    return {"coverage": {k: round(cover[k] / reps, 4) for k in KEYS},
            "width": {k: round(width[k] / reps, 4) for k in KEYS}, "reps": reps}


def draw_cells(rng: np.random.Generator, reps: int, items: int, judge: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (human scores, judge scores) of ``reps`` cells of ``items`` answers, one row per cell."""
    q = rng.normal(3.2, 0.9, (reps, items))
    human = np.clip(np.rint(q + rng.normal(0, 0.7, q.shape)), *SCALE)
    if judge == "good-biased":
        score = q + 0.8 + rng.normal(0, 0.4, q.shape)
    elif judge == "nonlinear":
        score = 1 + 4 * np.clip((q - 1) / 4, 0, 1) ** 2.5 + 0.6 + rng.normal(0, 0.5, q.shape)
    else:  # useless: independent of the answer
        score = rng.integers(1, 6, q.shape).astype(float)
    return human, np.clip(np.rint(score), *SCALE)


def small_sample_case(reps: int, items: int, reviews: int, judge: str, seed: int) -> tuple[float, ...]:
    """Return (coverage, mean width) of the calibrated 95% interval over ``reps`` cells, then the same of the
    human-only one. Answers are drawn independently, so the first ``reviews`` of each cell are a random sample."""
    rng = np.random.default_rng(seed)
    sums = np.zeros(4)
    for start in range(0, reps, CHUNK):
        human, score = draw_cells(rng, min(CHUNK, reps - start), items, judge)
        out = calibrated_intervals(human[:, :reviews], score[:, :reviews], score[:, reviews:], scale=SCALE)
        truth = human.mean(1)
        for k, (low, high) in enumerate(((out.ci_low, out.ci_high), (out.human_low, out.human_high))):
            sums[2 * k:2 * k + 2] += (((low <= truth) & (truth <= high)).sum(), (high - low).sum())
    return tuple(float(v) / reps for v in sums)


def small_sample_grid(reps: int, seed: int) -> dict:
    """Return every small-sample case's coverage and mean width, their minimum and the Monte-Carlo error."""
    cover, width, human = {}, {}, {}
    for k, (judge, items, reviews) in enumerate((j, big, n) for j in JUDGES for big in ITEMS for n in REVIEWS):
        name = f"{judge}/N={items}/n={reviews}"
        cover[name], width[name], *human[name] = small_sample_case(reps, items, reviews, judge, seed + 1 + k)
    return {"coverage": {k: round(v, 4) for k, v in cover.items()}, "width": {k: round(v, 4) for k, v in width.items()},
            "human_only": {k: [round(v, 4) for v in cw] for k, cw in human.items()},
            "min_coverage": round(min(cover.values()), 4), "reps": reps,
            "mc_se_at_0.95": round(math.sqrt(0.95 * 0.05 / reps), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--items", type=int, default=500, help="judged answers in the cell")
    ap.add_argument("--reviews", type=int, default=50, help="of them, reviewed by a human (at random)")
    ap.add_argument("--bias", type=float, default=0.6, help="the judge's bias on the 1-5 scale")
    ap.add_argument("--noise", type=float, default=0.6, help="the judge's noise (sd) around human + bias")
    ap.add_argument("--case-reps", type=int, default=4000, help="repetitions per small-sample case (0: skip them)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = simulate(args.reps, args.items, args.reviews, args.bias, args.noise, args.seed)
    print(f"{args.reps} cells of {args.items} judged answers, {args.reviews} reviewed at random; judge = human "
          f"+ {args.bias} + N(0, {args.noise}), rounded to 1-5")
    print(f"{'interval (95%)':<16}{'coverage':>10}{'mean width':>12}")
    for key in KEYS:
        print(f"{key:<16}{out['coverage'][key]:>10.3f}{out['width'][key]:>12.3f}")
    if args.case_reps > 0:
        grid = out["small_sample"] = small_sample_grid(args.case_reps, args.seed)
        print(f"\nsmall-sample cases, calibrated 95% interval, {args.case_reps} cells each "
              f"(Monte-Carlo s.e. {grid['mc_se_at_0.95']:.3f} at 0.95)")
        print(f"{'judge/N/n':<28}{'coverage':>10}{'mean width':>12}   human only: coverage, width")
        for name, cov in grid["coverage"].items():
            print(f"{name:<28}{cov:>10.3f}{grid['width'][name]:>12.3f}   {grid['human_only'][name][0]:>10.3f}"
                  f"{grid['human_only'][name][1]:>8.3f}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
