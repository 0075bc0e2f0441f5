"""load_run reads records with polars against the schema their models declare (bench.analysis.record_reader): on a
folder with every kind of fault its rows are the records pydantic reads, its tables those built record by record
(reference_tables), and a torn last line or an unknown key leaves the rest of a clean file to polars."""

from __future__ import annotations

import json
import warnings

import polars as pl
import pytest
from pydantic import BaseModel

from bench.analysis.record_reader import read_rows, schema_of
from bench.analysis.tables import load_run
from bench.core.digests import MixedRunWarning, cell_digest, supersede
from bench.core.records import RECORD_TYPES, Review, Usage
from bench.core.store import RunStore, TornRecordWarning
from bench.testing.records import candidate, judgment, scenario
from tests.analysis import reference_tables


def _lines(path, *lines):
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _faulty_folder(root):
    """Write a folder with every fault and shape the reader meets; return the line numbers it must set aside."""
    s = [scenario({"q": i}) for i in range(4)]
    s.append(scenario({"q": 9}, images=[{"column": "image", "sha256": "ab" * 32, "path": "images/ab.png"}]))
    paid = Usage(prompt_tokens=3, completion_tokens=2, cost_usd=0.01, calls=2,
                 paid_attempts=[{"prompt_tokens": 1, "cost_usd": 0.004, "finish_reason": "length"}])
    old = candidate(s[0], prompt_hash="h-old", created_at="2026-01-01T00:00:00.000+00:00")  # superseded below
    new = candidate(s[0], usage=paid, flags=["injection"])
    stopped = candidate(s[1], error="budget reached", error_kind="budget")  # an interrupted attempt, then its retry
    retried = candidate(s[1], output="second try")
    chat = candidate(s[2], model_id="c", transcript=[{"role": "user", "content": "hi"}], ended="max_turns",
                     turns=[{"turn": 1, "by": "simulator", "simulator": "sim", "usage": {"calls": 1, "cost_usd": 0.1}},
                            {"turn": 1, "by": "model", "usage": {"calls": 0, "cached": True, "cost_usd": 0.2}}],
                     usage=Usage(calls=1, cost_usd=0.5), simulator_usage=Usage(calls=1, cost_usd=0.1))
    failed = candidate(s[3], error="HTTP 500", error_kind="server")
    judged = [judgment(c, scores={"a": 3.0, "b": 4.0}, score=3.5, rationale="ok", expected_scores={"a": 3.2, "b": 4},
                       expected_score=3.6) for c in (old, new, retried)]
    judged += [judgment(chat, judge_id="t", turn=n, scores={"a": float(n)}, score=float(n)) for n in (1, 2)]
    judged.append(judgment(new, judge_id="p", mode="pairwise", candidate_ids=[new.id, chat.id], order="BA",
                           verdict="A>B", details={"shown_verdict": "B>A"}))
    judged.append(judgment(new, judge_id="k", error="no JSON", error_kind="parse"))
    judged.append(judgment(retried, judge_id="mixed", judge_params={"temperature": 0},
                           created_at="2026-01-01T00:00:00.000+00:00"))  # one judge, two contents: no supersede line
    judged.append(judgment(retried, judge_id="mixed", judge_params={"temperature": 1}))
    judged.append(judgment(chat, judge_id="ds", candidate_ids=["s3:A"]))  # a dataset's answer, no candidate
    store = RunStore(root)
    store.append([*s, old, new, stopped, retried, chat, failed, *judged,
                  Review(judgment_id=judged[1].id, reviewer="ann", scores={"a": 4.0, "b": 4.0}, score=4.0)])
    supersede(root, [(cell_digest(new.cell, new.model, None, {}, new.prompt_hash), "x")], "params/g.yaml")
    good = judgment(retried, judge_id="g").model_dump(mode="json")
    packed = {**judgment(new, judge_id="b", mode="packed", pack_id="x1").model_dump(mode="json")}
    packed["batch_id"], packed["mode"] = packed.pop("pack_id"), "batch"  # the packed mode's old words: fallback
    lax = {**judgment(retried, judge_id="lax").model_dump(mode="json"), "repeat": "1"}  # coerced by pydantic
    schema1 = {k: v for k, v in judgment(failed, judge_id="s1").model_dump(mode="json").items()
               if k not in ("attempt", "turn", "expected_scores", "expected_score")}  # fields filled by defaults
    ints = {**judgment(new, judge_id="ints").model_dump(mode="json"), "score": 4, "scores": {"a": 4}}
    bad = [json.dumps({**good, "score": "high"}),  # a tampered value
           json.dumps({**good, "judge": "extra key"}),  # a key the model does not know
           json.dumps({**good, "schema_version": 9}),  # newer than this bench
           json.dumps({**good, "mode": "graded"}),  # no mode
           json.dumps({**good, "id": ""})[:-1] + ', "order": "AB"}',  # an empty id, filled by the model
           '{"schema_version": 2, "id": "jbroken", "judge_id": ']  # a broken line
    _lines(root / "judgments.jsonl", json.dumps(packed), json.dumps(lax), json.dumps(schema1), json.dumps(ints), *bad)
    _lines(root / "judgments.jsonl", "", json.dumps(good))
    _lines(root / "reviews.jsonl", json.dumps({**Review(judgment_id=judged[2].id, reviewer="bob",
                                                        score=1.0).model_dump(mode="json"), "score": float("nan")}))
    with open(root / "candidates.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(new.model_dump(mode="json"))[:40])  # a torn last line (a kill mid-write)
    first_bad = len(judged) + 5
    return [first_bad + n for n in (0, 1, 2, 3, 5)]  # the empty id is filled by the model: the line is read


def test_the_reader_gives_the_tables_of_the_record_by_record_path(tmp_path):
    unreadable = _faulty_folder(tmp_path)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        fast = load_run(tmp_path)
        slow = reference_tables.frames(tmp_path)
    for name, frame in slow.items():
        assert getattr(fast, name).equals(frame), name
    torn = [str(w.message) for w in said if w.category is TornRecordWarning]
    assert all(any(f"judgments.jsonl:{n}: skipped" in m for m in torn) for n in unreadable), torn
    assert any("candidates.jsonl" in m and "torn last line" in m for m in torn)
    assert any(w.category is MixedRunWarning and "judge mixed" in str(w.message) for w in said)
    # what the folder holds, seen in the tables: the superseded answer and its judgment set aside, the old
    # words read as packed, the lax line coerced, ints read as floats, the damaged review named
    assert fast.set_aside.answers == {("cell", "m/p@v1"): 1} and fast.set_aside.judgments
    assert "packed" in fast.judgments["mode"].to_list()
    assert fast.judgments.filter(fast.judgments["judge"] == "lax")["repeat"].to_list() == [1]
    ints = fast.scores.filter(fast.scores["judge"] == "ints")
    assert ints["value"].to_list() == [4.0, 4.0] and ints["value"].dtype.is_float()
    assert len(fast.reviewed.damaged) == 1 and fast.reviews["reviewer"].unique().to_list() == ["ann"]
    assert fast.simulator_attempts["simulator"].to_list() == ["sim"]
    assert fast.judgment_attempts.filter(fast.judgment_attempts["judge"] == "ds")["cell"].to_list() == ["response_A"]


@pytest.mark.parametrize("kind", ["scenario", "candidate", "judgment", "review"])
def test_the_rows_are_the_records_dumped(tmp_path, kind):
    _faulty_folder(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = read_rows(RunStore(tmp_path), kind)
        records = RunStore(tmp_path).read(kind)
    cls = RECORD_TYPES[kind]
    assert [cls.model_validate(r).model_dump_json() for r in rows] == [r.model_dump_json() for r in records]
    assert list(rows.column("id")) == [r.id for r in records]


def test_a_torn_last_line_leaves_the_rest_of_its_file_read_and_an_unknown_key_its_line_aside(tmp_path):
    s = [scenario({"q": i}) for i in range(3)]
    cands = [candidate(x, usage=Usage(prompt_tokens=2, completion_tokens=1, cost_usd=1, paid_attempts=[{"n": 1}]))
             for x in s]
    RunStore(tmp_path).append([*s, *cands])
    with open(tmp_path / "candidates.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(cands[1].model_dump(mode="json"))[:50])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        rows = read_rows(RunStore(tmp_path), "candidate")
    assert rows == [c.model_dump() for c in cands] and rows[0]["usage"]["cost_usd"] == 1.0
    assert len(said) == 1 and "candidates.jsonl:4: skipped a torn last line" in str(said[0].message)
    (tmp_path / "candidates.jsonl").write_text("".join(c.model_dump_json() + "\n" for c in cands)
                                               + json.dumps({**cands[0].model_dump(mode="json"), "note": "x"}) + "\n")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        rows = read_rows(RunStore(tmp_path), "candidate")
    assert rows == [c.model_dump() for c in cands]
    assert ["Extra inputs are not permitted" in str(w.message) for w in said] == [True]


def test_every_record_kind_has_a_declared_polars_schema_and_a_type_it_cannot_read_is_named():
    for cls in RECORD_TYPES.values():
        schema = schema_of(cls)
        assert schema["id"] == pl.Utf8 and schema["schema_version"] == pl.Int64
    assert schema_of(RECORD_TYPES["judgment"])["usage"] == pl.Struct(
        {k: v for k, v in schema_of(Usage).items()})  # a nested model: a struct of its own declared fields

    class Odd(BaseModel):
        when: set[str]

    with pytest.raises(TypeError, match="cannot read a field of type"):
        schema_of(Odd)
