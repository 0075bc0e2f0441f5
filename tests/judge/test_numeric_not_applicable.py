"""A numeric check on a reference with no number ("Paris") does not apply: the answer is left out of the check's
mean, counted as not applicable where the checks are summarised, never scored 0; `bench validate` says so first,
naming the scenario and the check."""

from __future__ import annotations

import asyncio
import json

import polars as pl
import pytest

from bench.analysis import summarize
from bench.core.records import Judgment
from bench.core.store import RunStore
from bench.run import open_run
from bench.stage_runs import run_collect
from bench.testing.grids import grid, judge, model, prompt
from bench.testing.in_process import command

RUBRIC = """---
id: nums
version: "1"
mode: automated
checks:
  - {id: num, kind: numeric, reference: number}
  - {id: said, kind: regex, pattern: "\\\\w"}
---
"""
ROWS = {"Q-ONE": ("10", "It is 10."), "Q-TWO": ("Paris", "Paris, of course."), "Q-THREE": ("7", "Maybe 8.")}


@pytest.fixture()
def params(tmp_path, fake):
    with open(tmp_path / "qa.jsonl", "w") as fh:
        for q, (number, _) in ROWS.items():
            fh.write(json.dumps({"question": q, "number": number}) + "\n")
    (tmp_path / "nums.md").write_text(RUBRIC)
    fake.configure(replies=[{"match": q, "content": reply} for q, (_, reply) in ROWS.items()])
    return grid(tmp_path / "qa.yaml", fake.url, name="qa", models=[model("m1", fake.url)],
                prompts=[prompt("ask", "Question {question}")],
                scenarios={"dataset": {"path": "qa.jsonl", "fields": {"question": "question"},
                                       "reference": {"number": "number"}}},
                judges=[judge("ref", fake.url, rubric=str(tmp_path / "nums.md"))])


def test_validate_warns_naming_the_scenario_and_the_check(tmp_path, params):
    out = command(tmp_path, "validate", str(params))
    assert out.returncode == 0, out.stdout + out.stderr
    [line] = [x for x in out.stdout.splitlines() if x.startswith("warning:")]
    assert "judge 'ref': check 'num' (numeric) does not apply to scenario s" in line
    assert "(question: 'Q-TWO')" in line and "the reference 'Paris' holds no number" in line


def test_the_answer_to_paris_is_left_out_of_the_mean_and_counted_not_applicable(tmp_path, params):
    run = open_run(params, run_dir=tmp_path / "runs" / "qa")
    asyncio.run(run_collect(run, progress="none", judge=True))
    [paris] = [j for j in RunStore(run.dir).latest(Judgment).values() if j.scores is not None and "num" not in j.scores]
    assert paris.score == 1.0, "the mean of the checks that apply (said), not (0 + 1) / 2"
    assert [c["applicable"] for c in paris.details["checks"] if c["id"] == "num"] == [False]
    board = summarize(run.dir, resamples=50).board.filter(pl.col("judge") == "ref")
    num = board.filter(pl.col("criterion") == "num").row(0, named=True)
    assert (num["mean"], num["items"], num["not_applicable"]) == (0.5, 2, 1), "10 right, 8 for 7 wrong; Paris apart"
    said = board.filter(pl.col("criterion") == "said").row(0, named=True)
    assert (said["items"], said["not_applicable"]) == (3, 0)
