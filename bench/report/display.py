"""What the analysis notebook displays: escaped HTML tables and text (never Markdown or raw HTML from a run),
and plotly figures; plotly.js is emitted once, inline, by :func:`setup`, so the report works offline."""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

CSS = """<style>
table.bench{border-collapse:collapse;font-size:12px;margin:6px 0 14px}
table.bench th,table.bench td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
table.bench th{background:#f4f4f6;text-align:center}
table.bench td.t{text-align:left;max-width:46em}
table.bench td.t div{white-space:pre-wrap;overflow-wrap:break-word;max-height:14em;overflow:auto}
div.bench-scroll{max-width:100%;overflow-x:auto}
details.bench-thinking summary{cursor:pointer;color:#555;font-style:italic}
p.bench-note{color:#555;font-size:13px;margin:4px 0 10px;overflow-wrap:anywhere}
</style>"""


def _display(bundle: dict[str, Any]) -> None:
    from IPython.display import display  # noqa: PLC0415 (IPython: only inside a notebook kernel)
    display(bundle, raw=True)


def setup() -> None:
    """Emit the report's CSS and plotly.js (inline, once): call in the notebook's first cell."""
    from plotly.offline import get_plotlyjs  # noqa: PLC0415 (plotly: only the analysis notebook needs it)
    script = f'<script type="text/javascript">window.PlotlyConfig={{MathJaxConfig:"local"}};{get_plotlyjs()}</script>'
    _display({"text/html": CSS + script, "text/plain": ""})


def figure(fig: Any) -> None:
    """Display a plotly figure: interactive in JupyterLab, inline HTML (plotly.js already loaded) in the report."""
    body = fig.to_html(include_plotlyjs=False, full_html=False, config={"displaylogo": False, "responsive": True})
    # plotly's encoder writes NaN as null: a bare NaN in a display message would make jupyter_client warn
    _display({"text/html": body, "application/vnd.plotly.v1+json": json.loads(fig.to_json()),
              "text/plain": f"<figure: {html.escape(str(fig.layout.title.text or ''))}>"})


def note(text: str) -> None:
    """Display a line of text (escaped)."""
    _display({"text/html": f'<p class="bench-note">{html.escape(visible(text))}</p>', "text/plain": text})


def heading(text: str, level: int = 3) -> None:
    """Display a heading whose text comes from the run (escaped)."""
    _display({"text/html": f"<h{level}>{html.escape(visible(text))}</h{level}>", "text/plain": text})


_CODE, _BOLD, _ITALIC = re.compile(r"`([^`]+)`"), re.compile(r"\*\*([^*]+)\*\*"), re.compile(r"\*([^*]+)\*")


def section(title: str, about: str = "", *, empty: str | None = None, level: int = 2) -> bool:
    """Display a section's heading and ``about`` (the notebook's text: `code`, **bold**, *italics*), or ``empty``
    alone as one line; return whether the section has something to show."""
    if empty is not None:
        _display({"text/html": f'<p class="bench-note"><b>{html.escape(title)}</b>: {html.escape(visible(empty))}</p>',
                  "text/plain": f"{title}: {empty}"})
        return False
    heading(title, level)
    if about:
        text = _ITALIC.sub(r"<i>\1</i>", _BOLD.sub(r"<b>\1</b>", _CODE.sub(r"<code>\1</code>", html.escape(about))))
        _display({"text/html": f"<p>{text}</p>", "text/plain": about})
    return True


CLIP_CHARS = 4000  # a longer text (a 1 MB answer) is cut in the report, with a note of how much
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def visible(text: str, limit: int | None = CLIP_CHARS) -> str:
    """Return ``text`` with control characters (NUL, ANSI escapes, …) shown as ``\\xNN``, cut past ``limit``."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text if limit is None or len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"


ZERO_BELOW = 1e-12  # |x| below this is floating-point residue (a mean of differences that cancel), shown as 0


def number(value: float, digits: int = 3, unit: str = "") -> str:
    """Return a number's text: ``digits`` decimals from 0.1 up, ``digits`` significant digits below, the exponent
    only below 1e-4 or from 1e6; NaN as "n/a", None as "—", near-zero and -0.0 unsigned; ``unit`` before it ("$")."""
    if value is None:
        return "—"
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if abs(value) < ZERO_BELOW:
        value = 0.0  # also drops the sign of -0.0
    a = abs(value)
    text = (f"{value:.3g}" if a >= 1e6 else f"{value:.{digits}f}" if a >= 0.1 or a == 0
            else f"{value:.{digits}g}")
    return f"-{unit}{text[1:]}" if unit and text.startswith("-") else unit + text


def fmt(value: Any, digits: int = 3, unit: str = "") -> str:
    """Return a cell's text: None as "—", NaN as "n/a", numbers as :func:`number`, text visible and clipped."""
    if value is None or isinstance(value, float):
        return number(value, digits, unit)
    if isinstance(value, (list, dict)):
        return visible(", ".join(map(str, value)) if isinstance(value, list) else str(value))
    return visible(str(value))


NOTE = "note"  # the column that says why a row's statistic is undefined (shown only when a row has one)


def folded(text: str | None, label: str = "thinking") -> str:
    """Return ``text`` folded in a ``<details>`` (escaped, clipped) whose summary says its length; "" for none."""
    if not text:
        return ""
    return (f'<details class="bench-{label}"><summary>{label} ({len(text):,} characters)</summary>'
            f"<div>{html.escape(visible(text))}</div></details>")


def table_html(frame: Any, *, digits: int = 3, max_rows: int = 60, fold: dict[str, str] | None = None) -> str:
    """Return a polars frame as an escaped HTML table in a scrolling box (``_usd`` columns in dollars, an empty
    ``note`` column left out); ``fold``: {column: into}, each value folded atop ``into``'s cell, not a column."""
    import polars as pl  # noqa: PLC0415 (polars: `import bench.report` stays light)
    if NOTE in frame.columns and frame[NOTE].null_count() == frame.height:
        frame = frame.drop(NOTE)
    fold = {k: v for k, v in (fold or {}).items() if k in frame.columns and v in frame.columns}
    tops = [[folded(t, "thinking" if k == "reasoning" else k) for t in frame[k].head(max_rows).to_list()] for k in fold]
    into = {v: n for n, v in enumerate(fold.values())}
    frame = frame.drop(list(fold))
    text = [frame.schema[c] in (pl.Utf8, pl.Categorical) or isinstance(frame.schema[c], pl.List) for c in frame.columns]
    units = ["$" if str(c).endswith("_usd") else "" for c in frame.columns]
    head = "".join(f"<th>{html.escape(str(c)).replace('_', '_<wbr>')}</th>" for c in frame.columns)  # may wrap
    rows = []
    for r, row in enumerate(frame.head(max_rows).iter_rows()):
        top = [tops[into[c]][r] if c in into else "" for c in frame.columns]
        cells = (f'<td class="t">{f}<div>{html.escape(fmt(v, digits))}</div></td>' if t else
                 f"<td>{html.escape(fmt(v, digits, u))}</td>" for v, t, u, f in zip(row, text, units, top))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = (f'<p class="bench-note">… {frame.height - max_rows} more rows (the notebook has them all)</p>'
            if frame.height > max_rows else "")
    return (f'<div class="bench-scroll"><table class="bench"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>{more}')


def table(frame: Any, *, digits: int = 3, max_rows: int = 60, empty: str = "nothing to show",
          fold: dict[str, str] | None = None) -> None:
    """Display a polars frame as an escaped HTML table (or ``empty`` without rows); ``fold`` as table_html."""
    if frame.height == 0:
        note(empty)
        return
    _display({"text/html": table_html(frame, digits=digits, max_rows=max_rows, fold=fold),
              "text/plain": table_text(frame.drop([c for c in fold or () if c in frame.columns]), digits=digits,
                                       max_rows=max_rows)})


def table_text(frame: Any, *, digits: int = 3, max_rows: int = 60) -> str:
    """Return a polars frame as plain text, every value written by :func:`fmt`, rows past ``max_rows`` counted."""
    head = [str(c) for c in frame.columns]
    units = ["$" if h.endswith("_usd") else "" for h in head]
    rows = [[fmt(v, digits, u).replace("\n", " ") for v, u in zip(row, units)]
            for row in frame.head(max_rows).iter_rows()]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    if frame.height > max_rows:
        lines.append(f"… {frame.height - max_rows} more rows")
    return "\n".join(line.rstrip() for line in lines)
