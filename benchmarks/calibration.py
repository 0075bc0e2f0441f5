"""Do the calibrated leaderboard's 95% intervals hold what they promise? A simulation with a known truth.

Each repetition draws one cell of ``--items`` judged answers: a human score per answer on a 1–5
scale (the truth is the mean human score of all of them), and a judge score that is the human
score plus a bias plus noise, rounded and clipped to the scale. ``--reviews`` answers, drawn at
random, get their human score. Three 95% intervals of the cell's mean human score are computed
with bench's own code (``bench.analysis.calibrated.calibrated_leaderboard`` on the frames
``bench.analysis.tables`` would hold): the judge alone, the reviews alone and PPI++ from both.
Printed: each interval's empirical coverage of the truth and its mean width, then one JSON line.

    python benchmarks/calibration.py                  # 1000 repetitions, bias 0.6
    python benchmarks/calibration.py --reps 2000 --bias 0 --reviews 30
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.analysis.calibrated import calibrated_leaderboard  # noqa: E402 (after the path is set)
from bench.analysis.tables import COMPOSITE, REVIEW_SCHEMA  # noqa: E402

KEYS = ("judge_only", "human_only", "calibrated")


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
        [row] = calibrated_leaderboard(scores, revs).iter_rows(named=True)
        bounds = {"judge_only": (row["judge_only_ci_low"], row["judge_only_ci_high"]),
                  "human_only": (row["human_only_ci_low"], row["human_only_ci_high"]),
                  "calibrated": (row["ci_low"], row["ci_high"])}
        for key, (low, high) in bounds.items():
            cover[key] += low <= truth <= high
            width[key] += high - low
    return {"coverage": {k: round(cover[k] / reps, 4) for k in KEYS},
            "width": {k: round(width[k] / reps, 4) for k in KEYS}, "reps": reps}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--items", type=int, default=500, help="judged answers in the cell")
    ap.add_argument("--reviews", type=int, default=50, help="of them, reviewed by a human (at random)")
    ap.add_argument("--bias", type=float, default=0.6, help="the judge's bias on the 1-5 scale")
    ap.add_argument("--noise", type=float, default=0.6, help="the judge's noise (sd) around human + bias")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = simulate(args.reps, args.items, args.reviews, args.bias, args.noise, args.seed)
    print(f"{args.reps} cells of {args.items} judged answers, {args.reviews} reviewed at random; judge = human "
          f"+ {args.bias} + N(0, {args.noise}), rounded to 1-5")
    print(f"{'interval (95%)':<16}{'coverage':>10}{'mean width':>12}")
    for key in KEYS:
        print(f"{key:<16}{out['coverage'][key]:>10.3f}{out['width'][key]:>12.3f}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
