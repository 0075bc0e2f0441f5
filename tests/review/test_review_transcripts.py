"""Transcripts in the review panel and the offline review file (issue 31, point 4): a reviewer grading a conversation
sees all of it, roles named and each tool call folded with its arguments and result, hostile text escaped; a
one-reply answer is shown as before. The panel is built in-process on records written here, like the other
panel tests; its HTML is parsed (tests.report.test_transcripts_shown)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.config.rubrics import load_rubric, snapshot_rubric
from bench.core.store import RunStore
from bench.review import ReviewPanel, ReviewSession
from bench.testing.grids import ROOT
from bench.testing.records import candidate, judgment, scenario
from tests.report.test_transcripts_shown import HOSTILE, agent, inside, parsed, talk


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A tool-using answer, a simulated-user conversation and a one-reply answer, each graded once."""
    run = tmp_path / "runs" / "rt"
    rubric = load_rubric("tip-v1", ROOT)
    snapshot_rubric(rubric, run)
    s = [scenario({"city": c}) for c in ("Paris", "Oslo", "Rome")]
    answers = [agent(s[0], 3, "max_steps", [("c1", "get_weather", '{"city": "Paris"}', "ok"),
                                            ("c2", "get_wether", "{not json", "unknown_tool")]),
               talk(s[1]), candidate(s[2], model_id="plain", output=f"Pack an umbrella. {HOSTILE}")]
    spec = {"judge_id": "j", "rubric_id": rubric.id, "rubric_version": rubric.version, "rubric_hash": rubric.hash}
    RunStore(run).append([*s, *answers, *(judgment(c, **spec, scores={k.id: 3 for k in rubric.criteria})
                                          for c in answers)])
    return run


def shown(panel: ReviewPanel) -> dict[str, str]:
    """Return each item's HTML as the panel shows it, by the answering model's id."""
    out = {}
    for _ in panel.items:
        out[panel.item.answers[0].model_id] = panel.item_html.value
        panel.move(1)
    return out


def test_the_panel_shows_a_conversation_whole_with_its_tool_calls_folded(run_dir):
    items = shown(ReviewPanel(run_dir, reviewer="ann", filter="all"))
    page = parsed(items["agent"])
    assert any(inside(s, "details", "bench-call") for s in page.around("Weather in Paris: sunny"))
    assert any(inside(s, "summary", "") for s in page.around("get_wether({not json)")), "raw arguments, as written"
    assert any(inside(s, "details", "bench-call") for s in page.around("unknown_tool"))
    assert len(page.around("ended: max_steps")) == 1, "why it ended, said once"
    assert page.around("1 assistant turn · 2 tool calls (1 unknown_tool) · ended: max_steps"), "three steps, one turn"
    assert not [s for s in page.scripts if "__pwned" in s] and HOSTILE in "".join(t for t, _ in page.texts)
    assert not [a for tag, a in page.tags if "onerror" in a]
    convo = parsed(items["support"])
    assert convo.around("user (simulated)") and convo.around("Thanks! [DONE]") and convo.around("ended: user_done")
    assert not [s for s in convo.scripts if "__pwned" in s] and not [a for _t, a in convo.tags if "onerror" in a]
    plain = parsed(items["plain"])
    assert any(inside(s, "pre", "") for s in plain.around("Pack an umbrella.")), "a one-reply answer, as before"
    assert not plain.around("assistant") and "bench-talk" not in items["plain"]


def test_the_review_file_carries_each_conversation_and_why_it_ended(run_dir, tmp_path):
    path = tmp_path / "review.json"
    ReviewSession(run_dir, reviewer="ann").export(path)
    entries = {e["answers"][0]: e for e in json.loads(path.read_text())["entries"]}
    by_ended = {tuple(e.get("ended") or ()): e for e in entries.values()}
    assert set(by_ended) == {("max_steps",), ("user_done",), ()}
    tool = by_ended[("max_steps",)]["transcripts"][0]
    assert [m["role"] for m in tool] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert tool[4]["tool_calls"][0]["function"]["arguments"] == "{not json"
    assert "transcripts" not in by_ended[()], "a one-reply answer's entry is as before"
