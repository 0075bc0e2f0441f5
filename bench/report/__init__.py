"""The report of a run, the layer above analysis: an HTML file and what the analysis notebook displays.
``import bench.report`` imports neither plotly nor polars."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from bench.report.display import (CLIP_CHARS, figure, fmt, heading, note, number, setup, table, table_html,
                                  visible)
from bench.report.render import NOTEBOOK, render_report, screenshot, shown_outputs, to_html
from bench.report.thumbnails import image_gallery  # the scenarios' images, downscaled (Pillow on first use)
from bench.report.transcripts import candidate_transcript_html, transcript_html

_FIGURES = ("agreement_matrix", "cost_quality", "criteria_heatmap", "leaderboard_figure", "ratings_figure",
            "score_distributions", "win_rate_matrix")  # bench.report.figures imports plotly and polars (~1 s)
_CONVERSATIONS = ("Conversations", "conversations")  # bench.report.conversation_listing imports polars

__all__ = [
    "CLIP_CHARS", "NOTEBOOK", "Conversations", "agreement_matrix", "candidate_transcript_html", "conversations",
    "cost_quality", "criteria_heatmap", "figure", "fmt", "heading",
    "image_gallery", "leaderboard_figure", "note", "number", "ratings_figure", "render_report", "score_distributions", "screenshot",
    "setup", "shown_outputs", "table", "table_html", "to_html", "transcript_html", "visible", "win_rate_matrix",
]


def __getattr__(name: str) -> Any:
    if name in _CONVERSATIONS:
        return getattr(import_module("bench.report.conversation_listing"), name)
    if name not in _FIGURES:
        raise AttributeError(f"module 'bench.report' has no attribute {name!r}")
    return getattr(import_module("bench.report.figures"), name)
