"""Plotly figures of a run's analysis (:class:`bench.analysis.Summary` tables in, ``go.Figure`` out).

Every label that comes from the run (cell, judge and criterion names) is HTML-escaped before it
reaches a figure: plotly renders a subset of HTML in text, and a report must show a model's
name or answer as text, never as markup.
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
import polars as pl

from .analysis.tables import COMPOSITE

LAYOUT = {"template": "plotly_white", "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": {"size": 12}}


def _e(values: Any) -> list[str]:
    return [html.escape(str(v)) for v in values]


def _empty(title: str, why: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=html.escape(why), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=html.escape(title), height=200, xaxis={"visible": False}, yaxis={"visible": False}, **LAYOUT)
    return fig


def _interval_dots(frame: pl.DataFrame, value: str, title: str, axis: str) -> go.Figure:
    """Return one dot per cell at ``value`` with its [ci_low, ci_high] bar, one colour per judge."""
    fig = go.Figure()
    for (judge,), part in frame.sort(value).group_by(["judge"], maintain_order=True):
        n = part["n"] if "n" in part.columns else part["battles"]
        fig.add_trace(go.Scatter(
            x=part[value].to_list(), y=_e(part["cell"]), mode="markers", name=html.escape(str(judge)),
            marker={"size": 10}, customdata=n.to_numpy()[:, None],
            error_x={"type": "data", "symmetric": False, "array": (part["ci_high"] - part[value]).to_list(),
                     "arrayminus": (part[value] - part["ci_low"]).to_list()},
            hovertemplate="%{y}: %{x:.3f} (n=%{customdata[0]})<extra></extra>"))
    fig.update_layout(title=title, xaxis_title=axis, scattermode="group",
                      height=140 + 28 * frame["judge"].n_unique() * frame["cell"].n_unique(), **LAYOUT)
    return fig


def leaderboard_figure(overview: pl.DataFrame, *, title: str = "Leaderboard (composite, 95% CI)") -> go.Figure:
    """Return a dot plot of each cell's composite score with its bootstrap CI, one colour per judge."""
    if overview.is_empty():
        return _empty(title, "no graded answers in this run")
    return _interval_dots(overview, "mean", title, "composite score")


def criteria_heatmap(board: pl.DataFrame, judge: str, *, title: str | None = None) -> go.Figure:
    """Return a cells × criteria heatmap of mean scores for one judge (composite last)."""
    part = board.filter(pl.col("judge") == judge)
    title = title or f"Mean score per criterion — {judge}"
    if part.is_empty():
        return _empty(title, "this judge graded nothing")
    crits = sorted(set(part["criterion"].to_list()) - {COMPOSITE}) + [COMPOSITE]
    wide = part.pivot("criterion", index="cell", values="mean").sort("cell")
    crits = [c for c in crits if c in wide.columns]
    z = wide.select(crits).to_numpy()
    fig = go.Figure(go.Heatmap(z=z, x=_e(crits), y=_e(wide["cell"]), colorscale="Viridis",
                               text=[[f"{v:.2f}" if v == v else "" for v in row] for row in z], texttemplate="%{text}",
                               hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=html.escape(title), height=140 + 32 * wide.height, **LAYOUT)
    return fig


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


def cost_quality(overview: pl.DataFrame, usage_cells: pl.DataFrame) -> go.Figure:
    """Return quality (composite with CI) against cost per answer; when a price is unknown, against mean
    output tokens per answer instead (the axis title says which)."""
    joined = overview.join(usage_cells.select("cell", "calls", "cost_usd", "mean_completion_tokens"), on="cell")
    if joined.is_empty():
        return _empty("Cost vs quality", "no graded answers")
    priced = joined["cost_usd"].null_count() == 0
    x = (joined["cost_usd"] / joined["calls"]) if priced else joined["mean_completion_tokens"]
    fig = go.Figure()
    for judge in joined["judge"].unique().sort().to_list():
        m = (joined["judge"] == judge).to_numpy()
        g = joined.filter(pl.col("judge") == judge)
        fig.add_trace(go.Scatter(
            x=x.filter(m).to_list(), y=g["mean"].to_list(), mode="markers+text", text=_e(g["cell"]),
            textposition="top center", name=html.escape(str(judge)), marker={"size": 11},
            error_y={"type": "data", "symmetric": False, "array": (g["ci_high"] - g["mean"]).to_list(),
                     "arrayminus": (g["mean"] - g["ci_low"]).to_list()}))
    fig.update_layout(title="Cost vs quality", yaxis_title="composite score",
                      xaxis_title="cost per answer (USD)" if priced else
                      "output tokens per answer (price unknown for some calls)", height=420, **LAYOUT)
    return fig


def _square(rows: list[str], cols: list[str], z: list, zmin: float, title: str) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=z, x=_e(cols), y=_e(rows), zmin=zmin, zmax=1, colorscale="RdBu",
                               texttemplate="%{z:.2f}", hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=html.escape(title), height=160 + 40 * len(rows), **LAYOUT)
    return fig


def _pair_matrix(frame: pl.DataFrame, row: str, col: str, value: str, symmetric: bool) -> tuple[list[str], list]:
    names = sorted(set(frame[row].to_list()) | set(frame[col].to_list()))
    k = {n: i for i, n in enumerate(names)}
    z: list[list[float | None]] = [[1.0 if symmetric and a == b else None for b in names] for a in names]
    for r in frame.iter_rows(named=True):
        z[k[r[row]]][k[r[col]]] = r[value]
        if symmetric:
            z[k[r[col]]][k[r[row]]] = r[value]
    return names, z


def agreement_matrix(agreement: pl.DataFrame, *, criterion: str = COMPOSITE) -> go.Figure:
    """Return a judges × judges heatmap of weighted Cohen's kappa on ``criterion`` (all rubrics)."""
    part = agreement.filter(pl.col("criterion") == criterion)
    title = f"Judge agreement (quadratic-weighted kappa, {criterion})"
    if part.is_empty():
        return _empty(title, "needs two judges grading the same answers with one rubric")
    judges, z = _pair_matrix(part, "a", "b", "kappa", symmetric=True)
    return _square(judges, judges, z, -1.0, title)


def win_rate_matrix(matrix: pl.DataFrame, judge: str) -> go.Figure:
    """Return a cells × cells heatmap of the row cell's win rate against the column cell (ties ½)."""
    part = matrix.filter(pl.col("judge") == judge)
    title = f"Pairwise win rate (row vs column) — {judge}"
    if part.is_empty():
        return _empty(title, "no pairwise verdicts")
    cells, z = _pair_matrix(part, "player", "opponent", "win_rate", symmetric=False)
    return _square(cells, cells, z, 0.0, title)


def ratings_figure(ratings: pl.DataFrame) -> go.Figure:
    """Return Bradley–Terry ratings with bootstrap CIs, one colour per judge."""
    if ratings.is_empty():
        return _empty("Bradley–Terry ratings", "no pairwise verdicts")
    return _interval_dots(ratings, "rating", "Bradley–Terry ratings (Elo scale, 95% CI)", "rating")
