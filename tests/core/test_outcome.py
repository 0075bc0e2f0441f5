"""A sweep that ends with failed items says so: exit code 3, a summary, the retry command, and the same
counts in the HTML report and on the MLflow parent run."""

from __future__ import annotations

import html
import os
import re

from bench.core.outcome import EXIT_FAILED_ITEMS
from bench.testing.grids import bench, grid, judge


def test_failed_items_show_the_same_counts_in_the_terminal_report_and_mlflow(tmp_path, fake):
    fake.configure(replies=[{"match": "The response to grade:", "content": "no grade"},  # parse failures
                            {"match": "about t0.", "status": 503}])  # and one answer that never comes
    params = grid(tmp_path / "g.yaml", fake.url, name="endings", topics=4, judges=[judge("grader", fake.url)])
    out = bench(tmp_path, "sweep", str(params))
    assert out.returncode == EXIT_FAILED_ITEMS, out.stdout[-3000:] + out.stderr[-3000:]
    assert "4 item(s) failed:" in out.stdout
    table = {tuple(ln.split()[:3]): int(ln.split()[3]) for ln in out.stdout.splitlines()
             if ln.startswith(("collect ", "judge ")) and len(ln.split()) >= 4 and ln.split()[3].isdigit()}
    assert table == {("collect", "m1", "server"): 1, ("judge", "grader", "parse"): 3}
    assert f"bench sweep {params}" in out.stdout and out.stdout.rstrip().splitlines()[-1].startswith("report: ")

    report = (tmp_path / "reports/endings/index.html").read_text()
    section = html.unescape(report[report.index("Failed items"):report.index("Leaderboard", report.index("Failed items"))])
    assert re.search(r"collect.{0,200}m1.{0,200}server.{0,200}>1<", section, re.S)
    assert re.search(r"judge.{0,200}grader.{0,200}parse.{0,200}>3<", section, re.S)

    import mlflow
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'runs/endings/mlflow.db'}")
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    parent = next(r for r in mlflow.search_runs(experiment_names=["bench/endings"], output_format="list")
                  if r.data.tags.get("bench.level") == "sweep")
    m = parent.data.metrics
    assert m["failed_items"] == 4 and m["failed.collect.m1.server"] == 1 and m["failed.judge.grader.parse"] == 3
    assert parent.data.tags["bench.outcome"] == "failed items"
    assert parent.data.tags["bench.workers"] == "1"  # runs/endings/executions.jsonl: one local worker


def test_a_clean_sweep_exits_zero_with_no_summary(tmp_path, fake):
    out = bench(tmp_path, "sweep", str(grid(tmp_path / "g.yaml", fake.url)), "--no-report", "--no-track")
    assert out.returncode == 0 and "failed:" not in out.stdout


def test_help_lists_every_stage(tmp_path):
    out = bench(tmp_path, "sweep", "--help")
    assert "{collect,judge}" in out.stdout and "--wait" in out.stdout
