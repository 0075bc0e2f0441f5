"""load_run reads records with polars and builds its frames column by column, taking the latest tables from the
attempts tables' rows (for speed: benchmarks/compare.py): the frames must equal the same rows built one pydantic
record at a time (reference_tables)."""

from __future__ import annotations

import gc
import json

import polars as pl

from bench.analysis.tables import CANDIDATE_SCHEMA, SCORE_SCHEMA, load_run
from bench.core.records import Review, Usage
from bench.core.store import RunStore
from bench.testing.records import candidate, judgment, scenario
from tests.analysis import reference_tables


def _write(root):
    """A folder with every kind of record: retried and never-repaired failures, flags, a conversation with a
    simulated user, pairwise and per_turn judgments, a review, and a line in the packed mode's old words."""
    s = [scenario({"q": i}) for i in range(3)]
    ok = candidate(s[0], usage=Usage(prompt_tokens=3, completion_tokens=2, cost_usd=0.01), flags=["injection"])
    retried = candidate(s[1], error="HTTP 500", error_kind="server")
    chat = candidate(s[2], model_id="c", transcript=[{"role": "user", "content": "hi"}], ended="max_turns",
                     turns=[{"turn": 1, "by": "simulator", "simulator": "sim", "usage": {"calls": 1}}],
                     simulator_usage=Usage(prompt_tokens=1, completion_tokens=1, cost_usd=0.002))
    fixed = candidate(s[1], output="fixed")
    judged = [judgment(c, scores={"a": 3.0}, score=3.0, rationale="ok") for c in (ok, fixed, chat)]
    judged.append(judgment(ok, judge_id="k", error="no JSON", error_kind="parse"))
    judged += [judgment(chat, judge_id="t", turn=n, scores={"a": float(n)}, score=float(n)) for n in (1, 2)]
    judged.append(judgment(ok, judge_id="p", mode="pairwise", candidate_ids=[ok.id, chat.id], order="AB",
                           verdict="A>B"))
    RunStore(root).append([*s, ok, retried, chat, fixed, *judged,
                           Review(judgment_id=judged[0].id, reviewer="ann", scores={"a": 4.0}, score=4.0)])
    old = judgment(fixed, judge_id="b", mode="packed", pack_id="x1").model_dump(mode="json")
    old["batch_id"], old["mode"] = old.pop("pack_id"), "batch"  # written before the packed mode's rename
    with open(root / "judgments.jsonl", "a") as fh:
        fh.write(json.dumps(old) + "\n")


def test_frames_equal_the_rows_of_each_record(tmp_path):
    _write(tmp_path)
    t = load_run(tmp_path)
    for name, frame in reference_tables.frames(tmp_path).items():
        assert getattr(t, name).equals(frame), name
    # what the folder holds, seen in the frames: one retried answer (2 attempts, the success kept), flags, the
    # conversation's simulated user, the old-words line read as packed, the review
    assert (t.candidate_attempts.height, t.candidates.height, t.judgment_attempts.height) == (4, 3, 8)
    assert t.candidates.filter(pl.col("output") == "fixed").height == 1
    assert t.candidates["flags"].to_list().count(["injection"]) == 1
    assert t.simulator_attempts["simulator"].to_list() == ["sim"]
    assert t.judgments.filter(pl.col("judge") == "b")["mode"].to_list() == ["packed"]
    assert t.reviews["value"].to_list() == [4.0, 4.0] and gc.isenabled()


def test_an_empty_folder_gives_empty_frames_of_the_schema(tmp_path):
    RunStore(tmp_path).append([scenario({"q": 0})])
    t = load_run(tmp_path)
    assert t.candidates.schema == pl.Schema(CANDIDATE_SCHEMA) and t.candidates.is_empty()
    assert t.scores.schema == pl.Schema(SCORE_SCHEMA) and t.judgment_attempts.is_empty()
