"""Plotly figures of the report's Judges section: each judge's confusion matrices against the human reviews, and
its bias at each human grade (labels HTML-escaped)."""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from bench.config.rubric_spec import DEFAULT_LABELS
from bench.report.display import number
from bench.report.figures import LAYOUT

PER_ROW = 3  # confusion matrices side by side before the figure wraps


def _label(v: object) -> str:
    return number(v, 2).removesuffix(".00") if isinstance(v, float) else html.escape(str(v))


def _in_order(values: set) -> list:
    """Return grades in scale order: numbers ascending, verdicts as a pairwise rubric lists them, then others."""
    rank = {label: n for n, label in enumerate(DEFAULT_LABELS)}
    return sorted(values, key=lambda v: (0, v, "") if isinstance(v, float) else (1, rank.get(v, len(rank)), str(v)))


def confusion_heatmaps(judge: str, matrices: dict[str, pl.DataFrame]) -> go.Figure:
    """Return per criterion a heatmap of the judge's grade (rows) against the human's (columns), with counts."""
    names = list(matrices)
    rows = max(1, math.ceil(len(names) / PER_ROW))
    cols = min(PER_ROW, max(1, len(names)))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[html.escape(n) for n in names],
                        horizontal_spacing=0.08, vertical_spacing=0.18 if rows > 1 else 0.1)
    for i, name in enumerate(names):
        m = matrices[name]
        judge_levels = _in_order(set(m["judge_score"].to_list()) | set(m["human_score"].to_list()))
        labels = [_label(v) for v in judge_levels]
        at = {v: n for n, v in enumerate(judge_levels)}
        z = [[0] * len(labels) for _ in labels]
        for j, h, c in m.iter_rows():
            z[at[j]][at[h]] = c
        fig.add_trace(go.Heatmap(z=z, x=labels, y=labels, colorscale="Blues", showscale=False,
                                 text=[[str(c) for c in row] for row in z], texttemplate="%{text}",
                                 hovertemplate="judge %{y}, human %{x}: %{z}<extra></extra>"),
                      row=i // PER_ROW + 1, col=i % PER_ROW + 1)
        fig.update_xaxes(title_text="human", type="category", row=i // PER_ROW + 1, col=i % PER_ROW + 1)
        fig.update_yaxes(title_text="judge", type="category", row=i // PER_ROW + 1, col=i % PER_ROW + 1)
    fig.update_layout(title=f"Confusion with human reviews: {html.escape(judge)}", height=120 + 300 * rows, **LAYOUT)
    return fig


def bias_figure(bias: pl.DataFrame, judge: str) -> go.Figure:
    """Return the judge's mean (judge − human) at each human grade with its interval, a colour per criterion."""
    part = bias.filter(pl.col("judge") == judge)
    fig = go.Figure()
    for (criterion,), g in part.group_by(["criterion"], maintain_order=True):
        lo = [m - (c if c is not None else m) for m, c in zip(g["mean_bias"], g["ci_low"])]
        hi = [(c if c is not None else m) - m for m, c in zip(g["mean_bias"], g["ci_high"])]
        fig.add_trace(go.Scatter(x=g["mean_bias"].to_list(), y=[_label(v) for v in g["human_score"]],
                                 mode="markers", orientation="h", name=html.escape(str(criterion)),
                                 marker={"size": 9}, customdata=g["n"].to_list(),
                                 error_x={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
                                 hovertemplate="human %{y}: %{x:.2f} (n=%{customdata})<extra>%{fullData.name}</extra>"))
    fig.add_vline(x=0, line_dash="dot", line_color="#888")
    grades = [_label(v) for v in sorted(set(part["human_score"].to_list()))]
    fig.update_layout(title=f"Bias by human grade: {html.escape(judge)} (judge − human, 95% CI)",
                      xaxis_title="judge − human", yaxis_title="human grade", yaxis_type="category",
                      yaxis_categoryorder="array", yaxis_categoryarray=grades,
                      scattermode="group", height=160 + 40 * max(1, part["human_score"].n_unique()), **LAYOUT)
    return fig
