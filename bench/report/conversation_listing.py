"""The report's conversations: how each cell's conversations and agent loops ended (turns, endings, tool calls by
outcome), and the first ``per_cell`` transcripts per way of ending."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from bench.analysis.tables import RunTables, load_run
from bench.config.scenarios import describe
from bench.core.records import Candidate
from bench.core.store import RunStore
from bench.report.display import _display, visible
from bench.report.transcripts import CSS, assistant_turns, candidate_transcript_html, conversation_line, outcome_counts

SHOWN_MAX = 40  # transcripts in the report; the rest are counted (every one is in the run folder)
FAILED = "failed"  # the way a conversation "ended" when its candidate failed (a turn's error, a budget stop)


@dataclass
class Conversations:
    """The report's conversations: counts per cell, the transcripts' HTML, how many the run holds."""

    outcomes: pl.DataFrame  # cell, conversations, failed, assistant_turns, tool_calls, ended, tool_outcomes
    html: str
    count: int

    def show(self) -> None:
        """Display the transcripts (in the notebook, and so in the report)."""
        _display({"text/html": self.html, "text/plain": f"<{self.count} conversations>"})


def conversations(run: str | Path | RunTables, per_cell: int = 1, limit: int = SHOWN_MAX) -> Conversations:
    """Return a run's conversations: counts per cell, the first ``per_cell`` transcripts per cell and ending."""
    t = run if isinstance(run, RunTables) else load_run(run)
    kept = set(t.candidates["id"].to_list())
    talks = sorted((c for c in RunStore(t.run_dir).latest(Candidate).values() if c.id in kept and c.transcript),
                   key=lambda c: (c.cell, c.scenario_id, c.sample))
    shown: dict[tuple[str, str], int] = {}
    picked = []
    for c in talks:
        way = (c.cell, FAILED if c.error else c.ended or "")
        if shown.get(way, 0) < per_cell:
            shown[way] = shown.get(way, 0) + 1
            picked.append(c)
    blocks = [_block(c, t.scenarios) for c in picked[:limit]]
    more = (f'<p class="bench-note">… {len(picked) - limit} more transcripts of the same kinds (the run folder '
            f"holds them all)</p>" if len(picked) > limit else "")
    return Conversations(_outcomes(talks), CSS + "".join(blocks) + more if blocks else "", len(talks))


def _block(c: Candidate, scenarios: dict[str, Any]) -> str:
    """Return one conversation as a folded block: its cell, scenario and summary line, then its transcript."""
    s = scenarios.get(c.scenario_id)
    about = describe(s.fields, 100) if s is not None else c.scenario_id
    head = f"{c.cell} · {about}" + (f" · sample {c.sample}" if c.sample else "")
    return (f'<details class="bench-convo" open><summary><b>{html.escape(visible(head, 300))}</b> — '
            f"{html.escape(visible(conversation_line(c), 600))}</summary>"
            f"{candidate_transcript_html(c, css=False, line=False)}</details>")


def _outcomes(talks: list[Candidate]) -> pl.DataFrame:
    """Return per cell: conversations, failed, mean turns, tool calls, endings and tool outcomes as text."""
    cells: dict[str, dict[str, Any]] = {}
    for c in talks:
        row = cells.setdefault(c.cell, {"n": 0, "failed": 0, "turns": 0, "ended": {}, "outcomes": {}})
        row["n"] += 1
        row["failed"] += c.error is not None
        row["turns"] += assistant_turns(c)
        way = FAILED if c.error else c.ended or "—"
        row["ended"][way] = row["ended"].get(way, 0) + 1
        for outcome, n in outcome_counts(c).items():
            row["outcomes"][outcome] = row["outcomes"].get(outcome, 0) + n
    text = lambda counts: ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or None  # noqa: E731
    rows = [(cell, r["n"], r["failed"], r["turns"] / r["n"], sum(r["outcomes"].values()), text(r["ended"]),
             text(r["outcomes"])) for cell, r in sorted(cells.items())]
    return pl.DataFrame(rows, orient="row", schema={
        "cell": pl.Utf8, "conversations": pl.Int64, "failed": pl.Int64, "assistant_turns": pl.Float64,
        "tool_calls": pl.Int64, "ended": pl.Utf8, "tool_outcomes": pl.Utf8})
