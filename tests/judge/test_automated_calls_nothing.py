"""A checks-only judge calls no model: its model needs no key to pass the preflight, and its judgments cost a
known zero (summed in the usage table, never "unpriced")."""

from __future__ import annotations

import json

from bench.analysis import load_run, summarize
from bench.testing.grids import grid, judge, model, prompt
from bench.testing.in_process import run_stages

CHECKS = """---
id: exact
version: "1"
mode: automated
checks:
  - {id: exact, kind: exact_match, reference: answer}
---
"""


def test_an_automated_judge_needs_no_key_and_costs_a_known_zero(tmp_path, fake):
    with open(tmp_path / "qa.jsonl", "w") as fh:
        for q, a in (("capital of France", "Paris"), ("two plus two", "4")):
            fh.write(json.dumps({"question": q, "answer": a}) + "\n")
    (tmp_path / "exact.md").write_text(CHECKS)
    checks = judge("exact", fake.url, rubric=str(tmp_path / "exact.md"))
    checks.pop("api_base")
    checks["model"] = "openai/gpt-4o-mini"  # a cloud model whose key is not set: never called
    fake.configure(replies=[{"match": "France", "content": "Paris"}, {"match": "plus", "content": "five"}])
    params = grid(tmp_path / "qa.yaml", fake.url, name="qa", models=[model("m1", fake.url)],
                  prompts=[prompt("ask", "Answer: {question}")],
                  scenarios={"dataset": {"path": "qa.jsonl", "fields": {"question": "question"},
                                         "reference": {"answer": "answer"}}},
                  judges=[checks])
    done = run_stages(tmp_path, params, drop=("OPENAI_API_KEY",))
    assert done.returncode == 0, done.stderr[-2000:]
    tables = load_run(tmp_path / "runs" / "qa")
    usage = summarize(tables).usage_judges.to_dicts()
    assert [(u["judge"], u["calls"], u["cost_usd"], u["unpriced_records"]) for u in usage] == [("exact", 0, 0.0, 0)]
    scores = sorted(tables.judgments["score"].to_list())
    assert scores == [0.0, 1.0]


def test_a_checks_only_judge_needs_no_model_and_an_llm_judge_without_one_is_refused(tmp_path, fake):
    with open(tmp_path / "qa.jsonl", "w") as fh:
        fh.write(json.dumps({"question": "capital of France", "answer": "Paris"}) + "\n")
    (tmp_path / "exact.md").write_text(CHECKS)
    fake.configure(reset=True, replies=[{"match": "France", "content": "Paris"}])
    grid_of = lambda name, judges: grid(tmp_path / f"{name}.yaml", fake.url, name=name,  # noqa: E731
                                        models=[model("m1", fake.url)], prompts=[prompt("ask", "Answer: {question}")],
                                        scenarios={"dataset": {"path": "qa.jsonl", "fields": {"question": "question"},
                                                               "reference": {"answer": "answer"}}}, judges=judges)
    done = run_stages(tmp_path, grid_of("bare", [{"id": "exact", "rubric": str(tmp_path / "exact.md")}]),
                      drop=("OPENAI_API_KEY",))
    assert done.returncode == 0, done.stderr[-2000:]
    judged = load_run(tmp_path / "runs" / "bare").judgments
    assert judged.select("judge", "judge_model", "score").rows() == [("exact", "none", 1.0)]
    assert fake.stats()["requests"] == 1, "the answer only: nothing was sent for the checks"
    refused = run_stages(tmp_path, grid_of("llm", [{"id": "tipper", "rubric": "tip-v1"}]))
    assert refused.returncode != 0 and "judge 'tipper' has no model" in refused.stderr, refused.stderr[-2000:]
    assert "add `model: provider/name`" in refused.stderr
