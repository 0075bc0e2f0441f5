"""Per-cell scores with bootstrap confidence intervals, and paired differences between cells.
The unit of resampling is the scenario (its samples averaged first)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import polars as pl

from bench.analysis._inputs import require
from bench.analysis.bootstrap import bootstrap_means, column_means, holm, percentile_interval, sign_flip_pvalues
from bench.analysis.tables import COMPOSITE

CELL_COLS = ["cell", "model", "prompt"]


def _codes(expr: pl.Expr) -> pl.Expr:
    """Return integer codes of a string expression (by hashing, not sorting)."""
    return expr.cast(pl.Categorical).to_physical().cast(pl.Int64)


def _matrices(scores: pl.DataFrame, column: pl.Expr, meta: list[str]):
    """Yield (judge, scenarios × columns matrix of per-scenario means with NaN for missing, column meta)."""
    if scores["value"].null_count():
        scores = scores.filter(pl.col("value").is_not_null())
    enc = scores.select(_codes(pl.col("judge")).alias("_j"), _codes(pl.col("scenario")).alias("_s"),
                        _codes(column).alias("_k"))
    j, s, k = (enc[c].to_numpy() for c in ("_j", "_s", "_k"))
    values = scores["value"].to_numpy().astype(np.float64)
    found = [(scores["judge"][int(np.argmax(j == code))], code) for code in (_dense(j)[0] if j.size else [])]
    for judge, code in sorted(found):
        idx = np.flatnonzero(j == code)
        rows, r = _dense(s[idx])
        cols, c = _dense(k[idx])
        flat = r * cols.size + c
        count = np.bincount(flat, minlength=rows.size * cols.size).reshape(rows.size, cols.size)
        total = np.bincount(flat, weights=values[idx], minlength=count.size).reshape(count.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.where(count > 0, total / count, np.nan)
        first = np.empty(cols.size, dtype=np.int64)
        first[c[::-1]] = idx[::-1]  # the first row of each column, for its labels
        info = scores[first].select(*meta).with_columns(pl.Series("items", count.sum(axis=0)), pl.lit(judge).alias("judge"))
        yield judge, x, info


def _dense(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (the distinct codes in order, each code's index among them): np.unique without a sort."""
    present = np.zeros(int(codes.max()) + 1, dtype=bool)
    present[codes] = True
    return np.flatnonzero(present), (np.cumsum(present) - 1)[codes]


def leaderboard(scores: pl.DataFrame, *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Return per (judge, cell, criterion) of ``scores`` (load_run's): mean, bootstrap CI, n, items; best first."""
    require(scores, ["judge", "cell", "criterion", "scenario", "value"], "leaderboard", "scores")
    labels = [c for c in CELL_COLS[1:] if c in scores.columns]
    absent = [pl.lit(None, dtype=pl.Utf8).alias(c) for c in CELL_COLS[1:] if c not in scores.columns]
    out = []
    column = pl.concat_str(["cell", "criterion"], separator="\x1f")
    for _judge, x, info in _matrices(scores, column, ["cell", *labels, "criterion"]):
        info = info.with_columns(absent) if absent else info
        mean, n = column_means(x)
        lo, hi = percentile_interval(bootstrap_means(x, resamples, seed), level)
        out.append(info.with_columns(pl.Series("mean", mean), pl.Series("ci_low", lo), pl.Series("ci_high", hi),
                                     pl.Series("n", n.astype(np.int64))))
    if not out:
        return pl.DataFrame(schema={"judge": pl.Utf8, **{c: pl.Utf8 for c in CELL_COLS}, "criterion": pl.Utf8,
                                    "mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                                    "n": pl.Int64, "items": pl.Int64})
    return (pl.concat(out).select("judge", *CELL_COLS, "criterion", "mean", "ci_low", "ci_high", "n", "items")
            .sort(["judge", "criterion", "mean"], descending=[False, False, True], nulls_last=True))


def composite(board: pl.DataFrame) -> pl.DataFrame:
    """Return the composite rows of a leaderboard, best first within each judge."""
    return board.filter(pl.col("criterion") == COMPOSITE).drop("criterion")


def _pairs(cells: pl.DataFrame, compare: str) -> list[tuple[int, int]]:
    rows = cells.to_dicts()
    same = {"prompts": "model", "models": "prompt"}.get(compare)
    if compare not in ("all", "prompts", "models"):
        raise ValueError(f"compare must be 'all', 'prompts' (within a model) or 'models' (within a prompt), not {compare!r}")
    return [(i, j) for i, j in combinations(range(len(rows)), 2) if same is None or rows[i][same] == rows[j][same]]


def paired_differences(scores: pl.DataFrame, *, criterion: str = COMPOSITE, compare: str = "all",
                       resamples: int = 1000, permutations: int = 10000, seed: int = 0,
                       level: float = 0.95) -> pl.DataFrame:
    """Return per judge and pair of cells (a, b): mean of a − b over shared scenarios, its bootstrap CI, a
    two-sided sign-flip p, Holm-adjusted, and wins/ties/losses (``compare``: "prompts" or "models")."""
    if compare not in ("all", "prompts", "models"):
        raise ValueError(f"compare must be 'all', 'prompts' (within a model) or 'models' (within a prompt), not {compare!r}")
    same = {"prompts": ["model"], "models": ["prompt"]}.get(compare, [])
    require(scores, ["judge", "cell", "criterion", "scenario", "value", *same], "paired_differences", "scores")
    out = []
    for judge, x, cells in _matrices(scores.filter(pl.col("criterion") == criterion), pl.col("cell"), ["cell", *same]):
        order = np.argsort(cells["cell"].to_numpy(), kind="stable")  # pairs read alphabetically: a before b
        x, cells = x[:, order], cells[order]
        pairs = _pairs(cells, compare)
        if not pairs:
            continue
        a, b = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        d = x[:, a] - x[:, b]
        mean, n = column_means(d)
        lo, hi = percentile_interval(bootstrap_means(d, resamples, seed), level)
        p = sign_flip_pvalues(d, permutations, seed)
        names = cells["cell"].to_list()
        out.append(pl.DataFrame({
            "judge": judge, "a": [names[i] for i in a], "b": [names[j] for j in b], "diff": mean,
            "ci_low": lo, "ci_high": hi, "p_value": p, "n": n.astype(np.int64),
            "a_wins": (d > 0).sum(axis=0), "ties": (d == 0).sum(axis=0), "b_wins": (d < 0).sum(axis=0)}))
    if not out:
        return pl.DataFrame(schema={"judge": pl.Utf8, "a": pl.Utf8, "b": pl.Utf8, "diff": pl.Float64,
                                    "ci_low": pl.Float64, "ci_high": pl.Float64, "p_value": pl.Float64,
                                    "p_holm": pl.Float64, "n": pl.Int64, "a_wins": pl.Int64, "ties": pl.Int64,
                                    "b_wins": pl.Int64, "note": pl.Utf8})
    frame = pl.concat(out)
    adjusted = np.concatenate([holm(g["p_value"].to_numpy()) for g in frame.partition_by("judge", maintain_order=True)])
    note = pl.when(pl.col("n") == 0).then(pl.lit("n/a: the two cells share no graded scenario"))
    return frame.with_columns(pl.Series("p_holm", adjusted), note.alias("note")).select(
        "judge", "a", "b", "diff", "ci_low", "ci_high", "p_value", "p_holm", "n", "a_wins", "ties", "b_wins", "note")
