"""The fault matrix: collect and every judging mode against every provider fault the fake can throw.

Each case runs the stage through the real path (bench.stage_runs → bench.models.client → the loopback fake) with
one fault switched on and a single retry, so some work fails for good. Then every planned item
must have a record that is either a success or a failure with its reason, no id may have two
successes, and a re-run with the fault off must complete exactly the failures.
"""

from __future__ import annotations

import asyncio
import collections
import json
from pathlib import Path

import pytest

from bench.judge.judgments import items_for, load_judges
from bench.core.records import Candidate, Judgment
from bench.run import open_run
from bench.stage_runs import run_collect, run_judge
from bench.core.store import RunStore
from bench.testing import grids

FAULTS = {
    "429": {"rate_429": 0.5, "retry_after_s": 0},
    "500": {"rate_500": 0.5},
    "reset": {"rate_reset": 0.5},
    "hang": {"rate_hang": 0.4, "hang_s": 5.0},
    "malformed": {"rate_malformed": 0.5},
    "empty": {"rate_empty": 0.5},
}
PACKED_FAULTS = {"truncated": {"packed_fault": "truncate"}, "partial": {"packed_fault": "partial"},
                 "wrong_ids": {"packed_fault": "wrong_ids"}}
STAGES = ["collect", "rubric", "packed", "checklist", "pairwise", "hybrid"]
CASES = [(s, f) for s in STAGES for f in FAULTS] + [("packed", f) for f in PACKED_FAULTS]


@pytest.fixture
def grid(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("BENCH_RUNS", str(tmp_path / "runs"))
    url = fake.url  # two models, four topics, one judge of each grading mode; a 0.5 s timeout, a single retry
    return grids.grid(
        tmp_path / "faults.yaml", url, name="faults", seed=4,
        models=[grids.model("m1", url, name="fake-a"), grids.model("m2", url, name="fake-b")],
        scenarios=grids.generate(topic=["email", "sleep", "focus", "lunch"]),
        judges=[grids.judge("rubric", url, name="judge-r"),
                grids.judge("packed", url, name="judge-b", pack_size=4),
                grids.judge("checklist", url, rubric="tip-checklist", name="judge-c"),
                grids.judge("pairwise", url, rubric="arena-pairwise", name="judge-p", baseline="m1/p@v1"),
                grids.judge("hybrid", url, rubric="tip-hybrid", name="judge-h")],
        limits={"max_concurrency": 8, "timeout_s": 0.5, "retries": 1})


def successes_per_id(run_dir: Path, kind: type) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for path in RunStore(run_dir).files(kind):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("error") is None:
                counts[rec["id"]] += 1
    return counts


def planned(run, stage: str) -> set[str]:
    store = RunStore(run.dir)
    if stage == "collect":
        return set(store.latest(Candidate))
    cands = [c for c in store.latest(Candidate).values() if c.ok]
    judge = load_judges(run, [stage])[0]
    return {i for it in items_for(judge, run.scenarios, cands) for i in judge.judgment_ids(it)}


def run_stage(params: Path, stage: str):
    run = open_run(params)
    if stage == "collect":
        return run, asyncio.run(run_collect(run, progress="none"))
    return run, asyncio.run(run_judge(run, judges=[stage], progress="none"))


@pytest.mark.parametrize(("stage", "fault"), CASES, ids=[f"{s}-{f}" for s, f in CASES])
def test_every_item_ends_done_or_failed_with_a_reason_and_a_rerun_completes_it(grid, fake, stage, fault):
    kind = Candidate if stage == "collect" else Judgment
    if stage != "collect":
        run_stage(grid, "collect")  # the answers to judge, with no fault
    fake.configure(**{**FAULTS, **PACKED_FAULTS}[fault], seed=7)
    run, _ = run_stage(grid, stage)
    fake.configure(rate_429=0, rate_500=0, rate_reset=0, rate_hang=0, rate_malformed=0, rate_empty=0,
                   packed_fault=None)
    want = planned(run, stage)
    latest = {i: r for i, r in RunStore(run.dir).latest(kind).items() if i in want}
    assert set(latest) == want, f"{len(want - set(latest))} planned items have no record at all"
    failed = {i for i, r in latest.items() if not r.ok}
    assert all(latest[i].error and latest[i].error_kind for i in failed), "a failure without its reason"
    if fault in FAULTS:
        assert fake.stats()["faults"], "the fault was never thrown"
    run_stage(grid, stage)  # the fault is off: only the failures are redone
    done = successes_per_id(run.dir, kind)
    assert {i: done[i] for i in want if done[i] != 1} == {}, "after the re-run every item has exactly one success"
    assert max(done.values()) == 1
