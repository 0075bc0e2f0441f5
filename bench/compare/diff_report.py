"""The diff report of a comparison: ``reports/<a>-vs-<b>/index.html``, one self-contained HTML file.
Works offline, every run text escaped; ``comparison.json`` beside it is what run B's report links from."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from string import Template

import plotly.graph_objects as go
import polars as pl
from plotly.offline import get_plotlyjs

from bench.analysis.tables import COMPOSITE
from bench.compare.comparison import Comparison
from bench.compare.paired import N_EXACT
from bench.core.paths import reports_root
from bench.core.store import atomic_write
from bench.report.display import CSS, number, table_html, visible

DATA_FILE = "comparison.json"  # beside index.html: the comparison's data, and how a run report finds it
FOREST_ROWS = 60  # above this many rows the forest plot shows the composite rows only
SHOWN = 200  # rows of a long listing shown (the JSON has them all)
LAYOUT = {"template": "plotly_white", "margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "font": {"size": 12}}


def report_path(cmp: Comparison, out: str | Path | None = None) -> Path:
    """Return where the diff report goes: ``out`` (a file, or a folder), else ``reports/<a>-vs-<b>/index.html``."""
    target = Path(out) if out else reports_root() / cmp.name / "index.html"
    return target if target.suffix == ".html" else target / "index.html"


def write_diff_report(cmp: Comparison, out: str | Path | None = None) -> Path:
    """Write the diff report (and ``comparison.json`` beside it); return the report's path."""
    target = report_path(cmp, out).resolve()
    atomic_write(target.parent / DATA_FILE, json.dumps(cmp.to_json(), allow_nan=False).encode(), shared=True)
    atomic_write(target, diff_report_html(cmp).encode("utf-8"), shared=True)
    return target


def diff_report_html(cmp: Comparison) -> str:
    """Return the diff report of ``cmp`` as one standalone HTML page."""
    page = Template(resources.files("bench.compare").joinpath("diff_report.html").read_text(encoding="utf-8"))
    alpha = float(cmp.settings["alpha"])
    e = lambda text: html.escape(visible(str(text)))  # noqa: E731
    script = f'<script type="text/javascript">window.PlotlyConfig={{MathJaxConfig:"local"}};{get_plotlyjs()}</script>'
    return page.substitute(
        title=e(f"bench compare: {cmp.run_a} vs {cmp.run_b}"), css=CSS, plotly=script,
        heading=e(f"{cmp.run_b} compared with {cmp.run_a}"), about=e(_about(cmp)),
        warnings=f'<div class="warnings">{"".join(f"<p>⚠ {html.escape(visible(w))}</p>" for w in cmp.warnings)}</div>'
        if cmp.warnings else "", summary=_summary(cmp), level=f"{round(100 * (1 - alpha), 2):g}",
        exact=N_EXACT, alpha=number(alpha), forest=forest_figure(cmp.rows, alpha).to_html(
            include_plotlyjs=False, full_html=False, config={"displaylogo": False, "responsive": True}),
        table=_table(cmp.rows, "no cell pair has a judge that graded it in both runs."),
        pairwise=_table(cmp.pairwise, "no pairwise judge judged the same pairs in both runs."),
        changed=_changed(cmp.most_changed()),
        disagreements=_table(cmp.sign_disagreements(), "none: every scenario moved with its row, or nothing moved.",
                             max_rows=SHOWN),
        only=_only(cmp))


def _about(cmp: Comparison) -> str:
    s = cmp.settings
    mapped = "; ".join(f"{a} → {b}" for a, b in s["mapping"].items())
    return (f"Run A: {cmp.run_a}. Run B: {cmp.run_b}. Items matched by scenario id and sample, cells by name"
            + (f" and as mapped ({mapped})" if mapped else "") + f". Bootstrap: {s['n_boot']} resamples of the "
            f"scenarios, seed {s['seed']}" + ("; reviewed judgments count with the human review" if
                                             s["human_overrides"] else "") + ".")


def _summary(cmp: Comparison) -> str:
    rows = cmp.rows.filter(pl.col("criterion") == COMPOSITE)
    sig = rows.filter(pl.col("significant"))
    better, worse = sig.filter(pl.col("diff") > 0).height, sig.filter(pl.col("diff") < 0).height
    matched = int(cmp.items.select("cell_a", "scenario", "sample").unique().height) if cmp.items.height else 0
    return (f'<p>{rows.height} composite comparison(s) (cell pair × judge) over {matched} matched answer(s): '
            f'<span class="better">{better} significantly better</span> in B, '
            f'<span class="worse">{worse} significantly worse</span>, {rows.height - better - worse} not '
            f'distinguishable from noise. {len(cmp.only_in_a)} answer(s) only in A, {len(cmp.only_in_b)} only in B.</p>')


def forest_figure(rows: pl.DataFrame, alpha: float = 0.05) -> go.Figure:
    """Return a forest plot of each row's B − A with its interval: better green, worse red, the rest grey."""
    shown = rows.filter(pl.col("criterion") == COMPOSITE) if rows.height > FOREST_ROWS else rows
    shown = shown.filter(pl.col("diff").is_not_nan())
    fig = go.Figure()
    colour = {"better": "#1a7f37", "worse": "#c62828", "no clear change": "#888888"}
    verdict = (pl.when(pl.col("significant") & (pl.col("diff") > 0)).then(pl.lit("better"))
               .when(pl.col("significant") & (pl.col("diff") < 0)).then(pl.lit("worse"))
               .otherwise(pl.lit("no clear change")))
    labelled = shown.with_columns(verdict.alias("verdict"), pl.format("{} → {} · {} · {}", "cell_a", "cell_b", "judge",
                                                                     "criterion").alias("label"))
    for (name,), part in labelled.group_by(["verdict"], maintain_order=True):
        fig.add_trace(go.Scatter(
            x=part["diff"].to_list(), y=[html.escape(v) for v in part["label"]], mode="markers", name=name,
            marker={"size": 9, "color": colour[str(name)]},
            error_x={"type": "data", "symmetric": False, "array": (part["ci_high"] - part["diff"]).to_list(),
                     "arrayminus": (part["diff"] - part["ci_low"]).to_list()},
            customdata=[[number(p), n] for p, n in zip(part["p_holm"], part["n_scenarios"])],
            hovertemplate="%{y}: %{x:.3f} (p_holm %{customdata[0]}, %{customdata[1]} scenarios)<extra></extra>"))
    fig.add_vline(x=0, line_width=1, line_color="#444")
    level = round(100 * (1 - alpha), 1)
    fig.update_layout(title=f"Differences B − A with {level:g}% intervals", xaxis_title="B − A",
                      height=160 + 24 * max(1, shown.height), yaxis={"autorange": "reversed"}, **LAYOUT)
    return fig


def _table(frame: pl.DataFrame, empty: str, max_rows: int = 500) -> str:
    if frame.is_empty():
        return f'<p class="bench-note">{html.escape(empty)}</p>'
    return table_html(frame, max_rows=max_rows)


def _changed(items: pl.DataFrame) -> str:
    """Return the most-changed items as side-by-side tables: A's column and B's, grade, answer, rationale."""
    if items.is_empty():
        return '<p class="bench-note">no graded answer changed.</p>'
    e = lambda v: html.escape(visible("—" if v is None else str(v)))  # noqa: E731
    parts = []
    for r in items.iter_rows(named=True):
        lines = []
        for label, key in (("grade", "score"), ("answer", "answer"), ("rationale", "rationale")):
            a, b = r[f"{key}_a"], r[f"{key}_b"]
            a, b = (number(a), number(b)) if key == "score" else (a, b)
            lines.append(f"<tr><th>{label}</th><td><div>{e(a)}</div></td><td><div>{e(b)}</div></td></tr>")
        parts.append(f"<h3>{e(r['cell_a'])} → {e(r['cell_b'])} · judge {e(r['judge'])} · scenario "
                     f"{e(r['scenario'])} (sample {r['sample']}): {number(r['diff'])}</h3>"
                     f'<p class="bench-note">{e(r["question"])}</p><table class="side"><colgroup>'
                     f'<col style="width:8em"><col><col></colgroup><thead><tr><th></th><th>A ({e(r["cell_a"])})'
                     f'</th><th>B ({e(r["cell_b"])})</th></tr></thead><tbody>{"".join(lines)}</tbody></table>')
    return "".join(parts)


def _only(cmp: Comparison) -> str:
    out = []
    for side, listed in (("A", cmp.only_in_a), ("B", cmp.only_in_b)):
        frame = pl.DataFrame(listed, schema={"cell": pl.Utf8, "scenario_id": pl.Utf8, "sample": pl.Int64})
        out.append(f"<h3>Only in run {side} ({len(listed)})</h3>" + _table(frame, "none.", max_rows=SHOWN))
    return "".join(out)
