"""`bench compare` logs the comparison to MLflow as a run linking both runs' sweep runs, with the differences as
metrics (again: the same runs), and run B's report links to the diff report once it is rendered again."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import polars as pl
import pytest

from bench.analysis import compare_runs
from bench.testing.grids import NOT_INHERITED
from bench.testing.in_process import command
from tests.compare.conftest import CHANGED_A, CHANGED_B


def _client(run_dir: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mlflow import MlflowClient  # noqa: PLC0415 (mlflow: 2 s, only these tests read a store)
    return MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")


def _runs(run_dir: Path) -> list:
    client = _client(run_dir)
    return client.search_runs([client.get_experiment_by_name(f"bench/{run_dir.name}").experiment_id])


def _level(runs: list, level: str) -> list:
    return [r for r in runs if r.data.tags.get("bench.level") == level]


def test_the_comparison_is_an_mlflow_run_linking_both_runs_and_run_b_report_links_to_it(two_runs):
    tmp, a, b = two_runs
    assert not (a / "mlflow.db").exists(), "an untracked run gets no store from a comparison"
    untracked = command(tmp, "compare", str(a), str(b), "--map", f"{CHANGED_A}={CHANGED_B}", "--no-report",
                        drop=NOT_INHERITED)
    assert untracked.returncode == 0, untracked.stderr[-3000:]
    (first,) = _level(_runs(b), "comparison")
    assert "bench.compare.a_run_id" not in first.data.tags and not (a / "mlflow.db").exists()
    for run in (a, b):
        done = command(tmp, "track", str(run), drop=NOT_INHERITED)
        assert done.returncode == 0, done.stderr[-3000:]
    out = command(tmp, "compare", str(a), str(b), "--map", f"{CHANGED_A}={CHANGED_B}", drop=NOT_INHERITED)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_a = _level(_runs(a), "sweep")[0].info.run_id
    runs = _runs(b)
    sweep_b = _level(runs, "sweep")[0].info.run_id
    (comparison,) = _level(runs, "comparison")  # the same run, updated
    assert comparison.info.run_id == first.info.run_id
    assert f"mlflow: comparison run {comparison.info.run_id}" in out.stdout
    tags = comparison.data.tags
    assert (tags["bench.compare.a"], tags["bench.compare.b"]) == ("ca", "cb")
    assert tags["bench.compare.a_run_id"] == sweep_a and tags["bench.compare.b_run_id"] == sweep_b
    assert tags["mlflow.parentRunId"] == sweep_b and tags["bench.compare.a_store"].endswith("ca/mlflow.db")
    assert comparison.data.metrics["significant"] == 3 and comparison.data.metrics["only_in_a"] == 2
    cells = {r.data.tags["bench.compare.cells"]: r for r in _level(runs, "comparison.cells")}
    assert set(cells) == {"m/p@v1 -> m/p@v1", f"{CHANGED_A} -> {CHANGED_B}"}
    changed = cells[f"{CHANGED_A} -> {CHANGED_B}"].data.metrics
    row = (compare_runs(a, b, mapping={CHANGED_A: CHANGED_B}).rows
           .filter((pl.col("cell_a") == CHANGED_A) & (pl.col("criterion") == "composite")).row(0, named=True))
    assert changed["judge.grader.composite.diff"] == pytest.approx(row["diff"])
    assert changed["judge.grader.composite.ci_low"] == pytest.approx(row["ci_low"])
    assert changed["judge.arena.win_rate_b"] > 0.5
    artifacts = {f.path for f in _client(b).list_artifacts(comparison.info.run_id, "comparison")}
    assert artifacts == {"comparison/index.html", "comparison/comparison.json"}

    report = command(tmp, "report", str(b), "--resamples", "200")
    assert report.returncode == 0, report.stderr[-3000:]
    page = (tmp / "reports" / "cb" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<a href="\.\./ca-vs-cb/index\.html">compared with ca</a> \(3 significantly better, 0 worse',
                     page)
    assert (tmp / "reports" / "cb" / "../ca-vs-cb/index.html").resolve().is_file()
