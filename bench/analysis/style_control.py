"""Pairwise ratings with style control, as arena-hard-auto: P(a beats b) = σ(θ_a − θ_b + Σ_k β_k·x_k), one
coefficient per style covariate (log-odds per standard deviation)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.bootstrap import percentile_interval, resample_counts
from bench.analysis.pairwise import OUTCOME
from bench.analysis.tables import RunTables

FEATURES = ("length", "headers", "lists", "bold")
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s", re.M)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
RIDGE = 1e-2  # a light L2 penalty: finite strengths for a cell that won (or lost) every battle

RATING_SCHEMA = {"judge": pl.Utf8, "cell": pl.Utf8, "rating": pl.Float64, "ci_low": pl.Float64,
                 "ci_high": pl.Float64, "controlled": pl.Float64, "controlled_ci_low": pl.Float64,
                 "controlled_ci_high": pl.Float64, "rank": pl.Int64, "controlled_rank": pl.Int64,
                 "battles": pl.Int64}
COEF_SCHEMA = {"judge": pl.Utf8, "feature": pl.Utf8, "coef": pl.Float64, "ci_low": pl.Float64,
               "ci_high": pl.Float64}


@dataclass
class StyleControl:
    """Ratings with and without style control, the fitted style coefficients, and what was left out."""

    ratings: pl.DataFrame
    coefficients: pl.DataFrame
    notes: list[str]


def style_features(text: str | None) -> dict[str, float]:
    """Return an answer's style counts: characters, markdown headers, list items and bold spans."""
    text = text or ""
    return {"length": float(len(text)), "headers": float(len(_HEADER.findall(text))),
            "lists": float(len(_LIST.findall(text))), "bold": float(len(_BOLD.findall(text)))}


def battle_texts(t: RunTables) -> dict[str, str]:
    """Return candidate id → answer text: the run's candidates, and ``<scenario>:A``/``:B`` for dataset pairs."""
    texts = {cid: out or "" for cid, out in t.candidates.select("id", "output").iter_rows()}
    for sid, scenario in t.scenarios.items():
        for side in ("A", "B"):
            if f"response_{side}" in scenario.fields:
                texts[f"{sid}:{side}"] = str(scenario.fields[f"response_{side}"])
    return texts


def style_battles(judgments: pl.DataFrame, texts: dict[str, str]) -> pl.DataFrame:
    """Return the successful pairwise judgments as battles (judge, scenario, a, b, outcome) with the raw
    normalised style differences (one column per feature); battles whose texts are unknown are left out."""
    require(judgments, ("judge", "mode", "error", "verdict", "scenario", "cell", "cell_b", "candidate",
                        "candidate_b"), "style_battles", "judgments")
    pw = judgments.filter((pl.col("mode") == "pairwise") & pl.col("error").is_null()
                          & pl.col("verdict").is_in(list(OUTCOME))
                          & pl.col("candidate").is_in(list(texts)) & pl.col("candidate_b").is_in(list(texts)))
    rows = []
    for judge, scen, a, b, verdict, ca, cb in pw.select("judge", "scenario", "cell", "cell_b", "verdict",
                                                          "candidate", "candidate_b").iter_rows():
        fa, fb = style_features(texts[ca]), style_features(texts[cb])
        diff = [(fa[k] - fb[k]) / (fa[k] + fb[k]) if fa[k] + fb[k] else 0.0 for k in FEATURES]
        rows.append((judge, scen, a, b, OUTCOME[verdict], *diff))
    schema = {"judge": pl.Utf8, "scenario": pl.Utf8, "a": pl.Utf8, "b": pl.Utf8, "outcome": pl.Float64,
              **{k: pl.Float64 for k in FEATURES}}
    return pl.DataFrame(rows, schema=schema, orient="row")


def fit_style_bt(i: np.ndarray, j: np.ndarray, y: np.ndarray, x: np.ndarray, players: int,
                 weight: np.ndarray | None = None, iters: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Return (log-strengths with mean 0, style coefficients) of the logistic Bradley–Terry model, by Newton's
    method on the weighted log-likelihood with a light ridge (``RIDGE``). ``x`` is (battles, k), k may be 0."""
    n, k = len(y), x.shape[1]
    design = np.zeros((n, players + k))
    design[np.arange(n), i] += 1.0
    design[np.arange(n), j] -= 1.0
    design[:, players:] = x
    w = np.ones(n) if weight is None else weight
    beta = np.zeros(players + k)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        grad = design.T @ (w * (y - p)) - RIDGE * beta
        hess = (design * (w * p * (1 - p))[:, None]).T @ design + RIDGE * np.eye(players + k)
        step = np.linalg.solve(hess, grad)
        beta += step
        if np.max(np.abs(step)) < 1e-9:
            break
    theta = beta[:players]
    return theta - theta.mean(), beta[players:]


def style_controlled_ratings(battle: pl.DataFrame, *, resamples: int = 200, seed: int = 0, level: float = 0.95,
                             scale: float = 400.0, base: float = 1000.0) -> StyleControl:
    """Return, per judge, each cell's rating without and with style control (Elo scale, bootstrap intervals over
    scenarios) and the style coefficients with intervals. ``battle``: :func:`style_battles`."""
    require(battle, ("judge", "scenario", "a", "b", "outcome", *FEATURES), "style_controlled_ratings", "battle")
    ratings, coefs, notes = [], [], []
    for (judge,), part in battle.sort("judge").group_by(["judge"], maintain_order=True):
        players = sorted(set(part["a"].to_list()) | set(part["b"].to_list()))
        if len(players) < 2:
            notes.append(f"{judge}: fewer than two cells in its battles, nothing to rate")
            continue
        x = part.select(FEATURES).to_numpy().astype(float)
        sd = x.std(axis=0)
        kept = [f for f, s in zip(FEATURES, sd) if s > 0]
        if len(kept) < len(FEATURES):
            notes.append(f"{judge}: no variation in {', '.join(f for f in FEATURES if f not in kept)} "
                         f"across battles: not controlled for")
        x = x[:, sd > 0] / sd[sd > 0]  # scaled, not centred: x = 0 is "styled alike", where ratings are read
        r, c = _judge_fit(part, players, x, kept, resamples, seed, level, scale, base)
        ratings.append(r.with_columns(pl.lit(judge).alias("judge")))
        coefs.append(c.with_columns(pl.lit(judge).alias("judge")))
    rate = pl.concat(ratings).select(list(RATING_SCHEMA)) if ratings else pl.DataFrame(schema=RATING_SCHEMA)
    coef = pl.concat(coefs).select(list(COEF_SCHEMA)) if coefs else pl.DataFrame(schema=COEF_SCHEMA)
    if battle.is_empty():
        notes.append("no pairwise judgment with both answers' texts: nothing to control")
    return StyleControl(rate.sort("judge", "controlled", descending=[False, True]), coef, notes)


def _judge_fit(part: pl.DataFrame, players: list[str], x: np.ndarray, kept: list[str], resamples: int, seed: int,
               level: float, scale: float, base: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    index = {p: n for n, p in enumerate(players)}
    i = np.array([index[v] for v in part["a"].to_list()])
    j = np.array([index[v] for v in part["b"].to_list()])
    y = part["outcome"].to_numpy().astype(float)
    scen = np.unique(part["scenario"].to_numpy(), return_inverse=True)[1]
    elo = scale / np.log(10)

    def fits(w: np.ndarray | None) -> np.ndarray:
        raw, _ = fit_style_bt(i, j, y, x[:, :0], len(players), w)
        ctl, beta = fit_style_bt(i, j, y, x, len(players), w)
        return np.concatenate([raw * elo + base, ctl * elo + base, beta])

    point = fits(None)
    rng = np.random.default_rng(seed)
    boots = np.array([fits(resample_counts(rng, 1, scen.max() + 1)[0][scen].astype(float))
                      for _ in range(resamples)])
    lo, hi = percentile_interval(boots, level)
    m = len(players)
    battles_n = np.bincount(np.concatenate([i, j]), minlength=m).astype(np.int64)
    frame = pl.DataFrame({"cell": players, "rating": point[:m], "ci_low": lo[:m], "ci_high": hi[:m],
                          "controlled": point[m:2 * m], "controlled_ci_low": lo[m:2 * m],
                          "controlled_ci_high": hi[m:2 * m], "battles": battles_n})
    frame = frame.with_columns(pl.col("rating").rank("ordinal", descending=True).cast(pl.Int64).alias("rank"),
                               pl.col("controlled").rank("ordinal", descending=True).cast(pl.Int64)
                               .alias("controlled_rank"))
    coef = pl.DataFrame({"feature": kept, "coef": point[2 * m:], "ci_low": lo[2 * m:], "ci_high": hi[2 * m:]},
                        schema={"feature": pl.Utf8, "coef": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64})
    return frame, coef
