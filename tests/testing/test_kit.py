"""The test kit itself: a rubric bench loads, the environment a bench subprocess gets, and records whose defaults
say what a test did not. That a started command left running is killed with its kernels: tests/test_quiet.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.config.rubrics import load_rubric
from bench.core.records import Candidate
from bench.testing.grids import NOT_INHERITED, ROOT, env, rubric
from bench.testing.records import candidate, judgment, scenario


def test_a_written_rubric_loads_with_each_criterions_scale(tmp_path):
    path = rubric(tmp_path / "mixed.md", "quality", ("clarity", {0: "bad", 1: "fair", 2: "good"}))
    loaded = load_rubric("mixed.md", tmp_path)
    assert (loaded.id, loaded.version, loaded.mode) == ("mixed", "1", "rubric")
    assert [(c.id, c.scale) for c in loaded.criteria] == [("quality", (1, 5)), ("clarity", (0, 2))]
    assert "MARKER-MIXED-RUBRIC: grade the answer." in path.read_text()


def test_the_environment_keeps_the_tests_own_and_drops_what_a_run_must_not_inherit(tmp_path, monkeypatch):
    for name in NOT_INHERITED:
        monkeypatch.setenv(name, "inherited")
    monkeypatch.setenv("T_KEPT", "kept")
    monkeypatch.setenv("T_DROPPED", "dropped")
    monkeypatch.setenv("BENCH_T_STRAY", "a BENCH_* variable the kit did not set")
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "stray-cache") + "/")
    monkeypatch.setenv("BENCH_CHROMIUM", "/where/the/browser/is")
    got = env(tmp_path, drop=("T_DROPPED",), MLFLOW_TRACKING_URI="given", BENCH_T_NEW="new")
    assert not {"BENCH_ONLINE_PRICES", "DASK_SCHEDULER_ADDRESS", "T_DROPPED", "BENCH_T_STRAY", "BENCH_CACHE"} & set(got)
    assert (got["MLFLOW_TRACKING_URI"], got["T_KEPT"], got["BENCH_T_NEW"]) == ("given", "kept", "new")
    assert got["BENCH_CHROMIUM"] == "/where/the/browser/is"  # how the suite is run, kept
    assert (got["BENCH_RUNS"], got["BENCH_REPORTS"]) == (str(tmp_path / "runs"), str(tmp_path / "reports"))
    assert env(tmp_path, BENCH_CACHE="given")["BENCH_CACHE"] == "given"  # a test's own, passed on


def test_a_stray_bench_variable_of_the_shell_never_reaches_a_run(tmp_path):
    """The suite started with BENCH_CACHE, BENCH_RUNS and BENCH_REPORTS set (a researcher's shell): a test that
    counts every request (the cache must start empty) still passes, and nothing is written where they point."""
    stray = {"BENCH_CACHE": str(tmp_path / "stray-cache") + "/", "BENCH_RUNS": str(tmp_path / "stray-runs"),
             "BENCH_REPORTS": str(tmp_path / "stray-reports"), "BENCH_CACHE_SHARDS": "1"}
    test = "tests/core/test_accounting.py::test_cache_hits_are_counted_apart_from_requests"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", test], cwd=ROOT, env={**os.environ, **stray}, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
    assert not [name for name, value in stray.items() if value.startswith("/") and Path(value).exists()]


def test_records_have_plain_defaults_and_a_failure_has_no_output_or_score():
    s = scenario({"topic": "sleep"})
    answer = candidate(s, model_id="m1")
    assert (answer.scenario_id, answer.model, answer.output) == (s.id, "openai/m1", f"answer to {s.id}")
    assert candidate(s, model_id="m1").id == answer.id and candidate("s1").id != candidate("s2").id
    failed = candidate("s1", error="HTTP 500")
    assert isinstance(failed, Candidate) and not failed.ok and failed.output is None
    grade = judgment(answer, judge_id="grader")
    assert (grade.candidate_ids, grade.scenario_id, grade.score, grade.judge_model) == \
        ([answer.id], s.id, 4.0, "openai/grader")
    assert judgment(answer, error="unparseable").score is None
    pair = judgment(mode="pairwise", candidate_ids=["a", "b"], scenario_id="s", order="AB", verdict="A>B")
    assert pair.score is None and pair.verdict == "A>B"
