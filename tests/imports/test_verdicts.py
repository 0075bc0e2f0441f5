"""`bench import verdicts`: another tool's pairwise verdicts and graded scores become records that `bench judges`,
accuracy, the report's tables and `bench compare` read as they read a sweep's; bad rows are named by line, nothing
is half-written, and importing twice adds nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest

from bench.analysis import judge_accuracy, load_run, summarize
from bench.compare import compare_runs
from bench.core.records import Judgment, Scenario
from bench.core.store import RunStore, StoreWriteError
from bench.imports import ImportProblems, import_verdicts
from bench.judge_trust import judges_document
from bench.testing.in_process import command

PAIRS = 50  # half labelled A>B: a judge that always picks the first seat is right half the time in each order


def pairwise_rows() -> list[dict]:
    """50 pairs, each judged in both orders by a judge that always picks the answer shown first and a perfect one."""
    rows = []
    for n in range(PAIRS):
        label = "A>B" if n % 2 == 0 else "B>A"
        for judge in ("first-slot", "perfect"):
            for order in ("AB", "BA"):
                first = "A>B" if order == "AB" else "B>A"  # the answer shown first, in the original numbering
                rows.append({"id": f"pair-{n}", "question": f"Which answer to question {n} is right?",
                             "response_a": f"answer a{n}", "response_b": f"answer b{n}", "label": label,
                             "judge": judge, "order": order, "verdict": first if judge == "first-slot" else label})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def snapshot(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.glob("*.jsonl"))}


def test_pairwise_verdicts_give_the_position_audit_and_accuracy_of_a_sweep(tmp_path):
    src, run = write_jsonl(tmp_path / "verdicts.jsonl", pairwise_rows()), tmp_path / "run"
    got = import_verdicts(src, run)
    assert (got["scenarios"], got["candidates"], got["judgments"], got["already_there"]) == (PAIRS, 0, 4 * PAIRS, 0)
    t = load_run(run)
    doc = {j["judge"]: j for j in judges_document(t, resamples=200)["judges"]}  # what `bench judges --json` prints
    first, perfect = doc["first-slot"], doc["perfect"]
    assert (first["first_slot_preference"], perfect["first_slot_preference"]) == (1.0, 0.5)
    assert (first["flip_rate"], perfect["flip_rate"]) == (1.0, 0.0)
    assert (first["accuracy_both_orders"], perfect["accuracy_both_orders"]) == (0.0, 1.0)
    assert first["accuracy_by_order"] == {"AB": 0.5, "BA": 0.5} and perfect["accuracy_by_order"] == {"AB": 1, "BA": 1}
    assert (first["accuracy"], perfect["accuracy"]) == (0.5, 1.0)
    assert perfect["kappa_against_label"]["kappa"] == 1.0 and first["kappa_against_label"]["kappa"] < 0.5
    acc = judge_accuracy(t, resamples=100).filter(pl.col("category") == "all")
    assert dict(zip(acc["judge"], acc["accuracy"])) == {"first-slot": 0.5, "perfect": 1.0}
    j = next(j for j in RunStore(run).read(Judgment) if j.judge_id == "first-slot" and j.order == "BA")
    assert (j.verdict, j.details["shown_verdict"], j.candidate_ids[1].endswith(":B")) == ("B>A", "A>B", True)
    assert j.details["imported_from"] == str(src) and j.usage.calls == 0
    assert all(s.source == f"imported from {src}" for s in RunStore(run).read(Scenario))


def test_importing_the_same_file_again_adds_nothing(tmp_path):
    src, run = write_jsonl(tmp_path / "verdicts.jsonl", pairwise_rows()[:8]), tmp_path / "run"
    import_verdicts(src, run)
    before = snapshot(run)
    again = import_verdicts(src, run)
    assert (again["scenarios"], again["judgments"], again["already_there"]) == (0, 0, 2 + 8)
    assert snapshot(run) == before


def test_graded_csv_rows_become_answers_with_grades_and_labels(tmp_path):
    src = tmp_path / "graded.csv"
    rows = [("q1", "2+2?", "4", "judge-x", "", json.dumps({"correct": 1, "clarity": 0.5}), "pass", "m1"),
            ("q1", "2+2?", "four,\nI think", "judge-x", "1", "", "pass", "m2"),  # a quoted field of two lines
            ("q2", "3+3?", "7", "judge-x", "0", "", "fail", "m1"),
            ("q2", "3+3?", "6", "judge-x", "", "", "fail", "m2")]  # no score: a failed grade
    with open(src, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "response", "judge", "score", "scores", "label", "model"])
        w.writerows(rows)
    run = tmp_path / "run"
    got = import_verdicts(src, run)
    assert (got["kind"], got["scenarios"], got["candidates"], got["judgments"]) == ("graded", 2, 4, 4)
    t = load_run(run)
    assert sorted(t.candidates["cell"].unique()) == ["m1/imported@1", "m2/imported@1"]
    assert "four,\nI think" in t.candidates["output"].to_list()
    composite = t.scores.filter(pl.col("criterion") == "composite").sort("cell", "scenario")
    assert sorted(composite["value"]) == [0.0, 0.75, 1.0]
    assert set(t.scores["criterion"]) == {"correct", "clarity", "score", "composite"}  # `score` alone: criterion score
    [rubric] = run.glob("rubrics/*/imported.md")  # the scale it is read on: 0–1, around the grades given
    failed = [j for j in RunStore(run).read(Judgment) if not j.ok]
    assert [j.details["line"] for j in failed] == [6]  # the file's line: row 2 spans lines 3 and 4
    acc = judge_accuracy(t, resamples=100).row(0, named=True)  # passing at the middle of the rubric's 0–1
    assert (acc["n"], acc["agree"], acc["no_grade"]) == (4, 3, 1)
    summary = summarize(t, resamples=100)  # what the report's notebook shows
    board = summary.overview.filter(pl.col("judge") == "judge-x")
    assert dict(zip(board["cell"], board["mean"])) == {"m1/imported@1": 0.375, "m2/imported@1": 1.0}
    cmp = compare_runs(run, run, n_boot=100)
    assert cmp.rows.height > 0 and (cmp.rows["n_matched"] > 0).all()


def test_imported_grades_take_blind_reviews_that_calibrate_the_leaderboard(tmp_path):
    rows = [{"id": f"q{n}", "question": f"question {n}", "response": f"answer {n} of {m}", "judge": "jx", "model": m,
             "score": 1 + (3 * n + len(m)) % 5} for n in range(15) for m in ("m1", "m22")]
    run = tmp_path / "run"
    import_verdicts(write_jsonl(tmp_path / "g.jsonl", rows), run, scale=(1, 5))
    assert command(tmp_path, "review", "export", str(run), str(tmp_path / "rev.json")).returncode == 0
    doc = json.loads((tmp_path / "rev.json").read_text())
    assert {str(e["scale"]) for e in doc["entries"]} == {"{'score': [1, 5]}"}  # the scale given, from the snapshot
    for n, entry in enumerate(doc["entries"][:20]):
        entry["review"] = {"scores": {"score": 1 + n % 5}}
    (tmp_path / "rev.json").write_text(json.dumps({**doc, "reviewer": "ann"}))
    applied = command(tmp_path, "review", "apply", str(run), str(tmp_path / "rev.json"))
    assert applied.returncode == 0, applied.stderr
    t = load_run(run)
    calibrated = summarize(t, resamples=100).calibrated  # PPI++
    assert sorted(calibrated["cell"]) == ["m1/imported@1", "m22/imported@1"] and calibrated["n_human"].sum() == 20
    agreement = judges_document(t, resamples=100)["judges"][0]["agreement"]
    assert {(r["criterion"], r["n"], r["state"]) for r in agreement} == {("score", 20, "ok"), ("composite", 20, "ok")}


def test_bad_rows_are_named_by_line_and_nothing_is_written(tmp_path):
    rows = pairwise_rows()[:4]
    rows[1] = {**rows[1], "verdict": "A>>>B"}
    rows[2] = {k: v for k, v in rows[2].items() if k != "judge"}
    rows[3] = {**rows[3], "Verdikt": "A>B"}
    src = write_jsonl(tmp_path / "bad.jsonl", rows[:3])
    with open(src, "a") as fh:
        fh.write("\n{not json\n" + json.dumps(rows[3]) + "\n" + json.dumps({**rows[0], "order": "CD"}) + "\n"
                 + json.dumps({**rows[0], "label": "B>A"}) + "\n")
    run = tmp_path / "run"
    with pytest.raises(ImportProblems) as err:
        import_verdicts(src, run)
    text = str(err.value)
    assert f"{src}: 6 bad row(s); nothing was imported" in text
    assert f"{src}:2: verdict 'A>>>B' is none of A>B, B>A, A=B" in text
    assert f"{src}:3: no judge; every pairwise row needs" in text
    assert f"{src}:5: not JSON" in text  # line 4 is blank: lines are counted as in the file
    assert f"{src}:6: unknown column(s) verdikt for pairwise verdicts; the columns are id, question," in text
    assert f"{src}:7: order 'CD' is neither AB (response_a shown first) nor BA" in text
    assert f"{src}:8: id 'pair-0' has another question, response or label on line 1" in text
    assert not run.exists() or not list(run.glob("*.jsonl"))


def test_a_grade_off_the_scale_given_or_a_criterion_that_is_no_id_is_named(tmp_path):
    rows = [{"id": "q1", "question": "?", "response": "r", "judge": "jx", "score": 7},
            {"id": "q2", "question": "?", "response": "r", "judge": "jx", "scores": {"a b": 3}}]
    with pytest.raises(ImportProblems) as err:
        import_verdicts(write_jsonl(tmp_path / "g.jsonl", rows), tmp_path / "run", scale=(1, 5))
    assert "g.jsonl:1: score 7 outside the scale 1–5 given (--scale)" in str(err.value)
    assert "g.jsonl:2: scores key(s) 'a b': a criterion must be 1–64 letters" in str(err.value)


def test_a_grade_that_contradicts_one_already_imported_is_refused_naming_its_line(tmp_path):
    run = tmp_path / "run"
    import_verdicts(write_jsonl(tmp_path / "first.jsonl", pairwise_rows()[:2]), run)
    before = snapshot(run)
    changed = [pairwise_rows()[0], {**pairwise_rows()[1], "verdict": "A=B"}]
    with pytest.raises(ImportProblems, match=r"changed.jsonl:2: its judgment \(j\w+\) is already given by the run "
                                             r"folder .* with another grade"):
        import_verdicts(write_jsonl(tmp_path / "changed.jsonl", changed), run)
    assert snapshot(run) == before


def test_a_write_that_fails_part_way_leaves_no_record_behind(tmp_path):
    run = tmp_path / "run"
    (run / "judgments.jsonl").mkdir(parents=True)  # the scenarios are written first, then this append fails
    with pytest.raises(StoreWriteError, match="writing judgments.jsonl"):
        import_verdicts(write_jsonl(tmp_path / "v.jsonl", pairwise_rows()[:4]), run)
    assert not (run / "scenarios.jsonl").exists()


def test_the_command_prints_what_it_added_and_exits_2_on_a_bad_file(tmp_path):
    src = write_jsonl(tmp_path / "v.jsonl", pairwise_rows()[:4])
    ok = command(tmp_path, "import", "verdicts", str(src), "--run-dir", str(tmp_path / "run"))
    assert ok.returncode == 0, ok.stderr
    assert "1 scenarios, 0 candidates, 4 judgments added; 0 already there" in ok.stdout
    bad = command(tmp_path, "import", "verdicts", str(write_jsonl(tmp_path / "b.jsonl", [{"id": "x"}])),
                  "--run-dir", str(tmp_path / "run"))
    assert bad.returncode == 2
    assert "b.jsonl:1: no question, response, judge" in bad.stderr
