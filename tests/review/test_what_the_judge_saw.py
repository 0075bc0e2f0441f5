"""Reviewers see what the judge saw (issue 49, point 4): the reference a reference-guided judge was shown, the
scenario's images (and whether the judge saw them), a conversation's tool calls; the queue filtered by judge or
rubric in the panel and in `bench review export`; and a checks-only judge puts nothing in the queue (64 of 192
queued items once belonged to one). Records are written here; the panel is driven in-process, its HTML parsed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from bench.analysis import load_run
from bench.config.rubrics import load_rubric, snapshot_rubric
from bench.core.errors import BenchError
from bench.core.images import file_ref, store_image
from bench.core.store import RunStore
from bench.review import ReviewPanel, ReviewSession
from bench.testing.grids import ROOT
from bench.testing.in_process import command
from bench.testing.records import candidate, judgment, scenario
from tests.report.test_transcripts_shown import agent, inside, parsed


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), "red").save(out, "PNG")
    return out.getvalue()


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """Two answers about a picture (one an agent's tool loop), each graded by an LLM judge shown the reference and the
    image, by checks only, and by a tip-v1 judge shown neither."""
    run = tmp_path / "runs" / "seen"
    rubrics = {r: load_rubric(r, ROOT) for r in ("vision-reference-judge", "vision-reference-checks", "tip-v1")}
    for r in rubrics.values():
        snapshot_rubric(r, run)
    image = file_ref("image", png(), "image/png", origin="red.png")
    store_image(run, image, png())
    s = [scenario({"city": "Paris"}, reference={"answer": ["3", "three"], "category": "count"}, images=[image]),
         scenario({"city": "Oslo"}, reference={"answer": "Oslo", "category": "place"})]
    answers = [agent(s[0], 2, "answered", [("c1", "get_weather", '{"city": "Paris"}', "ok")]),
               candidate(s[1], output="Answer: Oslo", reasoning="The question names Oslo; say Oslo.")]
    judges = {"grader": "vision-reference-judge", "checks": "vision-reference-checks", "tip": "tip-v1"}
    grades = []
    for jid, rid in judges.items():
        r = rubrics[rid]
        spec = {"judge_id": jid, "rubric_id": r.id, "rubric_version": r.version, "rubric_hash": r.hash, "mode": r.mode}
        scores = {k.id: k.scale[1] for k in r.criteria}
        grades += [judgment(c, **spec, scores=scores or {"exact": 1.0}, score=r.composite(scores) if scores else 1.0)
                   for c in answers]
    RunStore(run).append([*s, *answers, *grades])
    return run


def test_a_checks_only_judge_puts_nothing_in_the_review_queue(run_dir):
    session = ReviewSession(run_dir, reviewer="ann")
    queued = [j for it in session.items for j in it.judgments]
    assert queued and all(j.judge_id != "checks" for j in queued), "no judge's grade to review: checks only"
    assert len(session.items) == 4 and session.progress() == (0, 4), "2 answers × 2 rubrics an LLM graded"
    assert session.judge_ids == ["grader", "tip"]
    assert load_run(run_dir).reviewed.units == 4, "the report's count, read column-wise, says the same"
    checks = next(j for j in session.judgments.values() if j.judge_id == "checks")
    with pytest.raises(BenchError, match="checks only"):
        session.save(checks.id, scores={})
    with pytest.raises(BenchError, match="judges with items: grader, tip"):
        session.select("all", judge="checks")


def test_the_panel_shows_the_reference_and_images_the_judge_saw_and_filters_by_judge(run_dir):
    panel = ReviewPanel(run_dir, reviewer="ann", filter="all")
    assert [v for _, v in panel.judge.options] == ["", "grader", "tip"]
    panel.judge.value = "grader"
    assert len(panel.items) == 2 and {it.rubric for it in panel.items} == {"vision-reference-judge@1"}
    pages = {}
    for _ in panel.items:
        pages[panel.item.scenario.fields["city"]] = parsed(panel.item_html.value)
        panel.move(1)
    paris, oslo = pages["Paris"], pages["Oslo"]
    assert paris.around("Reference shown to the judge") and ["answer", '["3", "three"]'] in paris.rows
    assert ["category", "count"] not in paris.rows, "only the keys the rubric shows its judge"
    assert ["answer", "Oslo"] in oslo.rows
    assert oslo.around("thinking (34 characters; not shown to the judge)"), "the answer's thinking, folded"
    assert paris.around("(shown to the judge)")
    assert [a["src"][:23] for t, a in paris.tags if t == "img"] == ["data:image/jpeg;base64,"]
    assert any(inside(s, "details", "bench-call") for s in paris.around("Weather in Paris: sunny")), "tool calls"
    panel.judge.value, panel.rubric.value = "", "tip-v1@1"
    assert len(panel.items) == 2 and all(it.rubric == "tip-v1@1" for it in panel.items)
    tip = [parsed(panel.item_html.value)]
    panel.move(1)
    tip.append(parsed(panel.item_html.value))
    assert not any(p.around("Reference shown to the judge") for p in tip), "tip-v1 shows its judge no reference"
    assert any(p.around("(not shown to the judge)") for p in tip)


def test_the_review_export_carries_the_reference_and_images_and_filters_by_judge(run_dir, tmp_path):
    session = ReviewSession(run_dir, reviewer="ann")
    path = tmp_path / "grader.json"
    assert session.export(path, judge="grader") == 2
    entries = {e["scenario"]["city"]: e for e in json.loads(path.read_text())["entries"]}
    paris, oslo = entries["Paris"], entries["Oslo"]
    assert paris["reference"] == {"answer": ["3", "three"]} and oslo["reference"] == {"answer": "Oslo"}
    assert paris["images_shown_to_judge"] is True and "images" not in oslo
    assert oslo["thinking"] == ["The question names Oslo; say Oslo."] and oslo["thinking_shown_to_judge"] is False
    assert "thinking" not in paris
    [image] = paris["images"]
    assert image["column"] == "image" and (run_dir / image["file"]).is_file()
    assert [m["role"] for m in paris["transcripts"][0]] == ["system", "user", "assistant", "tool", "assistant"]
    assert session.export(path, rubric="tip-v1") == 2
    tip = json.loads(path.read_text())["entries"]
    assert all("reference" not in e for e in tip) and any(e.get("images_shown_to_judge") is False for e in tip)
    assert session.export(path) == 4, "every LLM judge's items, none of the checks"


def test_bench_review_export_takes_judge_and_rubric(run_dir, tmp_path):
    out = command(tmp_path, "review", "export", str(run_dir), str(tmp_path / "r.json"), "--judge", "grader")
    assert out.returncode == 0 and "wrote 2 entries" in out.stdout, out.stderr
    out = command(tmp_path, "review", "export", str(run_dir), str(tmp_path / "r.json"), "--rubric", "nope")
    assert out.returncode != 0 and "rubrics with items: tip-v1@1, vision-reference-judge@1" in out.stderr
