"""Plotly figures of a run's analysis (:class:`bench.analysis.Summary` tables in, ``go.Figure`` out). Every label
from the run is HTML-escaped: plotly renders a subset of HTML in text."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
import polars as pl

from bench.analysis.tables import COMPOSITE
from bench.report.display import number

LAYOUT = {"template": "plotly_white", "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": {"size": 12}}


def _e(values: Any) -> list[str]:
    return [html.escape(str(v)) for v in values]


def _empty(title: str, why: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=html.escape(why), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=html.escape(title), height=200, xaxis={"visible": False}, yaxis={"visible": False}, **LAYOUT)
    return fig


def _interval_dots(frame: pl.DataFrame, value: str, title: str, axis: str) -> go.Figure:
    """Return one dot per cell at ``value`` with its CI bar, one colour per judge, judges side by side."""
    fig = go.Figure()
    for (judge,), part in frame.sort(value).group_by(["judge"], maintain_order=True):
        n = part["n"] if "n" in part.columns else part["battles"]
        hover = [[html.escape(str(judge)), k, number(v), number(lo), number(hi)]
                 for k, v, lo, hi in zip(n.to_list(), part[value], part["ci_low"], part["ci_high"])]
        fig.add_trace(go.Scatter(
            x=part[value].to_list(), y=_e(part["cell"]), mode="markers", orientation="h",
            name=html.escape(str(judge)), marker={"size": 10}, customdata=hover,
            error_x={"type": "data", "symmetric": False, "array": (part["ci_high"] - part[value]).to_list(),
                     "arrayminus": (part[value] - part["ci_low"]).to_list()},
            hovertemplate="%{y}: %{customdata[2]} [%{customdata[3]}, %{customdata[4]}] (n=%{customdata[1]})"
                          "<extra>%{customdata[0]}</extra>"))
    fig.update_layout(title=title, xaxis_title=axis, scattermode="group",
                      height=140 + 28 * frame["judge"].n_unique() * frame["cell"].n_unique(), **LAYOUT)
    return fig


def leaderboard_figure(overview: pl.DataFrame, *, title: str = "Leaderboard (composite, 95% CI)") -> go.Figure:
    """Return a dot plot of each cell's composite score with its bootstrap CI, one colour per judge."""
    if overview.is_empty():
        return _empty(title, "no graded answers in this run")
    return _interval_dots(overview, "mean", title, "composite score")


def criteria_heatmap(board: pl.DataFrame, judge: str, *, title: str | None = None,
                     scales: dict[str, tuple[float, float]] | None = None) -> go.Figure:
    """Return a cells × criteria heatmap of a judge's mean scores, coloured on the rubric's ``scales`` (see the bar)."""
    part = board.filter(pl.col("judge") == judge)
    title = title or f"Mean score per criterion — {judge}"
    if part.is_empty():
        return _empty(title, "this judge graded nothing")
    crits = sorted(set(part["criterion"].to_list()) - {COMPOSITE}) + [COMPOSITE]
    wide = part.pivot("criterion", index="cell", values="mean").sort("cell")
    crits = [c for c in crits if c in wide.columns]
    z = wide.select(crits).to_numpy()
    colour, bounds, bar = _on_scale(z, crits, scales or {})
    fig = go.Figure(go.Heatmap(z=_nulls(colour), x=_e(crits), y=_e(wide["cell"]), colorscale="Viridis",
                               **bounds, colorbar={"title": {"text": bar}},
                               text=[[number(v, 2) for v in row] for row in z], texttemplate="%{text}",
                               customdata=[[number(v) if v == v else "n/a: not graded on this criterion"
                                            for v in row] for row in z],
                               hovertemplate="%{y} · %{x}: %{customdata}<extra></extra>"))
    fig.update_layout(title=html.escape(title), height=140 + 32 * wide.height, **LAYOUT)
    return fig


def _on_scale(z: Any, crits: list[str], scales: dict[str, tuple[float, float]]) -> tuple[Any, dict, str]:
    """Return (the values to colour, plotly's zmin/zmax, the colour bar's title) for a heatmap's columns."""
    known = [scales.get(c) for c in crits]
    if not crits or any(s is None or not s[0] < s[1] for s in known):
        return z, {}, "mean (colours span the data: rubric scale unknown)"
    if len(set(known)) == 1:
        lo, hi = known[0]
        return z, {"zmin": lo, "zmax": hi}, f"mean (scale {lo:g}–{hi:g})"
    unit = [[(v - lo) / (hi - lo) if v == v else v for v, (lo, hi) in zip(row, known)] for row in z]
    return unit, {"zmin": 0.0, "zmax": 1.0}, "share of each criterion's scale"


def score_distributions(scores: pl.DataFrame, judge: str, *, criterion: str = COMPOSITE) -> go.Figure:
    """Return one box (with every answer as a point) per cell of a judge's scores on ``criterion``."""
    part = scores.filter((pl.col("judge") == judge) & (pl.col("criterion") == criterion)).sort("cell")
    title = f"Score distribution ({criterion}) — {judge}"
    if part.is_empty():
        return _empty(title, "no scores")
    fig = go.Figure()
    for (cell,), g in part.group_by(["cell"], maintain_order=True):
        fig.add_trace(go.Box(x=g["value"].to_list(), name=html.escape(str(cell)), boxpoints="all", jitter=0.4,
                             pointpos=0, orientation="h", showlegend=False))
    fig.update_layout(title=html.escape(title), xaxis_title=html.escape(criterion),
                      height=140 + 36 * part["cell"].n_unique(), **LAYOUT)
    return fig


LABEL_PX = (7.0, 16.0)  # a permanent label's character width and line height, in pixels (12 px font)
PLOT_PX = (700.0, 340.0)  # the smallest plot area a label layout is planned for (the report is wider)


def _labels_fit(x: list[float], y: list[float], lo: list[float], hi: list[float], labels: list[str]) -> bool:
    """Return whether permanent labels above the points would stay apart at the smallest planned plot size."""
    if len(x) > 12:
        return False
    xs = (max(x) - min(x)) * 1.2 or 1.0
    ys = (max(hi + y) - min(lo + y)) * 1.3 or 1.0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            wide = (len(labels[i]) + len(labels[j])) / 2 * LABEL_PX[0] + 12
            if abs(x[i] - x[j]) / xs * PLOT_PX[0] < wide and abs(y[i] - y[j]) / ys * PLOT_PX[1] < LABEL_PX[1] + 6:
                return False
    return True


def cost_quality(overview: pl.DataFrame, usage_cells: pl.DataFrame) -> go.Figure:
    """Return quality (composite, CI) against cost per answer (output tokens when unpriced); labels if they fit."""
    joined = overview.join(usage_cells.select("cell", "calls", "cost_usd", "mean_completion_tokens"), on="cell")
    joined = joined.filter(pl.col("mean").is_not_null() & ~pl.col("mean").is_nan())
    if joined.is_empty():
        return _empty("Cost vs quality", "no graded answers")
    priced = joined["cost_usd"].null_count() == 0
    x = ((joined["cost_usd"] / joined["calls"]) if priced else joined["mean_completion_tokens"]).fill_nan(None)
    joined = joined.with_columns(x.alias("_x")).filter(pl.col("_x").is_not_null())
    if joined.is_empty():
        return _empty("Cost vs quality", "no answer with a known cost or token count")
    bound = lambda c: pl.col(c).fill_nan(None).fill_null(pl.col("mean"))  # noqa: E731
    lo, hi = joined.select(bound("ci_low"), bound("ci_high"))
    fit = _labels_fit(joined["_x"].to_list(), joined["mean"].to_list(), lo.to_list(), hi.to_list(),
                      [str(c) for c in joined["cell"]])
    what = "cost per answer" if priced else "output tokens per answer"
    fig = go.Figure()
    for judge in joined["judge"].unique().sort().to_list():
        g = joined.filter(pl.col("judge") == judge)
        hover = [[html.escape(str(judge)), number(v, unit="$" if priced else ""), number(m), number(low), number(high)]
                 for v, m, low, high in zip(g["_x"], g["mean"], g["ci_low"], g["ci_high"])]
        fig.add_trace(go.Scatter(
            x=g["_x"].to_list(), y=g["mean"].to_list(), mode="markers+text" if fit else "markers",
            text=_e(g["cell"]), textposition="top center", name=html.escape(str(judge)), marker={"size": 11},
            customdata=hover,
            hovertemplate=f"%{{text}}<br>{what}: %{{customdata[1]}}<br>composite: %{{customdata[2]}} "
                          "[%{customdata[3]}, %{customdata[4]}]<extra>%{customdata[0]}</extra>",
            error_y={"type": "data", "symmetric": False, "array": (g["ci_high"] - g["mean"]).to_list(),
                     "arrayminus": (g["mean"] - g["ci_low"]).to_list()}))
    fig.update_layout(title="Cost vs quality" if fit else "Cost vs quality (hover a point for its cell)",
                      yaxis_title="composite score",
                      xaxis={"title": {"text": "cost per answer (USD)" if priced else
                                       "output tokens per answer (price unknown for some calls)"},
                             "tickprefix": "$" if priced else "", "exponentformat": "e"},
                      height=420, **LAYOUT)
    return fig


def _nulls(z: Any) -> list:
    """Return a matrix with NaN as None (JSON null: plotly leaves the cell blank, the text says why)."""
    return [[None if v is None or v != v else float(v) for v in row] for row in z]


def _square(rows: list[str], cols: list[str], z: list, zmin: float, title: str, notes: list, missing: str) -> go.Figure:
    """Return a heatmap of ``z``: NaN reads "n/a" with its note on hover, a missing pair ``missing``."""
    text = [["" if v is None else number(v, 2) for v in row] for row in z]
    hover = [[missing if v is None else (w or "n/a") if v != v else number(v)
              for v, w in zip(row, why)] for row, why in zip(z, notes)]
    fig = go.Figure(go.Heatmap(z=_nulls(z), x=_e(cols), y=_e(rows), zmin=zmin, zmax=1, colorscale="RdBu",
                               text=text, texttemplate="%{text}", customdata=hover,
                               hovertemplate="%{y} vs %{x}: %{customdata}<extra></extra>"))
    fig.update_layout(title=html.escape(title), height=160 + 40 * len(rows), **LAYOUT)
    return fig


def _pair_matrix(frame: pl.DataFrame, row: str, col: str, value: str, symmetric: bool) -> tuple[list[str], list, list]:
    """Return (names, values, notes) of a pairs frame as square matrices (None where a pair is absent)."""
    names = sorted(set(frame[row].to_list()) | set(frame[col].to_list()))
    k = {n: i for i, n in enumerate(names)}
    z: list[list[float | None]] = [[1.0 if symmetric and a == b else None for b in names] for a in names]
    notes: list[list[str | None]] = [[None for _ in names] for _ in names]
    has_note = "note" in frame.columns
    for r in frame.iter_rows(named=True):
        cells = [(k[r[row]], k[r[col]])] + ([(k[r[col]], k[r[row]])] if symmetric else [])
        for i, j in cells:
            z[i][j] = r[value]
            notes[i][j] = html.escape(r["note"]) if has_note and r["note"] else None
    return names, z, notes


def agreement_matrix(agreement: pl.DataFrame, *, criterion: str = COMPOSITE) -> go.Figure:
    """Return a judges × judges heatmap of weighted Cohen's kappa on ``criterion`` (all rubrics)."""
    part = agreement.filter(pl.col("criterion") == criterion)
    title = f"Judge agreement (quadratic-weighted kappa, {criterion})"
    if part.is_empty():
        return _empty(title, "needs two judges grading the same answers with one rubric")
    judges, z, notes = _pair_matrix(part, "a", "b", "kappa", symmetric=True)
    return _square(judges, judges, z, -1.0, title, notes, "never graded the same answers with one rubric")


def win_rate_matrix(matrix: pl.DataFrame, judge: str) -> go.Figure:
    """Return a cells × cells heatmap of the row cell's win rate against the column cell (ties ½)."""
    part = matrix.filter(pl.col("judge") == judge)
    title = f"Pairwise win rate (row vs column) — {judge}"
    if part.is_empty():
        return _empty(title, "no pairwise verdicts")
    cells, z, notes = _pair_matrix(part, "player", "opponent", "win_rate", symmetric=False)
    return _square(cells, cells, z, 0.0, title, notes, "never met")


def ratings_figure(ratings: pl.DataFrame) -> go.Figure:
    """Return Bradley–Terry ratings with bootstrap CIs, one colour per judge."""
    if ratings.is_empty():
        return _empty("Bradley–Terry ratings", "no pairwise verdicts")
    return _interval_dots(ratings, "rating", "Bradley–Terry ratings (Elo scale, 95% CI)", "rating")


def _as_dots(frame: pl.DataFrame, kinds: dict[str, tuple[str, str, str]], n: str) -> pl.DataFrame:
    """Return ``frame`` reshaped for :func:`_interval_dots`: one row per (judge, kind, cell), the kind in the legend."""
    parts = [frame.filter(pl.col(v).is_not_null()).select(
        (pl.col("judge") + f": {kind}").alias("judge"), "cell", pl.col(v).alias("value"), pl.col(lo).alias("ci_low"),
        pl.col(hi).alias("ci_high"), pl.col(n).alias("n")) for kind, (v, lo, hi) in kinds.items()]
    return pl.concat(parts)


def calibrated_figure(calibrated: pl.DataFrame) -> go.Figure:
    """Return each cell's judge-only, human-only and calibrated means with their intervals."""
    title = "Judge-only, human-only and calibrated means (95% CI)"
    if calibrated.filter(pl.col("estimate").is_not_null()).is_empty():
        return _empty(title, "not enough reviews: review at least 2 judgments of a cell")
    dots = _as_dots(calibrated, {"judge only": ("judge_only", "judge_only_ci_low", "judge_only_ci_high"),
                                 "human only": ("human_only", "human_only_ci_low", "human_only_ci_high"),
                                 "calibrated": ("estimate", "ci_low", "ci_high")}, "n")
    return _interval_dots(dots.filter(pl.col("ci_low").is_not_null()), "value", title, "score")


def style_figure(ratings: pl.DataFrame) -> go.Figure:
    """Return each cell's Bradley–Terry rating without and with style control, with their intervals."""
    title = "Ratings without and with style control (Elo scale, 95% CI)"
    if ratings.is_empty():
        return _empty(title, "no pairwise verdicts with both answers' texts")
    dots = _as_dots(ratings, {"raw": ("rating", "ci_low", "ci_high"),
                              "style-controlled": ("controlled", "controlled_ci_low", "controlled_ci_high")},
                    "battles")
    return _interval_dots(dots, "value", title, "rating")
