"""Pairwise verdicts as battles: win rates against a baseline, Bradley–Terry ratings, position bias.
Each pairwise judgment is one battle of cell A against B, A's outcome 1, 0.5 or 0 (``A>>B`` may count more)."""

from __future__ import annotations

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.bootstrap import bootstrap_ratios, percentile_interval, resample_counts

OUTCOME = {"A>>B": 1.0, "A>B": 1.0, "A=B": 0.5, "B>A": 0.0, "B>>A": 0.0}
STRONG = {"A>>B", "B>>A"}
BATTLE_SCHEMA = {"judge": pl.Utf8, "scenario": pl.Utf8, "sample": pl.Int64, "a": pl.Utf8, "b": pl.Utf8,
                 "order": pl.Utf8, "verdict": pl.Utf8, "shown_verdict": pl.Utf8, "outcome": pl.Float64,
                 "strong": pl.Boolean, "repeat": pl.Int64}
BATTLE_COLS = ["judge", "scenario", "a", "b", "outcome", "strong"]  # what win rates, matrix and ratings read


def battles(judgments: pl.DataFrame) -> pl.DataFrame:
    """Return one row per successful pairwise judgment: cells a and b, order shown, A's outcome."""
    require(judgments, ["judge", "mode", "error", "verdict", "shown_verdict", "scenario", "sample", "cell", "cell_b",
                        "order"], "battles", "judgments")
    pw = judgments.filter((pl.col("mode") == "pairwise") & pl.col("error").is_null()
                          & pl.col("verdict").is_in(list(OUTCOME)))
    return pw.select("judge", "scenario", "sample", pl.col("cell").alias("a"), pl.col("cell_b").alias("b"), "order",
                     "verdict", "shown_verdict",
                     pl.col("verdict").replace_strict(OUTCOME, return_dtype=pl.Float64).alias("outcome"),
                     pl.col("verdict").is_in(list(STRONG)).alias("strong"),
                     (pl.col("repeat") if "repeat" in judgments.columns else pl.lit(0, pl.Int64)).alias("repeat"))


def _oriented(b: pl.DataFrame, baseline: str | None, strong_weight: float) -> pl.DataFrame:
    """Return (judge, scenario, player, opponent, score, weight) with each battle seen from both sides."""
    w = pl.when(pl.col("strong")).then(pl.lit(float(strong_weight))).otherwise(pl.lit(1.0))
    fwd = b.select("judge", "scenario", pl.col("a").alias("player"), pl.col("b").alias("opponent"),
                   pl.col("outcome").alias("score"), w.alias("weight"))
    rev = b.select("judge", "scenario", pl.col("b").alias("player"), pl.col("a").alias("opponent"),
                   (1.0 - pl.col("outcome")).alias("score"), w.alias("weight"))
    both = pl.concat([fwd, rev])
    return both.filter(pl.col("opponent") == baseline) if baseline is not None else both


def common_opponent(battle: pl.DataFrame) -> str | None:
    """Return the baseline of a baseline design: the cell that is B in every battle (bench puts the
    judge's ``baseline`` cell there), else the one cell present in every battle; None if there is none."""
    if battle.is_empty():
        return None
    if battle["b"].n_unique() == 1:
        return battle["b"][0]
    common = {c for c in (battle["a"][0], battle["b"][0]) if ((battle["a"] == c) | (battle["b"] == c)).all()}
    return common.pop() if len(common) == 1 else None


def win_rates(battle: pl.DataFrame, *, baseline: str | None = "auto", strong_weight: float = 1.0,
              resamples: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Return per (judge, cell): win rate against ``baseline`` (``"auto"``: the cell in every battle; None: all
    opponents pooled), ties counting ½, strong verdicts ``strong_weight`` times, with a bootstrap CI over scenarios."""
    require(battle, BATTLE_COLS, "win_rates", "battle")
    out = []
    for (judge,), jb in battle.group_by(["judge"], maintain_order=True):
        base = common_opponent(jb) if baseline == "auto" else baseline
        rates = _win_rates(_oriented(jb, base, strong_weight), resamples, seed, level)
        if rates is not None:
            out.append(rates.with_columns(pl.lit(judge).alias("judge"), pl.lit(base or "all").alias("baseline")))
    if not out:
        return pl.DataFrame(schema={"judge": pl.Utf8, "cell": pl.Utf8, "baseline": pl.Utf8, "win_rate": pl.Float64,
                                    "ci_low": pl.Float64, "ci_high": pl.Float64, "battles": pl.UInt32,
                                    "wins": pl.UInt32, "ties": pl.UInt32, "losses": pl.UInt32})
    return (pl.concat(out).rename({"player": "cell"})
            .select("judge", "cell", "baseline", "win_rate", "ci_low", "ci_high", "battles", "wins", "ties", "losses")
            .sort(["judge", "win_rate"], descending=[False, True]))


def _win_rates(part: pl.DataFrame, resamples: int, seed: int, level: float) -> pl.DataFrame | None:
    if part.is_empty():
        return None
    per = (part.group_by(["scenario", "player"])
           .agg((pl.col("score") * pl.col("weight")).sum().alias("num"), pl.col("weight").sum().alias("den")))
    num = per.pivot("player", index="scenario", values="num").sort("scenario")
    den = per.pivot("player", index="scenario", values="den").sort("scenario")
    players = [c for c in num.columns if c != "scenario"]
    n_mat = num.select(players).fill_null(0.0).to_numpy()
    d_mat = den.select(players).fill_null(0.0).to_numpy()
    lo, hi = percentile_interval(bootstrap_ratios(n_mat, d_mat, resamples, seed), level)
    counts = part.group_by("player").agg(pl.len().alias("battles"), (pl.col("score") == 1.0).sum().alias("wins"),
                                         (pl.col("score") == 0.5).sum().alias("ties"),
                                         (pl.col("score") == 0.0).sum().alias("losses"))
    stats = pl.DataFrame({"player": players, "win_rate": n_mat.sum(0) / d_mat.sum(0), "ci_low": lo, "ci_high": hi})
    return stats.join(counts, on="player")


def win_matrix(battle: pl.DataFrame) -> pl.DataFrame:
    """Return per (judge, row cell, column cell): the row's mean outcome against the column, and battles."""
    require(battle, BATTLE_COLS, "win_matrix", "battle")
    o = _oriented(battle, None, 1.0)
    return (o.group_by(["judge", "player", "opponent"]).agg(pl.col("score").mean().alias("win_rate"),
                                                            pl.len().alias("battles"))
            .sort(["judge", "player", "opponent"]))


def fit_bradley_terry(i: np.ndarray, j: np.ndarray, score: np.ndarray, weight: np.ndarray, players: int,
                      prior: float = 0.5, tol: float = 1e-10, max_iter: int = 5000) -> np.ndarray:
    """Return log-strengths (mean 0) maximizing the Bradley–Terry likelihood (Hunter's 2004 MM iterations).
    ``prior`` adds that many virtual wins each way to every pair that met; ``prior=0`` raises when no fit exists."""
    if not (np.isfinite(prior) and prior >= 0):
        raise ValueError(f"prior must be a finite number ≥ 0 of virtual wins each way per pair, not {prior!r}")
    wins = np.zeros((players, players))
    np.add.at(wins, (i, j), score * weight)
    np.add.at(wins, (j, i), (1.0 - score) * weight)
    met = (wins + wins.T) > 0
    if prior == 0 and not _strongly_connected(wins > 0):
        raise ValueError("fit_bradley_terry: with prior=0 the maximum-likelihood strengths do not exist (they run "
                         "off to ±infinity): some players never beat, or never lost to, the others (e.g. one won "
                         "every battle); use a prior > 0")
    wins += prior * met
    games = wins + wins.T
    total = wins.sum(axis=1)
    p = np.ones(players)
    for _ in range(max_iter):
        denom = (games / (p[:, None] + p[None, :])).sum(axis=1)
        new = np.where(denom > 0, total / np.where(denom > 0, denom, 1.0), p)
        new /= np.exp(np.mean(np.log(new)))
        if np.max(np.abs(new - p) / p) < tol:
            p = new
            break
        p = new
    return np.log(p)


def _strongly_connected(beat: np.ndarray) -> bool:
    """Return whether every player who played can reach every other one along "i beat j" edges."""
    active = (beat | beat.T).any(axis=1)
    reach = beat[np.ix_(active, active)] | np.eye(int(active.sum()), dtype=bool)
    while True:
        wider = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
        if (wider == reach).all():
            return bool(reach.all())
        reach = wider


def bradley_terry(battle: pl.DataFrame, *, anchor: str | None = None, resamples: int = 1000, seed: int = 0,
                  level: float = 0.95, strong_weight: float = 1.0, scale: float = 400.0,
                  base: float = 1000.0, prior: float = 0.5) -> pl.DataFrame:
    """Return per (judge, cell): a Bradley–Terry rating on the Elo scale (``anchor`` at ``base``, else the mean)
    with a bootstrap CI over scenarios, battles, and the fit's ``prior`` (virtual wins each way per pair)."""
    require(battle, BATTLE_COLS, "bradley_terry", "battle")
    out = []
    for (judge,), part in battle.group_by(["judge"], maintain_order=True):
        players = sorted(set(part["a"].to_list()) | set(part["b"].to_list()))
        index = {p: k for k, p in enumerate(players)}
        i = np.array([index[x] for x in part["a"].to_list()])
        j = np.array([index[x] for x in part["b"].to_list()])
        score = part["outcome"].to_numpy()
        weight = np.where(part["strong"].to_numpy(), strong_weight, 1.0)
        scen = np.unique(part["scenario"].to_numpy(), return_inverse=True)[1]

        def ratings(w: np.ndarray) -> np.ndarray:
            r = fit_bradley_terry(i, j, score, w, len(players), prior=prior) * scale / np.log(10)
            return r - (r[index[anchor]] if anchor in index else r.mean()) + base

        point = ratings(weight)
        rng = np.random.default_rng(seed)
        boots = np.array([ratings(weight * resample_counts(rng, 1, scen.max() + 1)[0][scen]) for _ in range(resamples)])
        lo, hi = percentile_interval(boots, level)
        n = np.bincount(np.concatenate([i, j]), minlength=len(players))
        out.append(pl.DataFrame({"judge": judge, "cell": players, "rating": point, "ci_low": lo, "ci_high": hi,
                                 "battles": n.astype(np.int64), "prior": float(prior)}))
    if not out:
        return pl.DataFrame(schema={"judge": pl.Utf8, "cell": pl.Utf8, "rating": pl.Float64, "ci_low": pl.Float64,
                                    "ci_high": pl.Float64, "battles": pl.Int64, "prior": pl.Float64})
    return pl.concat(out).sort(["judge", "rating"], descending=[False, True])


def position_pairs(battle: pl.DataFrame) -> pl.DataFrame:
    """Return one row per pair a judge was asked: ``first``, ``decisive``, ``orders`` and ``signs``, the frame
    :func:`position_consistency` and the bias audit's position measures read."""
    require(battle, ["judge", "scenario", "sample", "a", "b", "order", "outcome"], "position_pairs", "battle")
    decisive = pl.col("outcome") != 0.5
    first_won = ((pl.col("outcome") == 1.0) == (pl.col("order") != "BA")) & decisive
    pair = ["judge", "scenario", "sample", "a", "b"] + (["repeat"] if "repeat" in battle.columns else [])
    return battle.group_by(pair, maintain_order=True).agg(
        first_won.sum().cast(pl.Int64).alias("first"), decisive.sum().cast(pl.Int64).alias("decisive"),
        pl.col("order").n_unique().alias("orders"), pl.col("outcome").sub(0.5).sign().n_unique().alias("signs"))


def position_consistency(battle: pl.DataFrame) -> pl.DataFrame:
    """Return per judge: pairs seen in both orders, the share whose two verdicts agree, and how often a decisive
    verdict favoured the response shown first (0.5 = no bias)."""
    require(battle, ["judge", "scenario", "sample", "a", "b", "order", "outcome"], "position_consistency", "battle")
    per = position_pairs(battle)
    both = (per.filter(pl.col("orders") == 2)
            .group_by("judge").agg(pl.len().alias("pairs"), (pl.col("signs") == 1).mean().alias("consistency")))
    first = (per.group_by("judge").agg(pl.col("first").sum(), pl.col("decisive").sum())
             .filter(pl.col("decisive") > 0)
             .select("judge", (pl.col("first") / pl.col("decisive")).alias("first_position_wins"),
                     pl.col("decisive").cast(pl.UInt32)))
    return (battle.group_by("judge").agg(pl.len().alias("battles"))
            .join(both, on="judge", how="left").join(first, on="judge", how="left").sort("judge"))
