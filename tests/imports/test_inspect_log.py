"""`bench import inspect`: a log Inspect AI wrote itself (tests/fixtures/inspect/make_log.py, inspect-ai 0.3.285)
becomes scenarios with their targets, the model's answers and one automated judgment per scorer (C/I/P/N or a
number), whose means are the accuracies and means the log's `results` state."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from bench.analysis import load_run
from bench.core.records import Judgment, Scenario
from bench.core.store import RunStore
from bench.imports import ImportProblems, import_inspect, value_to_float
from bench.testing.in_process import command

LOG = Path(__file__).parents[1] / "fixtures" / "inspect" / "capitals.json"
ROOT = Path(__file__).parents[2]


def test_each_scorers_mean_is_the_accuracy_the_log_states(tmp_path):
    log = json.loads(LOG.read_text())
    got = import_inspect(LOG, tmp_path / "run")
    assert (got["scenarios"], got["candidates"], got["judgments"]) == (5, 5, 20)
    stated = {s["name"]: (s["metrics"].get("accuracy") or s["metrics"]["mean"])["value"]
              for s in log["results"]["scores"]}
    t = load_run(tmp_path / "run")
    means = t.scores.filter(pl.col("criterion") == "composite").group_by("judge").agg(pl.col("value").mean())
    assert dict(means.rows()) == pytest.approx(stated) and set(stated) == {"match", "includes", "graded", "brevity"}
    assert {k: v["mean"] for k, v in got["scorers"].items()} == pytest.approx(stated)
    values = {(j.judge_id, j.details["value"]): j.score for j in RunStore(tmp_path / "run").read(Judgment)}
    assert {v for j, v in values if j != "brevity"} == {"C", "I", "P", "N"}  # Inspect's letters, valued as it does
    assert {k: v for k, v in values.items() if k[0] == "graded"} == {
        ("graded", "C"): 1.0, ("graded", "P"): 0.5, ("graded", "I"): 0.0, ("graded", "N"): 0.0}


def test_samples_become_scenarios_with_their_target_and_answers_of_the_logs_model(tmp_path):
    import_inspect(LOG, tmp_path / "run")
    log = json.loads(LOG.read_text())
    scenarios = {s.fields["id"]: s for s in RunStore(tmp_path / "run").read(Scenario)}
    assert {k: (s.fields["input"], s.reference) for k, s in scenarios.items()} == {
        x["id"]: (x["input"], {"target": x["target"]}) for x in log["samples"]}
    assert {s.source for s in scenarios.values()} == {f"imported from {LOG}"}
    t = load_run(tmp_path / "run")
    assert t.candidates["cell"].unique().to_list() == ["mockllm/model/capitals@0"]
    answers = dict(zip(t.candidates["scenario"], t.candidates["output"]))
    assert sorted(answers.values()) == sorted(x["output"]["completion"] for x in log["samples"])
    assert t.candidates["completion_tokens"].sum() == sum(x["output"]["usage"]["output_tokens"] for x in log["samples"])


def test_value_to_float_follows_inspects_own():
    assert [value_to_float(v) for v in ("C", "I", "P", "N", "yes", "False", "0.25", 3, True)] == \
        [1.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.25, 3.0, 1.0]
    assert value_to_float("maybe") is None and value_to_float([1]) is None  # Inspect: 0 with a warning; here failed


def test_a_log_without_samples_is_refused_saying_why(tmp_path):
    log = json.loads(LOG.read_text())
    (tmp_path / "header.json").write_text(json.dumps({**log, "samples": []}))
    with pytest.raises(ImportProblems, match="holds no samples .*--no-log-samples"):
        import_inspect(tmp_path / "header.json", tmp_path / "run")
    (tmp_path / "x.eval").write_bytes(b"PK\x03\x04")
    with pytest.raises(ImportProblems, match="not a JSON Inspect log .*--log-format json"):
        import_inspect(tmp_path / "x.eval", tmp_path / "run")


def test_bench_import_inspect_twice_adds_nothing_the_second_time(tmp_path):
    run = tmp_path / "run"
    args = ("import", "inspect", str(LOG), "--run-dir", str(run))
    first = command(tmp_path, *args)  # the command's parser and printing, in this process
    assert first.returncode == 0, first.stderr
    assert "5 scenarios, 5 candidates, 20 judgments added; 0 already there" in first.stdout
    assert "graded: mean 0.4 (the log's results: 0.4)" in first.stdout
    assert "brevity: mean 0.5248 (the log's results: 0.5248)" in first.stdout
    second = command(tmp_path, *args)
    assert "0 scenarios, 0 candidates, 0 judgments added; 30 already there" in second.stdout
